package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// This file is the client's Streamable HTTP transport (2025 era): POST
// requests answered with JSON or an SSE stream, resuming a broken request
// stream with Last-Event-ID, and the standalone GET stream.

// maxErrorBody bounds how much of an error response the client keeps.
const maxErrorBody = 4 << 10

// setHeaders sets the headers every request of session sid carries.
func (cs *ClientSession) setHeaders(req *http.Request, sid string) {
	for k, vs := range cs.c.opts.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	cs.mu.Lock()
	init, modern := cs.init, cs.modern
	cs.mu.Unlock()
	switch {
	case modern:
		req.Header.Set("Mcp-Protocol-Version", clientStatelessVersion)
	case init != nil:
		req.Header.Set("Mcp-Protocol-Version", init.ProtocolVersion)
	}
}

// post sends one JSON-RPC message of session sid and returns the response,
// or an error for a status the caller need not look at: 404 for a session
// becomes a *sessionGoneError, any other non-2xx an *HTTPError (or the
// JSON-RPC *Error its body carries).
func (cs *ClientSession) post(ctx context.Context, sid string, body []byte, extra http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cs.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	cs.setHeaders(req, sid)
	for k, v := range extra {
		req.Header[k] = v
	}
	resp, err := cs.c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, transportError(err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if resp.StatusCode == http.StatusNotFound && sid != "" {
		return nil, &sessionGoneError{id: sid}
	}
	var m Message
	if json.Unmarshal(b, &m) == nil && m.Error != nil {
		return nil, fmt.Errorf("HTTP %d: %w", resp.StatusCode, m.Error)
	}
	return nil, &HTTPError{Status: resp.StatusCode, Body: string(b)}
}

// transportError drops the "Post URL" that net/http puts before an
// error: the request's own error names the method and, where it helps,
// the URL (requestError), once.
func transportError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// requestError gives err, the failure of a request named method, its
// context: "mcp: METHOD: " and, for the requests that open a session
// (initialize, server/discover), the server URL, "mcp: initialize URL: ".
// Layers below add none of this, so it appears once.
func (cs *ClientSession) requestError(method string, err error) error {
	if method == "initialize" || method == "server/discover" {
		return fmt.Errorf("mcp: %s %s: %w", method, cs.url, err)
	}
	return fmt.Errorf("mcp: %s: %w", method, err)
}

// notify sends a notification.
func (cs *ClientSession) notify(ctx context.Context, method string, params any) error {
	b, err := encodeNotification(method, params)
	if err != nil {
		return err
	}
	resp, err := cs.post(ctx, cs.ID(), b, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// roundTrip sends one request and waits for its response, on the POST's
// own response or, when that stream breaks after an event id, on the
// stream resumed with Last-Event-ID. It returns the Mcp-Session-Id the
// server set (initialize).
func (cs *ClientSession) roundTrip(ctx context.Context, method string, params, result any, progress ProgressFunc) (string, error) {
	id := json.RawMessage(strconv.FormatInt(cs.nextID.Add(1), 10))
	var p json.RawMessage
	if params != nil {
		var err error
		if p, err = json.Marshal(params); err != nil {
			return "", cs.requestError(method, fmt.Errorf("encoding params: %w", err))
		}
	}
	if progress != nil {
		tok := cs.registerProgress(progress)
		defer cs.unregisterProgress(tok)
		var err error
		if p, err = withMeta(p, "progressToken", strconv.Quote(tok)); err != nil {
			return "", cs.requestError(method, err)
		}
	}
	var extra http.Header
	if cs.isModern() {
		var err error
		if p, extra, err = cs.modernRequest(method, p); err != nil {
			return "", cs.requestError(method, err)
		}
	}
	body, err := json.Marshal(&Message{JSONRPC: "2.0", ID: id, Method: method, Params: p})
	if err != nil {
		return "", err
	}
	sid := cs.ID()
	resp, err := cs.post(ctx, sid, body, extra)
	if err != nil {
		return "", cs.requestError(method, err)
	}
	newSID := resp.Header.Get("Mcp-Session-Id")
	if newSID != "" {
		sid = newSID
	}
	m, err := cs.readResponse(ctx, sid, resp, canonicalID(id))
	if err != nil {
		return "", cs.requestError(method, err)
	}
	if progress != nil {
		// Every progress notification before the response is queued
		// ahead of this barrier: run them before returning.
		if err := cs.queue.barrier(ctx); err != nil {
			return "", err
		}
	}
	if m.Error != nil {
		return newSID, m.Error
	}
	if cs.isModern() {
		if ir := inputRequired(m.Result); ir != nil {
			return newSID, ir
		}
	}
	if result != nil {
		if err := json.Unmarshal(m.Result, result); err != nil {
			return "", cs.requestError(method, fmt.Errorf("decoding result: %w", err))
		}
	}
	return newSID, nil
}

// withMeta sets _meta[key] to the JSON value in a params object.
func withMeta(p json.RawMessage, key string, value string) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if len(p) > 0 && string(p) != "null" {
		if err := json.Unmarshal(p, &obj); err != nil {
			return nil, fmt.Errorf("params must be a JSON object to carry _meta: %w", err)
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := obj["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("_meta: %w", err)
		}
	}
	meta[key] = json.RawMessage(value)
	mb, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	obj["_meta"] = mb
	return json.Marshal(obj)
}

// streamState is where a stream got to: the last event id, and the
// reconnection delay the server asked for.
type streamState struct {
	lastID string
	retry  time.Duration
	// onMessage, if set, sees every message before it is handled.
	onMessage func(*Message)
}

// readResponse reads the answer to the request with id key from resp: a
// JSON body, or an SSE stream that carries the requests and notifications
// related to the request before its response. A stream that ends early is
// resumed with Last-Event-ID (any process of the server can serve it).
func (cs *ClientSession) readResponse(ctx context.Context, sid string, resp *http.Response, key string) (*Message, error) {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode == http.StatusAccepted || mt == "application/json" {
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxEventBytes+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxEventBytes {
			return nil, errEventTooLarge
		}
		msgs, _, rerr := DecodeMessages(b)
		if rerr != nil {
			return nil, fmt.Errorf("bad response body: %w", rerr)
		}
		for _, m := range msgs {
			if m.IsResponse() && canonicalID(m.ID) == key {
				return m, nil
			}
			cs.handleIncoming(m)
		}
		return nil, errors.New("the server's JSON answer holds no response to the request")
	}
	if mt != "text/event-stream" {
		resp.Body.Close()
		return nil, fmt.Errorf("unexpected Content-Type %q", resp.Header.Get("Content-Type"))
	}
	st := &streamState{}
	failures := 0
	for {
		m, err := cs.readStream(resp.Body, key, st)
		resp.Body.Close()
		if m != nil {
			return m, nil
		}
		if st.lastID == "" || cs.isModern() {
			return nil, fmt.Errorf("stream ended before the response, with no event id to resume from: %v", err)
		}
		if err == nil {
			failures = 0 // the stream ended cleanly (retry:)
		}
		for {
			if failures >= cs.c.opts.MaxResumeAttempts {
				return nil, fmt.Errorf("resuming the stream after %s: %d attempts failed: %v", st.lastID, failures, err)
			}
			if werr := sleepCtx(ctx, cs.backoff(st.retry, failures)); werr != nil {
				return nil, werr
			}
			resp, err = cs.get(ctx, sid, st.lastID)
			if err == nil {
				break
			}
			if errors.Is(err, ErrSessionNotFound) {
				return nil, err
			}
			failures++
		}
	}
}

// readStream reads SSE events from r, handling every message that is not
// the response with id key, until that response (returned) or the end.
func (cs *ClientSession) readStream(r io.Reader, key string, st *streamState) (*Message, error) {
	sr := newSSEReader(r)
	for {
		ev, err := sr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, nil
			}
			return nil, err
		}
		if ev.HasID {
			st.lastID = ev.ID
		}
		if ev.Retry > 0 {
			st.retry = ev.Retry
		}
		if len(bytes.TrimSpace(ev.Data)) == 0 {
			continue // priming event
		}
		msgs, _, rerr := DecodeMessages(ev.Data)
		if rerr != nil {
			cs.c.log.Warn("mcp client: undecodable SSE event", "err", rerr, "event", ev.String())
			continue
		}
		for _, m := range msgs {
			if key != "" && m.IsResponse() && canonicalID(m.ID) == key {
				return m, nil
			}
			if st.onMessage != nil {
				st.onMessage(m)
			}
			cs.handleIncoming(m)
		}
	}
}

// get opens a GET stream of session sid, resuming after lastID if set.
func (cs *ClientSession) get(ctx context.Context, sid, lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cs.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	cs.setHeaders(req, sid)
	resp, err := cs.c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if resp.StatusCode == http.StatusNotFound && sid != "" {
		return nil, &sessionGoneError{id: sid}
	}
	return nil, &HTTPError{Status: resp.StatusCode, Body: string(b)}
}

// backoff is the wait before a reconnection: the server's retry (or
// RetryDelay), doubled for every failed attempt, at most MaxRetryDelay.
func (cs *ClientSession) backoff(retry time.Duration, failures int) time.Duration {
	d := retry
	if d <= 0 {
		d = cs.c.opts.RetryDelay
	}
	for range min(failures, 16) {
		d *= 2
	}
	return min(d, max(cs.c.opts.MaxRetryDelay, retry))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// startGET starts the standalone GET stream loop of the current session,
// stopping the previous one.
func (cs *ClientSession) startGET() {
	ctx, stop := context.WithCancel(cs.ctx)
	cs.mu.Lock()
	if cs.getStop != nil {
		cs.getStop()
	}
	cs.getStop = stop
	sid := cs.id
	cs.mu.Unlock()
	if !cs.goSession(func() { cs.getLoop(ctx, sid) }) {
		stop()
	}
}

// goSession runs f on a goroutine that Close waits for, unless the
// session is closed.
func (cs *ClientSession) goSession(f func()) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return false
	}
	cs.wg.Add(1)
	go func() {
		defer cs.wg.Done()
		f()
	}()
	return true
}

// getLoop keeps the standalone GET stream of session sid open: after the
// server ends it (with "retry:", e.g. at a Lambda deadline) or the
// connection drops, it reconnects after the delay with the last event id,
// so nothing is lost or repeated, whichever process answers.
func (cs *ClientSession) getLoop(ctx context.Context, sid string) {
	st := &streamState{}
	failures := 0
	for ctx.Err() == nil {
		resp, err := cs.get(ctx, sid, st.lastID)
		switch {
		case err == nil:
			before := st.lastID
			_, rerr := cs.readStream(resp.Body, "", st)
			resp.Body.Close()
			if rerr == nil || st.lastID != before {
				failures = 0
			} else {
				failures++
			}
		case errors.Is(err, ErrSessionNotFound):
			if ctx.Err() != nil {
				return
			}
			if cs.c.opts.Reconnect {
				if rerr := cs.reinitialize(cs.ctx, sid); rerr != nil {
					cs.c.log.Error("mcp client: re-initializing after the session was lost", "url", cs.url, "err", rerr)
					// Try again later: a new loop meets the 404 again.
					if sleepCtx(cs.ctx, cs.backoff(0, failures+1)) == nil {
						cs.startGET()
					}
				}
				return // reinitialize started a new loop
			}
			cs.c.log.Error("mcp client: session not found; the GET stream stops", "url", cs.url, "session", sid)
			return
		default:
			var he *HTTPError
			if errors.As(err, &he) && he.Status == http.StatusMethodNotAllowed {
				cs.c.log.Info("mcp client: the server offers no GET stream", "url", cs.url)
				return
			}
			if ctx.Err() != nil {
				return
			}
			failures++
			cs.c.log.Debug("mcp client: GET stream failed; retrying", "err", err, "failures", failures)
		}
		if sleepCtx(ctx, cs.backoff(st.retry, failures)) != nil {
			return
		}
	}
}

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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
	init, era2026 := cs.init, cs.era2026
	cs.mu.Unlock()
	switch {
	case era2026:
		req.Header.Set("Mcp-Protocol-Version", ProtocolVersion2026)
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
	resp, err := cs.do(req)
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
		return nil, &HTTPError{Status: resp.StatusCode, Body: string(b), RPC: m.Error}
	}
	return nil, &HTTPError{Status: resp.StatusCode, Body: string(b)}
}

// postStream posts body, a request of method that the server answers
// with an SSE stream (subscriptions/listen, events/stream), and returns
// the response; the caller reads and closes its body. Any other answer
// is an error: the server's JSON-RPC *Error when it refused the request,
// otherwise one that names method and what the server answered.
func (cs *ClientSession) postStream(ctx context.Context, method, sid string, body []byte, extra http.Header) (*http.Response, error) {
	resp, err := cs.post(ctx, sid, body, extra)
	if err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var m Message
	if mt == "application/json" && json.Unmarshal(b, &m) == nil && m.Error != nil {
		return nil, m.Error
	}
	return nil, fmt.Errorf("%s answered %s: %s", method, resp.Header.Get("Content-Type"), b)
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

// abandoned tells the server, once ctx has ended, that the request id
// of method was given up (notifications/cancelled), so that what it
// started stops instead of running to its own timeout. Only for a
// 2025-era session: a 2026-era request is cancelled by closing its HTTP
// request, which the client already did. Never for initialize (the
// specification forbids it). Best effort: one POST bounded by
// cancelNotifyTimeout, whatever ctx.
func (cs *ClientSession) abandoned(ctx context.Context, method string, id json.RawMessage) {
	if ctx.Err() == nil || method == "initialize" || cs.is2026() || cs.ID() == "" {
		return
	}
	reason := "the client gave up the request"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		reason = "the client's deadline passed"
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelNotifyTimeout)
	defer cancel()
	if err := cs.notify(cctx, "notifications/cancelled", &CancelledParams{RequestID: id, Reason: reason}); err != nil {
		cs.c.log.Debug("mcp client: notifications/cancelled", "url", cs.url, "err", err)
	}
}

// cancelNotifyTimeout bounds the notifications/cancelled of an abandoned
// request.
const cancelNotifyTimeout = 2 * time.Second

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
	if cs.is2026() {
		var err error
		if p, extra, err = cs.request2026(method, p); err != nil {
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
		cs.abandoned(ctx, method, id)
		return "", cs.requestError(method, err)
	}
	newSID := resp.Header.Get("Mcp-Session-Id")
	if newSID != "" {
		sid = newSID
	}
	m, err := cs.readResponse(ctx, sid, resp, canonicalID(id))
	if err != nil {
		cs.abandoned(ctx, method, id)
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
	if cs.is2026() {
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

// streamState is where a stream got to: the last event id, the
// reconnection delay the server asked for, and what it carried.
type streamState struct {
	lastID string
	retry  time.Duration
	// onMessage, if set, sees every message before it is handled.
	onMessage func(*Message)
	// private: messages go to onMessage only, not to the session's
	// handlers (an events/stream carries its subscription's messages
	// only, which StreamEvents hands on).
	private bool
	// events counts the events read (over all resumptions of one
	// request's stream), messages the JSON-RPC messages among them.
	events, messages int
	// maxEvents, if not 0, bounds events: a request's stream that sends
	// more before its response fails.
	maxEvents int
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
	st := &streamState{maxEvents: cs.c.opts.MaxStreamMessages}
	failures := 0
	for {
		messages := st.messages
		m, err := cs.readStream(resp.Body, key, st)
		resp.Body.Close()
		if m != nil {
			return m, nil
		}
		if fatalStreamError(err) {
			return nil, err
		}
		if st.lastID == "" || cs.is2026() {
			return nil, fmt.Errorf("stream ended before the response, with no event id to resume from: %v", err)
		}
		// A resumption that carried a message made progress; one that
		// carried none (it ended at once, or stayed silent) counts as
		// failed, so that a server that ends every stream at once gets
		// fewer and fewer attempts, and then an error.
		if st.messages > messages {
			failures = 0
		} else {
			failures++
		}
		for {
			if failures >= cs.c.opts.MaxResumeAttempts {
				return nil, fmt.Errorf("resuming the stream after %s: %d attempts in a row brought nothing (last: %v)", st.lastID, failures, errOrEnd(err))
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

// fatalStreamError reports whether err ends a stream for good: the server
// sends what is not MCP, or more than the client takes.
func fatalStreamError(err error) bool {
	return errors.Is(err, errUndecodable) || errors.Is(err, errEventTooLarge) || errors.Is(err, errTooManyEvents)
}

func errOrEnd(err error) any {
	if err == nil {
		return "the stream ended"
	}
	return err
}

// readStream reads SSE events from r, handling every message that is not
// the response with id key, until that response (returned) or the end
// (nil, nil). An event that is not JSON-RPC ends it with errUndecodable,
// more than st.maxEvents events with errTooManyEvents.
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
		st.events++
		if st.maxEvents > 0 && st.events > st.maxEvents {
			return nil, fmt.Errorf("%w: more than %d before the response (ClientOptions.MaxStreamMessages)", errTooManyEvents, st.maxEvents)
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
			cs.c.log.Warn("mcp client: undecodable SSE event; dropping the stream", "err", rerr, "event", ev.String())
			return nil, fmt.Errorf("%w (%s): %v", errUndecodable, ev, rerr)
		}
		for _, m := range msgs {
			if key != "" && m.IsResponse() && canonicalID(m.ID) == key {
				return m, nil
			}
			st.messages++
			if st.onMessage != nil {
				st.onMessage(m)
			}
			if !st.private {
				cs.handleIncoming(m)
			}
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
	resp, err := cs.do(req)
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

// maxServerRetry bounds the delay a server's "retry:" can ask for.
const maxServerRetry = 10 * time.Minute

// backoff is the wait before a reconnection: the server's retry (or
// RetryDelay), at least MinRetryDelay and at most 10 minutes, doubled for
// every failed attempt, at most MaxRetryDelay (or the server's retry if
// longer).
func (cs *ClientSession) backoff(retry time.Duration, failures int) time.Duration {
	o := &cs.c.opts
	d := retry
	if d <= 0 {
		d = o.RetryDelay
	}
	d = min(max(d, o.MinRetryDelay), maxServerRetry)
	ceiling := max(o.MaxRetryDelay, d)
	for range min(failures, 16) {
		d *= 2
	}
	return min(d, ceiling)
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
			// Progress is a message or a new event id (mcpush ends an idle
			// stream at once with a new id, and the client comes back
			// after the retry delay). A stream that brings neither, ended
			// cleanly or not, is a failure: the delay doubles.
			before, messages := st.lastID, st.messages
			_, rerr := cs.readStream(resp.Body, "", st)
			resp.Body.Close()
			if st.lastID != before || st.messages > messages {
				failures = 0
			} else {
				failures++
			}
			if rerr != nil && ctx.Err() == nil {
				level := slog.LevelDebug
				if fatalStreamError(rerr) || failures >= 3 {
					level = slog.LevelWarn
				}
				cs.c.log.Log(ctx, level, "mcp client: GET stream broke; resuming", "err", rerr, "last_event_id", st.lastID, "failures", failures)
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

// idleTimeoutError reports a request whose response headers, or a stream
// on which any byte, did not come within ClientOptions.IdleTimeout.
type idleTimeoutError struct{ d time.Duration }

func (e *idleTimeoutError) Error() string {
	return fmt.Sprintf("mcp: nothing received for %v (ClientOptions.IdleTimeout)", e.d)
}

// do sends req with the idle timeout: the request is cancelled when its
// response headers, or then any byte of its body, take longer than
// IdleTimeout. Every byte (a keep-alive comment too) restarts the clock.
func (cs *ClientSession) do(req *http.Request) (*http.Response, error) {
	d := cs.c.opts.IdleTimeout
	if d < 0 {
		return cs.c.opts.HTTPClient.Do(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	idle := &idleTimeoutError{d: d}
	t := time.AfterFunc(d, func() { cancel(idle) })
	resp, err := cs.c.opts.HTTPClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Stop()
		timedOut := context.Cause(ctx) == error(idle)
		cancel(nil)
		if timedOut {
			return nil, idle
		}
		return nil, err
	}
	t.Reset(d)
	resp.Body = &idleBody{rc: resp.Body, t: t, d: d, ctx: ctx, cancel: cancel, idle: idle}
	return resp, nil
}

// idleBody is a response body whose reads restart the idle timer.
type idleBody struct {
	rc     io.ReadCloser
	t      *time.Timer
	d      time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   *idleTimeoutError
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.t.Reset(b.d)
	}
	if err != nil && !errors.Is(err, io.EOF) && context.Cause(b.ctx) == error(b.idle) {
		return n, b.idle
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.t.Stop()
	err := b.rc.Close()
	b.cancel(nil)
	return err
}

// sameOriginRedirect is the client's http.Client.CheckRedirect: at most
// 10 redirects, each within the first request's origin.
func sameOriginRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("mcp: stopped after 10 redirects")
	}
	from, to := origin(via[0].URL), origin(req.URL)
	if from != to {
		return fmt.Errorf("%w: %s redirected to %s", ErrCrossOriginRedirect, from, to)
	}
	return nil
}

// origin is scheme://host:port of u, lower-case, with the scheme's
// default port made explicit.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

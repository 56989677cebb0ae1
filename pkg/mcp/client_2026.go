package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// This file is the client's 2026-07-28 era: no initialize and no session;
// every request carries the protocol version, the client's capabilities
// and identity in _meta (and Mcp-Method / Mcp-Name headers); the server is
// discovered with server/discover; notifications come on a
// subscriptions/listen stream; and a result with resultType
// "input_required" is answered by the same handlers that answer 2025-era
// server-to-client requests, then the request is sent again.

// ClientMode selects the protocol era a client speaks.
type ClientMode string

// Client modes.
const (
	// ClientMode2025 speaks the session-based era: initialize, the
	// standalone GET stream, resources/subscribe. The default.
	ClientMode2025 ClientMode = ""
	// ClientMode2026 speaks the 2026 era (2026-07-28): server/discover,
	// per-request _meta, subscriptions/listen, multi round-trip requests.
	ClientMode2026 ClientMode = "2026"
	// ClientModeAuto tries the 2026-07-28 era with server/discover and
	// falls back to initialize when the server answers with an HTTP 4xx or
	// a JSON-RPC error, or does not list 2026-07-28 (a network error or a
	// 5xx fails Connect instead).
	ClientModeAuto ClientMode = "auto"
)

// maxInputRounds bounds the input_required rounds of one request.
const maxInputRounds = 10

func (cs *ClientSession) is2026() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.era2026
}

// connect runs the handshake the client's mode asks for.
func (cs *ClientSession) connect(ctx context.Context) error {
	switch cs.c.opts.Mode {
	case ClientMode2026:
		return cs.discover(ctx)
	case ClientModeAuto:
		err := cs.discover(ctx)
		if err == nil || !legacyAnswer(err) {
			return err
		}
		cs.c.log.Info("mcp client: the server does not speak "+ProtocolVersion2026+"; falling back to initialize", "url", cs.url, "err", err)
		return cs.initialize(ctx)
	default:
		return cs.initialize(ctx)
	}
}

// legacyAnswer reports whether err is the answer of a server that does not
// speak the 2026 era (rather than a failure to reach it).
func legacyAnswer(err error) bool {
	var he *HTTPError
	var re *Error
	switch {
	case errors.Is(err, errNot2026), errors.As(err, &re):
		return true
	case errors.As(err, &he):
		return he.Status >= 400 && he.Status < 500
	}
	return false
}

// discover asks the server for its versions, capabilities and identity
// (server/discover) and, if it speaks 2026-07-28, makes this session
// one of the 2026 era.
func (cs *ClientSession) discover(ctx context.Context) error {
	cs.mu.Lock()
	cs.era2026, cs.id, cs.init = true, "", nil
	cs.mu.Unlock()
	var res struct {
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      *ServerCapabilities        `json:"capabilities"`
		Instructions      string                     `json:"instructions"`
		ServerInfo        *Implementation            `json:"serverInfo"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	}
	_, err := cs.roundTrip(ctx, "server/discover", struct{}{}, &res, nil) // "mcp: server/discover URL: ..."
	if err == nil && !slices.Contains(res.SupportedVersions, ProtocolVersion2026) {
		err = fmt.Errorf("mcp: server/discover %s: %w (it lists %q)", cs.url, errNot2026, res.SupportedVersions)
	}
	if err != nil {
		cs.mu.Lock()
		cs.era2026 = false
		cs.mu.Unlock()
		return err
	}
	if res.ServerInfo == nil {
		if raw, ok := res.Meta[metaServerInfo]; ok {
			json.Unmarshal(raw, &res.ServerInfo)
		}
	}
	if res.Capabilities == nil {
		res.Capabilities = &ServerCapabilities{}
	}
	cs.mu.Lock()
	cs.init = &InitializeResult{ProtocolVersion: ProtocolVersion2026, Capabilities: res.Capabilities, ServerInfo: res.ServerInfo, Instructions: res.Instructions}
	cs.mu.Unlock()
	if !cs.c.opts.NoStandaloneStream {
		cs.startListen()
	}
	return nil
}

// request2026 adds the 2026 _meta to params and returns the headers the
// request needs.
func (cs *ClientSession) request2026(method string, p json.RawMessage) (json.RawMessage, http.Header, error) {
	info, err := json.Marshal(cs.c.impl)
	if err != nil {
		return nil, nil, err
	}
	cs.mu.Lock()
	level := cs.level
	cs.mu.Unlock()
	meta := [][2]string{
		{metaProtocolVersion, strconv.Quote(ProtocolVersion2026)},
		{metaClientCapabilities, string(withTasksExtension(cs.c.capabilities()))},
		{metaClientInfo, string(info)},
	}
	if level != "" {
		meta = append(meta, [2]string{metaLogLevel, strconv.Quote(string(level))})
	}
	if len(p) == 0 || string(p) == "null" {
		p = json.RawMessage("{}")
	}
	for _, kv := range meta {
		if p, err = withMeta(p, kv[0], kv[1]); err != nil {
			return nil, nil, err
		}
	}
	h := http.Header{}
	h.Set("Mcp-Method", method)
	var named struct {
		Name   string `json:"name"`
		URI    string `json:"uri"`
		TaskID string `json:"taskId"`
	}
	json.Unmarshal(p, &named)
	switch method {
	case "tools/call", "prompts/get", "events/poll", "events/stream", "events/subscribe", "events/unsubscribe":
		h.Set("Mcp-Name", headerValue(named.Name))
	case "resources/read":
		h.Set("Mcp-Name", headerValue(named.URI))
	case "tasks/get", "tasks/update", "tasks/cancel":
		h.Set("Mcp-Name", headerValue(named.TaskID))
	}
	return p, h, nil
}

// headerValue returns s as is if it can be a header value, otherwise
// base64-encoded in the =?base64?...?= form.
func headerValue(s string) string {
	plain := true
	for _, r := range s {
		if r < 0x20 || r > 0x7e {
			plain = false
			break
		}
	}
	if plain && !(len(s) >= 11 && s[:9] == "=?base64?" && s[len(s)-2:] == "?=") {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}

// inputRequiredError is a 2026 result with resultType "input_required":
// the server needs answers to its input requests before it can finish.
type inputRequiredError struct {
	requests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	state string
}

func (e *inputRequiredError) Error() string {
	return fmt.Sprintf("mcp: the server needs input (%d requests)", len(e.requests))
}

// inputRequired returns the input requests of a result that needs them,
// or nil.
func inputRequired(raw json.RawMessage) *inputRequiredError {
	var r struct {
		ResultType    string `json:"resultType"`
		InputRequests map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"inputRequests"`
		RequestState string `json:"requestState"`
	}
	if json.Unmarshal(raw, &r) != nil || r.ResultType != resultInputRequired {
		return nil
	}
	return &inputRequiredError{requests: r.InputRequests, state: r.RequestState}
}

// answerInput fulfils the input requests of ir with the registered
// handlers and returns params for the retry: the original params with
// inputResponses and the server's requestState.
func (cs *ClientSession) answerInput(ctx context.Context, params any, ir *inputRequiredError) (json.RawMessage, error) {
	responses := map[string]any{}
	for id, req := range ir.requests {
		res, err := cs.serveRequest(ctx, req.Method, req.Params)
		if err != nil {
			return nil, fmt.Errorf("answering the server's input request %q (%s): %w", id, req.Method, err)
		}
		responses[id] = res
	}
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	obj := map[string]json.RawMessage{}
	if len(p) > 0 && string(p) != "null" {
		if err := json.Unmarshal(p, &obj); err != nil {
			return nil, err
		}
	}
	rb, err := json.Marshal(responses)
	if err != nil {
		return nil, err
	}
	obj["inputResponses"] = rb
	delete(obj, "requestState")
	if ir.state != "" {
		obj["requestState"] = json.RawMessage(strconv.Quote(ir.state))
	}
	return json.Marshal(obj)
}

// listenParams are the params of subscriptions/listen: every list_changed
// and the subscribed resources.
func (cs *ClientSession) listenParams() any {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	type notifications struct {
		ToolsListChanged      bool     `json:"toolsListChanged"`
		PromptsListChanged    bool     `json:"promptsListChanged"`
		ResourcesListChanged  bool     `json:"resourcesListChanged"`
		ResourceSubscriptions []string `json:"resourceSubscriptions"`
	}
	return map[string]any{"notifications": notifications{true, true, true, append([]string{}, cs.subs...)}}
}

// startListen (re)opens the subscriptions/listen stream with the current
// subscriptions. The previous stream stays open until the server has
// acknowledged the new one, so that no notification falls between the
// two (one may come on both). The returned channel is closed on that
// acknowledgement.
func (cs *ClientSession) startListen() *listenStart {
	ctx, stop := context.WithCancel(cs.ctx)
	ls := &listenStart{ack: make(chan struct{}), failed: make(chan error, 1), done: ctx.Done()}
	cs.mu.Lock()
	old := cs.getStop
	cs.getStop = stop
	cs.listen = ls
	cs.mu.Unlock()
	stopOld := sync.OnceFunc(func() {
		if old != nil {
			old()
		}
	})
	if !cs.goSession(func() { defer stopOld(); cs.listenLoop(ctx, ls, stopOld) }) {
		stop()
		stopOld()
	}
	return ls
}

// listenStart is one listen loop's outcome as its starter sees it: the
// first acknowledgement, a refusal by the server before it, or the loop's
// end (a newer listen replaced it, or the session closed).
type listenStart struct {
	ack    chan struct{}
	failed chan error
	done   <-chan struct{}
	// granted are the resource URIs the acknowledgement names: the
	// subscriptions the server will deliver; nil when the acknowledgement
	// has no notifications object at all (a server that does not say
	// what it grants is taken at its word). Set before ack is closed.
	granted []string
}

// listenLoop keeps a subscriptions/listen stream open: when the server
// ends it (a deadline) or the connection drops, it opens a new one after
// the delay. What was sent between two streams is not replayed. onAck
// runs on the first acknowledgement. A JSON-RPC error before the first
// acknowledgement (the server refused the filter) ends the loop and is
// reported on ls.failed; the stream it was to replace goes on.
func (cs *ClientSession) listenLoop(ctx context.Context, ls *listenStart, onAck func()) {
	failures := 0
	acked := false
	for ctx.Err() == nil {
		notified := 0
		st := &streamState{onMessage: func(m *Message) {
			if m.Method != "notifications/subscriptions/acknowledged" {
				notified++
				return
			}
			if !acked {
				acked = true
				var p struct {
					Notifications *struct {
						ResourceSubscriptions []string `json:"resourceSubscriptions"`
					} `json:"notifications"`
				}
				if json.Unmarshal(m.Params, &p) == nil && p.Notifications != nil {
					ls.granted = append([]string{}, p.Notifications.ResourceSubscriptions...)
				}
				close(ls.ack)
				onAck()
			}
		}}
		start := time.Now()
		err := cs.listenOnce(ctx, st)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var rpcErr *Error
			if !acked && errors.As(err, &rpcErr) {
				ls.failed <- err
				return
			}
		}
		// A stream that carried a notification, or stayed open a while,
		// made progress; one that ended soon with nothing but its
		// acknowledgement (cleanly or not) is a failure, and the delay
		// before the next listen doubles.
		if notified > 0 || time.Since(start) >= listenSteady {
			failures = 0
		} else {
			failures++
		}
		if err != nil || failures > 0 {
			level := slog.LevelDebug
			if failures >= 3 || fatalStreamError(err) {
				level = slog.LevelWarn
			}
			cs.c.log.Log(ctx, level, "mcp client: subscriptions/listen ended; listening again", "err", err, "failures", failures)
		}
		if sleepCtx(ctx, cs.backoff(st.retry, failures)) != nil {
			return
		}
	}
}

// listenSteady is how long a listen stream must stay open to count as
// progress without carrying a notification.
const listenSteady = 10 * time.Second

// listenOnce runs one subscriptions/listen request until its stream ends.
func (cs *ClientSession) listenOnce(ctx context.Context, st *streamState) error {
	p, err := json.Marshal(cs.listenParams())
	if err != nil {
		return err
	}
	p, extra, err := cs.request2026("subscriptions/listen", p)
	if err != nil {
		return err
	}
	id := json.RawMessage(strconv.FormatInt(cs.nextID.Add(1), 10))
	body, err := json.Marshal(&Message{JSONRPC: "2.0", ID: id, Method: "subscriptions/listen", Params: p})
	if err != nil {
		return err
	}
	resp, err := cs.postStream(ctx, "subscriptions/listen", "", body, extra)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	start := time.Now()
	m, err := cs.readStream(resp.Body, canonicalID(id), st)
	if m != nil && m.Error != nil {
		return m.Error
	}
	if err == nil && time.Since(start) < time.Second && st.retry == 0 && m == nil {
		return errors.New("subscriptions/listen stream ended at once")
	}
	return err
}

// resubscribe reopens the listen stream with the current subscriptions
// and waits for the server's acknowledgement.
func (cs *ClientSession) resubscribe(ctx context.Context) error {
	_, err := cs.relisten(ctx)
	return err
}

// relisten is resubscribe returning the acknowledged listen (nil without
// a standalone stream).
func (cs *ClientSession) relisten(ctx context.Context) (*listenStart, error) {
	if cs.c.opts.NoStandaloneStream {
		return nil, nil
	}
	ls := cs.startListen()
	for {
		select {
		case <-ls.ack:
			return ls, nil
		case err := <-ls.failed:
			return nil, fmt.Errorf("mcp: subscriptions/listen: %w", err)
		case <-ls.done:
			// A newer listen replaced this one before its acknowledgement:
			// it carries the current subscriptions too, so wait for it.
			cs.mu.Lock()
			next := cs.listen
			cs.mu.Unlock()
			if next == ls || cs.ctx.Err() != nil {
				return nil, ErrClientClosed
			}
			ls = next
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// withTasksExtension adds the tasks extension to the client capabilities
// of a 2026-era request: the client follows tasks (client_tasks.go).
func withTasksExtension(caps json.RawMessage) json.RawMessage {
	m := map[string]json.RawMessage{}
	_ = json.Unmarshal(caps, &m)
	ext := map[string]json.RawMessage{}
	_ = json.Unmarshal(m["extensions"], &ext)
	ext[TasksExtension] = json.RawMessage("{}")
	m["extensions"], _ = json.Marshal(ext)
	b, _ := json.Marshal(m)
	return b
}

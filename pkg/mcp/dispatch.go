package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Dispatch: runRequest runs one client request (progress, cancellation
// by another process: watchCancel), safeDispatch recovers a panicking
// handler, and dispatch maps each method to its handler. The handlers of
// tools, resources and prompts are in handlers.go; tasks/* are dispatchTasks's
// (tasks_engine.go), events/* dispatchEvents's (events.go). What a
// session's client messages write to the store, initialize included, is
// in sessionstore.go.

// A response is runRequest's answer to one request: a result, or the
// error the request failed with. Its transport encodes it (encode) as the
// body of a plain JSON answer, with the status errorStatus gives err
// (write), as an SSE event, or as a member of a batch.
type response struct {
	id     json.RawMessage
	result json.RawMessage // when err is nil
	// err is a *Error the client gets in the response, or a *refusal
	// (a store that was unavailable: 503 with Retry-After).
	err failure
}

// encode returns r as a JSON-RPC response message of era.
func (r *response) encode(era Era) []byte {
	if r.err == nil {
		return encodeResponse(r.id, r.result, nil)
	}
	_, e := rpcError(era, r.err)
	return encodeResponse(r.id, nil, e)
}

// write answers with r as a plain JSON body of era: 200 for a result,
// the status of errorStatus for an error.
func (r *response) write(w http.ResponseWriter, era Era) {
	if r.err != nil {
		writeError(w, era, r.id, r.err)
		return
	}
	writeJSON(w, http.StatusOK, r.encode(era))
}

// runRequest runs one client request and returns its response, or nil
// when the client cancelled it.
// Related messages (progress, logs, server-to-client requests) go to out.
func (s *Server) runRequest(ctx context.Context, ss *ServerSession, m *Message, out sink) *response {
	c := &call{sess: ss, id: m.ID, out: out, method: m.Method}
	if ss.era2026 {
		var err *Error
		if c.inputResponses, c.state, c.answers, err = s.readRetry(ss, m); err != nil {
			return &response{id: m.ID, err: err}
		}
	}
	var pm paramsMeta
	if len(m.Params) > 0 && json.Unmarshal(m.Params, &pm) == nil && pm.Meta != nil && len(pm.Meta.ProgressToken) > 0 {
		if !validProgressToken(pm.Meta.ProgressToken) {
			return &response{id: m.ID, err: Errorf(CodeInvalidParams, "invalid params: _meta.progressToken must be a string or an integer of at most %d bytes", MaxProgressTokenBytes)}
		}
		c.progressToken = pm.Meta.ProgressToken
		c.progress = &progressThrottle{
			interval: s.opts.ProgressInterval,
			now:      s.opts.Now,
			send: func(p ProgressParams) {
				if msg, err := encodeNotification("notifications/progress", &p); err == nil {
					if err := ss.send(ctx, msg); err != nil && !errors.Is(err, notify.ErrNotFound) {
						s.log.WarnContext(ctx, "sending progress", "session", ss.ID(), "err", err)
					}
				}
			},
		}
	}
	ctx, cancel := context.WithCancel(context.WithValue(ctx, callKey{}, c))
	defer cancel()
	if !ss.era2026 {
		// A 2026-era request is cancelled by closing its HTTP request,
		// which cancels ctx; a session's request by notifications/cancelled
		// on any process.
		key := cancelKey(m.ID)
		s.local.addCancel(ss.ID(), key, cancel)
		defer s.local.removeCancel(ss.ID(), key)
		done := make(chan struct{})
		defer close(done)
		go s.watchCancel(ctx, ss.ID(), m.ID, s.opts.Now(), cancel, done)
	}

	result, err := s.safeDispatch(ctx, ss, m)
	if c.progress != nil {
		c.progress.flush()
	}
	var ir *InputRequired
	if errors.As(err, &ir) && ctx.Err() == nil {
		if ss.era2026 {
			result, err = s.inputRequired(ctx, ss, m, ir)
		} else {
			err = fmt.Errorf("%s handler returned input_required to a %s session: %w", m.Method, ss.ProtocolVersion(), Err2026Only)
		}
	}
	var rpcErr *Error
	switch {
	case ctx.Err() != nil:
		// Cancelled by the client: it gets no response (MCP cancellation).
		return nil
	case err == nil:
		return encodeResult(ss, m, result)
	case errors.As(err, &rpcErr):
		// Its code as the era has it (errorStatus).
		return &response{id: m.ID, err: rpcErr}
	}
	return &response{id: m.ID, err: s.requestFailure(ctx, "request failed", err, "session", ss.ID(), "method", m.Method)}
}

// encodeResult is the response of a request that succeeded, with the
// members the session's era requires on results.
func encodeResult(ss *ServerSession, m *Message, result any) *response {
	raw, err := json.Marshal(result)
	if err != nil {
		return &response{id: m.ID, err: Errorf(CodeInternalError, "internal error: encoding result: %v", err)}
	}
	return &response{id: m.ID, result: version(ss.ProtocolVersion()).decorate(m.Method, raw)}
}

// watchCancel polls the store for a cancellation of the request that
// another process received. It waits a little first: most requests finish
// before anyone could cancel them, and then it costs nothing.
//
// Its first poll also records that the request runs (one write, only for
// requests that run that long), so that a process receiving the
// cancellation knows it is worth storing.
func (s *Server) watchCancel(ctx context.Context, sessionID string, id json.RawMessage, started time.Time, cancel context.CancelFunc, done <-chan struct{}) {
	key := cancelKey(id)
	interval := max(s.opts.PollInterval, 250*time.Millisecond)
	t := time.NewTimer(s.opts.CancelWatchAfter)
	defer t.Stop()
	announced := false
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !announced {
			announced = true
			if _, err := s.store.PutMessage(ctx, sessionID, runningKey(id), []byte("1")); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "recording a running request", "session", sessionID, "err", err)
			}
		}
		data, err := s.store.GetMessage(ctx, sessionID, key)
		if errors.Is(err, notify.ErrSessionGone) {
			// The session was deleted on some process (DELETE) or expired:
			// its requests have nobody to answer.
			cancel()
			return
		}
		if err == nil {
			// A cancellation older than this request names an earlier
			// request that reused the id; ignore it.
			var ms int64
			if json.Unmarshal(data, &ms) == nil && ms >= started.UnixMilli()-1000 {
				cancel()
				return
			}
		}
		t.Reset(interval)
	}
}

// safeDispatch runs dispatch and turns a panicking handler into an
// internal error, so one bad tool cannot take the process (or a Lambda
// sandbox) down with every other session's requests.
func (s *Server) safeDispatch(ctx context.Context, ss *ServerSession, m *Message) (result any, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.log.ErrorContext(ctx, "handler panicked", "session", ss.ID(), "method", m.Method, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			result, err = nil, Errorf(CodeInternalError, "internal error: the %s handler panicked", m.Method)
		}
	}()
	return s.dispatch(ctx, ss, m)
}

// removedIn2026 are the 2025-era methods the 2026 era removed.
var removedIn2026 = map[string]bool{
	"initialize": true, "ping": true, "logging/setLevel": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
}

// dispatch runs a request's method.
func (s *Server) dispatch(ctx context.Context, ss *ServerSession, m *Message) (any, error) {
	if ss.era2026 {
		switch {
		case removedIn2026[m.Method]:
			return nil, Errorf(CodeMethodNotFound, "method not found: %s (removed in protocol version %s)", m.Method, ss.ProtocolVersion())
		case m.Method == "server/discover":
			return s.discover(), nil
		}
	}
	switch m.Method {
	case "ping":
		return struct{}{}, nil
	case "initialize":
		return nil, Errorf(CodeInvalidRequest, "invalid request: session %s is already initialized", ss.ID())
	case "tools/list":
		return s.listTools(ctx, m.Params)
	case "tools/call":
		if res, ok, err := s.maybeTask(ctx, ss, m); ok {
			return res, err
		}
		return s.callTool(ctx, ss, m.Params)
	case "tasks/get", "tasks/update", "tasks/cancel":
		return s.dispatchTasks(ctx, ss, m)
	case "events/list", "events/poll", "events/stream", "events/subscribe", "events/unsubscribe":
		return s.dispatchEvents(ctx, ss, m)
	case "resources/list":
		return s.listResources(ctx, m.Params)
	case "resources/templates/list":
		return s.listTemplates(m.Params)
	case "resources/read":
		return s.readResource(ctx, ss, m.Params)
	case "resources/subscribe", "resources/unsubscribe":
		p, err := decodeParams[SubscribeParams](m.Params)
		if err != nil {
			return nil, err
		}
		if p.URI == "" {
			return nil, Errorf(CodeInvalidParams, "invalid params: %s needs a uri", m.Method)
		}
		if err := s.checkSubscribe(ss, m.Method, p.URI); err != nil {
			return nil, err
		}
		if m.Method == "resources/subscribe" {
			err = s.store.Subscribe(ctx, ss.ID(), p.URI)
		} else {
			err = s.store.Unsubscribe(ctx, ss.ID(), p.URI)
		}
		if err != nil {
			return nil, err
		}
		return struct{}{}, nil
	case "prompts/list":
		return s.listPrompts(ctx, m.Params)
	case "prompts/get":
		return s.getPrompt(ctx, ss, m.Params)
	case "completion/complete":
		if s.opts.CompletionHandler == nil {
			break
		}
		p, err := decodeParams[*CompleteParams](m.Params)
		if err != nil {
			return nil, err
		}
		if p == nil || p.Ref == nil {
			return nil, Errorf(CodeInvalidParams, "invalid params: completion/complete needs a ref")
		}
		res, err := s.opts.CompletionHandler(ctx, &ServerRequest[*CompleteParams]{Session: ss, Params: p})
		if err != nil {
			return nil, err
		}
		if res.Completion.Values == nil {
			res.Completion.Values = []string{}
		}
		return res, nil
	case "logging/setLevel":
		p, err := decodeParams[SetLevelParams](m.Params)
		if err != nil {
			return nil, err
		}
		if levelRank(p.Level) < 0 {
			return nil, Errorf(CodeInvalidParams, "invalid params: unknown logging level %q (want one of debug, info, notice, warning, error, critical, alert, emergency)", p.Level)
		}
		if err := s.updateSession(ctx, ss, func(st *notify.Session) { st.LogLevel = string(p.Level) }); err != nil {
			return nil, err
		}
		return struct{}{}, nil
	}
	return nil, Errorf(CodeMethodNotFound, "method not found: %s", m.Method)
}

package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
)

// This file is what the client does with messages the server sends it:
// notifications go through one ordered queue (seed 004), list_changed
// re-lists with coalescing (seed 002), and server-to-client requests are
// answered by the registered handlers.

// notifyQueue runs functions one at a time, in the order they were
// pushed, on its own goroutine. It never drops one: the queue is
// unbounded, so a slow function delays the later ones.
type notifyQueue struct {
	log  *slog.Logger
	wake chan struct{}
	done chan struct{}

	mu      sync.Mutex
	items   []func()
	closing bool
}

func newNotifyQueue(log *slog.Logger) *notifyQueue {
	q := &notifyQueue{log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

// push queues f; false if the queue is closed.
func (q *notifyQueue) push(f func()) bool {
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, f)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

func (q *notifyQueue) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			closing := q.closing
			q.mu.Unlock()
			if closing {
				return
			}
			<-q.wake
			continue
		}
		f := q.items[0]
		q.items[0] = nil
		q.items = q.items[1:]
		q.mu.Unlock()
		f()
	}
}

// barrier waits until everything pushed before it has run.
func (q *notifyQueue) barrier(ctx context.Context) error {
	ch := make(chan struct{})
	if !q.push(func() { close(ch) }) {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close runs what is queued, then stops the goroutine.
func (q *notifyQueue) close() {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
}

// safely runs f, recovering and logging a panic.
func (cs *ClientSession) safely(what, method string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			cs.c.log.Error("mcp client: handler panicked; going on", "handler", what, "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	f()
}

// handleIncoming routes a message the server sent: notifications to the
// ordered queue, requests to their handlers.
func (cs *ClientSession) handleIncoming(m *Message) {
	switch {
	case m.IsNotification():
		cs.queue.push(func() { cs.dispatch(m) })
	case m.IsRequest():
		if !cs.goSession(func() { cs.answer(m) }) {
			return
		}
	default:
		cs.c.log.Debug("mcp client: a response nobody waits for", "id", string(m.ID))
	}
}

// dispatch handles one notification, on the queue's goroutine.
func (cs *ClientSession) dispatch(m *Message) {
	cs.warnUndeclared(m.Method)
	switch m.Method {
	case "notifications/progress":
		var p ProgressParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			cs.c.log.Warn("mcp client: bad progress notification", "err", err)
			break
		}
		if f := cs.progressFunc(p.ProgressToken); f != nil {
			cs.safely("progress", m.Method, func() { f(&p) })
		}
	case "notifications/tools/list_changed":
		cs.listChanged(relistTools)
	case "notifications/prompts/list_changed":
		cs.listChanged(relistPrompts)
	case "notifications/resources/list_changed":
		cs.listChanged(relistResources)
	}
	for _, h := range cs.c.handlersFor(m.Method) {
		cs.safely("notification", m.Method, func() { h(cs.ctx, cs, m.Method, m.Params) })
	}
}

// warnUndeclared logs a warning for a notification that needs a server
// capability the server did not declare at initialize. It is handled
// anyway.
func (cs *ClientSession) warnUndeclared(method string) {
	caps := &ServerCapabilities{}
	if init := cs.InitializeResult(); init != nil && init.Capabilities != nil {
		caps = init.Capabilities
	}
	var declared bool
	switch method {
	case "notifications/tools/list_changed":
		declared = caps.Tools != nil && caps.Tools.ListChanged
	case "notifications/prompts/list_changed":
		declared = caps.Prompts != nil && caps.Prompts.ListChanged
	case "notifications/resources/list_changed":
		declared = caps.Resources != nil && caps.Resources.ListChanged
	case "notifications/resources/updated":
		declared = caps.Resources != nil && caps.Resources.Subscribe
	case "notifications/message":
		declared = caps.Logging != nil
	default:
		return
	}
	if !declared {
		cs.c.log.Warn("mcp client: notification from a server that did not declare the capability for it; handling it anyway", "method", method, "url", cs.url)
	}
}

// Registries a list_changed notification re-lists.
const (
	relistTools = iota
	relistPrompts
	relistResources
)

var relistNames = [...]string{relistTools: "tools", relistPrompts: "prompts", relistResources: "resources"}

// relist is the state of one registry's re-listing: at most one re-list
// in flight, and whether another was asked for meanwhile.
type relist struct {
	mu       sync.Mutex
	inFlight bool
	pending  bool
}

// listChanged re-lists registry kind, unless a re-list is in flight; then
// it asks for one more after it (any number of notifications meanwhile
// coalesce into that one).
func (cs *ClientSession) listChanged(kind int) {
	r := &cs.relists[kind]
	r.mu.Lock()
	if r.inFlight {
		r.pending = true
		r.mu.Unlock()
		cs.c.log.Debug("mcp client: a re-list is in flight; this list_changed coalesces into the next one", "registry", relistNames[kind])
		return
	}
	r.inFlight = true
	r.mu.Unlock()
	ok := cs.goSession(func() {
		for {
			cs.relistOnce(kind)
			r.mu.Lock()
			if !r.pending || cs.ctx.Err() != nil {
				r.inFlight, r.pending = false, false
				r.mu.Unlock()
				return
			}
			r.pending = false
			r.mu.Unlock()
		}
	})
	if !ok {
		r.mu.Lock()
		r.inFlight = false
		r.mu.Unlock()
	}
}

// relistOnce lists registry kind and queues the changed handler with the
// result.
func (cs *ClientSession) relistOnce(kind int) {
	ctx := cs.ctx
	o := &cs.c.opts
	var err error
	switch kind {
	case relistTools:
		var tools []*Tool
		if tools, err = cs.ListTools(ctx); err == nil && o.ToolsChangedHandler != nil {
			cs.queue.push(func() {
				cs.safely("tools changed", "tools/list", func() { o.ToolsChangedHandler(ctx, cs, tools) })
			})
		}
	case relistPrompts:
		var prompts []*Prompt
		if prompts, err = cs.ListPrompts(ctx); err == nil && o.PromptsChangedHandler != nil {
			cs.queue.push(func() {
				cs.safely("prompts changed", "prompts/list", func() { o.PromptsChangedHandler(ctx, cs, prompts) })
			})
		}
	case relistResources:
		var resources []*Resource
		if resources, err = cs.ListResources(ctx); err == nil && o.ResourcesChangedHandler != nil {
			cs.queue.push(func() {
				cs.safely("resources changed", "resources/list", func() { o.ResourcesChangedHandler(ctx, cs, resources) })
			})
		}
	}
	if err != nil && ctx.Err() == nil {
		cs.c.log.Warn("mcp client: re-listing after list_changed", "err", err)
	}
}

// answer runs the handler for a server-to-client request and posts the
// response.
func (cs *ClientSession) answer(m *Message) {
	ctx := cs.ctx
	result, err := cs.serveRequest(ctx, m.Method, m.Params)
	var rpcErr *Error
	if err != nil && !errors.As(err, &rpcErr) {
		rpcErr = Errorf(CodeInternalError, "%v", err)
	}
	resp, perr := cs.post(ctx, cs.ID(), encodeResponse(m.ID, result, rpcErr), nil)
	if perr != nil {
		if ctx.Err() == nil {
			cs.c.log.Warn("mcp client: sending the answer to a server request", "method", m.Method, "err", perr)
		}
		return
	}
	resp.Body.Close()
}

// serveRequest runs the registered handler for a request from the server
// (a 2025-era server-to-client request, or a 2026-era input request),
// recovering a panic into an error.
func (cs *ClientSession) serveRequest(ctx context.Context, method string, params json.RawMessage) (result any, err error) {
	o := &cs.c.opts
	cs.safely("request", method, func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("handler panicked: %v", r)
				panic(r) // logged by safely
			}
		}()
		switch method {
		case "ping":
			result = struct{}{}
		case "sampling/createMessage":
			if o.CreateMessageHandler == nil {
				err = Errorf(CodeMethodNotFound, "method not found: %s", method)
				return
			}
			var p CreateMessageParams
			if err = decodeClientParams(params, &p); err == nil {
				result, err = o.CreateMessageHandler(ctx, cs, &p)
			}
		case "elicitation/create":
			if o.ElicitationHandler == nil {
				err = Errorf(CodeMethodNotFound, "method not found: %s", method)
				return
			}
			var p ElicitParams
			if err = decodeClientParams(params, &p); err == nil {
				result, err = o.ElicitationHandler(ctx, cs, &p)
			}
		case "roots/list":
			if o.RootsHandler == nil {
				err = Errorf(CodeMethodNotFound, "method not found: %s", method)
				return
			}
			result, err = o.RootsHandler(ctx, cs)
		default:
			err = Errorf(CodeMethodNotFound, "method not found: %s", method)
		}
	})
	return result, err
}

func decodeClientParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return Errorf(CodeInvalidParams, "invalid params: missing")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return Errorf(CodeInvalidParams, "invalid params: %v", err)
	}
	return nil
}

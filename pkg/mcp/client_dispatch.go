package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// This file is what the client does with messages the server sends it:
// notifications go through one ordered queue, list_changed re-lists with
// coalescing (at most one re-list in flight), and server-to-client requests are
// answered by the registered handlers.

// notifyQueue runs functions one at a time, in the order they were
// pushed, on its own goroutine. What the client queues for itself (push:
// barriers, the results of re-lists, the reconnected and dropped
// handlers) is never dropped and is bounded by construction; what a
// server sends (offer) is bounded in count and bytes: an offer over
// either bound is dropped and counted, unless it is a level trigger
// (list_changed, resources/updated of one URI) of which one is waiting:
// that one stands for it (coalesced, not counted).
type notifyQueue struct {
	log      *slog.Logger
	maxItems int
	maxBytes int64
	wake     chan struct{}
	done     chan struct{}

	mu        sync.Mutex
	items     []queued
	offered   int            // items from offer waiting
	bytes     int64          // their sizes
	keys      map[string]int // level triggers waiting, by key
	closing   bool
	dropped   int64
	coalesced int64
}

// queued is one waiting function: its size and coalescing key if it came
// from offer.
type queued struct {
	f       func()
	size    int64
	key     string
	offered bool
}

func newNotifyQueue(log *slog.Logger, maxItems int, maxBytes int64) *notifyQueue {
	q := &notifyQueue{log: log, maxItems: maxItems, maxBytes: maxBytes, keys: map[string]int{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

// push queues f, outside the bounds; false if the queue is closed.
func (q *notifyQueue) push(f func()) bool {
	return q.add(queued{f: f})
}

// offerResult is what became of an offer.
type offerResult int

const (
	offerQueued    offerResult = iota
	offerCoalesced             // a waiting item with the same key stands for it
	offerDropped               // over a bound (counted)
	offerClosed                // the queue is closed
)

// offer queues f of size bytes unless the queue is at its bounds; key,
// if not empty, names a level trigger that a waiting item of the same
// key stands for then. Below the bounds every offer is queued, so that
// every notification is handled.
func (q *notifyQueue) offer(f func(), size int64, key string) offerResult {
	q.mu.Lock()
	switch {
	case q.closing:
		q.mu.Unlock()
		return offerClosed
	case q.offered < q.maxItems && q.bytes+size <= q.maxBytes:
	case key != "" && q.keys[key] > 0:
		q.coalesced++
		q.mu.Unlock()
		return offerCoalesced
	default:
		q.dropped++
		q.mu.Unlock()
		return offerDropped
	}
	q.mu.Unlock()
	if !q.add(queued{f: f, size: size, key: key, offered: true}) {
		return offerClosed
	}
	return offerQueued
}

func (q *notifyQueue) add(it queued) bool {
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, it)
	if it.offered {
		q.offered++
		q.bytes += it.size
		if it.key != "" {
			q.keys[it.key]++
		}
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// stats returns how many offers were dropped and coalesced so far.
func (q *notifyQueue) stats() (dropped, coalesced int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped, q.coalesced
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
		it := q.items[0]
		q.items[0] = queued{}
		q.items = q.items[1:]
		if len(q.items) == 0 {
			q.items = nil // let a burst's backing array go
		}
		if it.offered {
			q.offered--
			q.bytes -= it.size
			if it.key != "" {
				// A trigger that runs no longer stands for later ones:
				// it may have read the state already.
				if q.keys[it.key]--; q.keys[it.key] == 0 {
					delete(q.keys, it.key)
				}
			}
		}
		q.mu.Unlock()
		it.f()
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

// maxAnswering bounds the server-to-client requests one session answers
// at once; more are dropped (and counted), and the server times them out.
const maxAnswering = 16

// queuedOverhead is what a queued notification costs besides its method
// and params (the message, the closure, the queue slot), in bytes.
const queuedOverhead = 256

// handleIncoming routes a message the server sent: notifications to the
// ordered queue (within its bounds), requests to their handlers.
func (cs *ClientSession) handleIncoming(m *Message) {
	switch {
	case m.IsNotification():
		size := int64(len(m.Method)+len(m.Params)) + queuedOverhead
		if cs.queue.offer(func() { cs.dispatch(m) }, size, coalesceKey(m)) == offerDropped {
			cs.noteDrop(m.Method)
		}
	case m.IsRequest():
		if cs.answering.Add(1) > maxAnswering {
			cs.answering.Add(-1)
			cs.requestsDropped.Add(1)
			cs.noteDrop(m.Method)
			return
		}
		if !cs.goSession(func() { defer cs.answering.Add(-1); cs.answer(m) }) {
			cs.answering.Add(-1)
		}
	default:
		cs.c.log.Debug("mcp client: a response nobody waits for", "id", string(m.ID))
	}
}

// coalesceKey names the level trigger m is, or "": a list_changed, or a
// resources/updated of one URI. When the queue is full, a trigger waiting
// in it stands for a new one of the same key (its handler runs after both
// arrived).
func coalesceKey(m *Message) string {
	switch m.Method {
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
		return m.Method
	case "notifications/resources/updated":
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(m.Params, &p) != nil || p.URI == "" || len(p.URI) > 2048 {
			return ""
		}
		return m.Method + " " + p.URI
	}
	return ""
}

// Dropped reports how many messages from the server this session dropped
// so far because its handlers could not keep up: notifications over
// ClientOptions.MaxQueuedNotifications or MaxQueuedBytes, and
// server-to-client requests over 16 being answered at once. Level
// triggers that coalesced with a waiting one are not counted.
func (cs *ClientSession) Dropped() int64 {
	d, _ := cs.queue.stats()
	return d + cs.requestsDropped.Load()
}

// dropLogEvery spaces the warnings about dropped messages.
const dropLogEvery = 10 * time.Second

// noteDrop logs a drop (at most once per dropLogEvery) and queues the
// DroppedHandler unless it waits already.
func (cs *ClientSession) noteDrop(method string) {
	now := time.Now()
	h := cs.c.opts.DroppedHandler
	cs.mu.Lock()
	logNow := cs.dropLogged.IsZero() || now.Sub(cs.dropLogged) >= dropLogEvery
	if logNow {
		cs.dropLogged = now
	}
	run := h != nil && !cs.dropPending
	if run {
		cs.dropPending = true
	}
	cs.mu.Unlock()
	if logNow {
		o := &cs.c.opts
		cs.c.log.Warn("mcp client: the handlers cannot keep up with the server; dropping what is over the queue's bound",
			"url", cs.url, "method", method, "dropped", cs.Dropped(),
			"max_queued_notifications", o.MaxQueuedNotifications, "max_queued_bytes", o.MaxQueuedBytes)
	}
	if run {
		cs.queue.push(func() {
			cs.mu.Lock()
			cs.dropPending = false
			cs.mu.Unlock()
			cs.safely("dropped", method, func() { h(cs.ctx, cs, cs.Dropped()) })
		})
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
	case methodEventsListChanged:
		ev, _ := caps.Extensions[EventsExtension].(map[string]any)
		declared = ev["listChanged"] == true
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

package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// events/stream (push): a held stream (held.go) of one subscription. It
// reads the event type's topic log from its cursor, as events/poll does
// (readEventsAfter), and writes each matching event as
// notifications/events/event with the cursor after it (the signed cursor
// of events/poll: a push cursor resumes a poll and a poll cursor a
// stream). It is woken the way a listen stream is woken for a topic: it
// is backed by a session in the store (never visible to the client)
// subscribed to events://<topic>, so the ingest's fan-out of each event
// appends a resources/updated to that session's log, the change feed
// names the session, and the process's watcher wakes the stream, which
// then reads the topic log. The backing session is a listen stream's
// (listenPrincipal, notify.ListenState): it counts against
// MaxListensPerPrincipal, a notifications/cancelled of the request ends
// it (cancelListen), a crashed process's streams are reclaimed
// (reclaimListens), and it is told of changes of the events registry,
// which end the stream with notifications/events/terminated when its
// event type is gone, no longer offers push, or no longer accepts its
// arguments. Served in both eras: a POST of a 2025-era session, and a
// 2026-era request; on Lambda it ends before the deadline like every
// held stream (the empty StreamEventsResult), and the client opens a new
// one from its cursor: nothing is parked, the cursor is the replay.

// Bounds and intervals of events/stream.
const (
	// streamReadEvents bounds the events of one read of the topic log
	// (more are read at once after they are written).
	streamReadEvents = MaxPollEvents
	// MaxEventsHeartbeat is the longest interval between two
	// notifications/events/heartbeat: SEP-3415 asks for one at least
	// every 30 s. A stream sends one every StreamableOptions.KeepAlive
	// (25 s by default), at most this, counted from its confirmation and
	// then from its last heartbeat: events do not put it off, so a busy
	// stream gets its heartbeats on time too.
	MaxEventsHeartbeat = 30 * time.Second
)

// Methods of the push stream's notifications.
const (
	methodEventsActive     = "notifications/events/active"
	methodEventsEvent      = "notifications/events/event"
	methodEventsHeartbeat  = "notifications/events/heartbeat"
	methodEventsTerminated = "notifications/events/terminated"
	methodEventsError      = "notifications/events/error"
)

// StreamEventsParams are the params of events/stream. A nil Cursor
// starts from now.
type StreamEventsParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Cursor    *string         `json:"cursor"`
	MaxAgeMs  *int64          `json:"maxAgeMs,omitempty"`
	Meta      Meta            `json:"_meta,omitempty"`
}

// topicURI is the resource URI of topic's log, events://<topic>, to which
// the ingest fans out (ingest.EventURI; not imported: the client side of
// this package needs nothing of the ingest).
func topicURI(topic string) string { return "events://" + topic }

// heartbeatEvery is the interval of an events stream's heartbeats.
func (h *StreamableHandler) heartbeatEvery() time.Duration {
	return min(h.opts.KeepAlive, MaxEventsHeartbeat)
}

// eventStream is one events/stream: its subscription, its position in
// the topic's log and its backing session (a listenStream, for its
// refresh and removal). Not safe for concurrent use: one goroutine
// serves a stream.
type eventStream struct {
	l       *listenStream
	e       *notify.EventItem
	args    json.RawMessage
	filters map[string]json.RawMessage
	pos     int64 // the topic log's position read up to
	// floor is now less the request's maxAgeMs: the first read skips
	// events received before it.
	floor time.Time
	// pending is the first read, made before the stream was confirmed
	// (its truncated flag goes into notifications/events/active).
	pending   *eventsRead
	heartbeat time.Duration
	// lastBeat is when the last heartbeat (or the confirmation) was
	// written: the next is due heartbeat after it, whatever was written
	// since.
	lastBeat  time.Time
	lastTopic time.Time // the last read of the topic log

	// recheck: the events registry changed, and the event type is to be
	// looked at again (until a look succeeds).
	recheck    bool
	terminated bool
	// faults: the injected faults reported (ServerOptions.EventFaults,
	// events_faults.go; test builds only).
	faults faultMark
}

// meta is the _meta of the stream's notifications.
func (es *eventStream) meta() map[string]json.RawMessage {
	return map[string]json.RawMessage{metaSubscriptionID: es.l.id}
}

func (es *eventStream) cursor() *string {
	c := es.l.srv.states.signCursor(eventCursor{Name: es.e.Name, Topic: es.e.Topic, Seq: es.pos})
	return &c
}

func (es *eventStream) notification(method string, params map[string]any) heldMsg {
	params["_meta"] = es.meta()
	b, _ := encodeNotification(method, params)
	return heldMsg{data: b, quiet: method == methodEventsHeartbeat}
}

func (es *eventStream) active(truncated bool) heldMsg {
	return es.notification(methodEventsActive, map[string]any{"cursor": es.cursor(), "truncated": truncated})
}

func (es *eventStream) heartbeatMsg() heldMsg {
	return es.notification(methodEventsHeartbeat, map[string]any{"cursor": es.cursor()})
}

func (es *eventStream) terminate(e *Error) heldMsg {
	es.terminated = true
	return es.notification(methodEventsTerminated, map[string]any{"error": e})
}

// result is the empty StreamEventsResult that ends the stream.
func (es *eventStream) result() []byte { return es.l.result() }

// events turns a read into notifications/events/event, each with the
// cursor after it, and moves the stream's position to the read's.
func (es *eventStream) events(r *eventsRead) []heldMsg {
	var out []heldMsg
	for i, occ := range r.events {
		c := es.l.srv.states.signCursor(eventCursor{Name: es.e.Name, Topic: es.e.Topic, Seq: r.seqs[i]})
		meta := es.meta()
		for k, v := range occ.Meta {
			meta[k], _ = json.Marshal(v)
		}
		b, _ := encodeNotification(methodEventsEvent, map[string]any{
			"eventId": occ.EventID, "name": occ.Name, "timestamp": occ.Timestamp, "data": occ.Data, "cursor": c, "_meta": meta,
		})
		out = append(out, heldMsg{data: b})
	}
	es.pos = r.pos
	return out
}

// checkType looks at the event type again after a change of the events
// registry: a terminated message if the subscription no longer holds (the
// type is gone, offers no push, or its inputSchema refuses the
// arguments); a notifications/events/active with truncated if the type
// moved to another topic (the stream goes on from that topic's head, as
// a poll does); nothing otherwise.
func (es *eventStream) checkType(ctx context.Context) ([]heldMsg, error) {
	s := es.l.srv
	e, err := s.eventType(ctx, es.e.Name, notify.DeliveryPush)
	var rpcErr *Error
	if errors.As(err, &rpcErr) {
		return []heldMsg{es.terminate(rpcErr)}, nil
	}
	if err != nil {
		return nil, err
	}
	if !bindHolds(ctx, e, es.args) {
		return []heldMsg{es.terminate(s.eventForbidden(e.Name))}, nil
	}
	filters, err := eventFilter(e, es.args)
	if errors.As(err, &rpcErr) {
		return []heldMsg{es.terminate(rpcErr)}, nil
	}
	if err != nil {
		return nil, err
	}
	old := es.e
	es.e, es.filters = e, filters
	if e.Topic == old.Topic {
		return nil, nil
	}
	id := es.l.sess.ID()
	if err := s.store.Subscribe(ctx, id, topicURI(e.Topic)); err != nil {
		es.e = old
		return nil, fmt.Errorf("subscribing to the event type's new topic: %w", err)
	}
	if err := s.store.Unsubscribe(ctx, id, topicURI(old.Topic)); err != nil && !errors.Is(err, notify.ErrNotFound) {
		s.log.WarnContext(ctx, "unsubscribing an events stream from its old topic", "stream", id, "err", err)
	}
	head, err := s.store.TopicHead(ctx, e.Topic)
	if err != nil {
		return nil, err
	}
	es.pos = head
	return []heldMsg{es.active(true)}, nil
}

// eventSource is the heldSource of an events/stream.
type eventSource eventStream

func (src *eventSource) read(ctx context.Context, age time.Duration) (heldBatch, error) {
	es := (*eventStream)(src)
	s, l := es.l.srv, es.l
	if r := es.pending; r != nil {
		// The first read, made before the confirmation; read again at
		// once, as the watcher was registered only now.
		es.pending = nil
		return heldBatch{msgs: es.events(r), more: true}, nil
	}
	logged, err := s.pollGetLog(ctx, l.sess, l.after, false, age)
	if err != nil && len(logged) == 0 {
		return heldBatch{}, err
	}
	var b heldBatch
	for _, ev := range logged {
		l.after = ev.Seq
		if string(ev.Data) == string(listenCancel(l.id)) {
			return heldBatch{end: true}, nil // cancelled: no response
		}
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(ev.Data, &m) == nil && m.Method == methodEventsListChanged {
			es.recheck = true
		}
	}
	b.more = len(logged) == readBatch
	if err == nil {
		l.refresh(ctx)
	}
	if es.recheck {
		msgs, err := es.checkType(ctx)
		if err != nil {
			return b, err // looked at again at the next read
		}
		es.recheck = false
		b.msgs = append(b.msgs, msgs...)
		if es.terminated {
			b.end = true
			return b, nil
		}
	}
	if msgs, end := es.injected(); len(msgs) > 0 {
		b.msgs = append(b.msgs, msgs...)
		if end {
			b.end = true
			return b, nil
		}
	}
	now := s.opts.Now()
	// The topic's log is read when the feed woke the stream for it (its
	// backing session's log moved), and at each of the stream's own
	// checks (a lost hint).
	if len(logged) > 0 || now.Sub(es.lastTopic) >= s.idleCheckEvery() {
		r, rerr := s.readEventsAfter(ctx, es.e, es.filters, es.pos, time.Time{}, streamReadEvents)
		if rerr != nil {
			return b, rerr
		}
		es.lastTopic = now
		if r.truncated {
			// A gap (the log no longer keeps what came after the
			// position): a fresh active with truncated, and on.
			if len(r.seqs) > 0 {
				es.pos = r.seqs[0] - 1
			} else {
				es.pos = r.pos
			}
			b.msgs = append(b.msgs, es.active(true))
		}
		b.msgs = append(b.msgs, es.events(r)...)
		b.more = b.more || r.hasMore
	}
	if now.Sub(es.lastBeat) >= es.heartbeat {
		b.msgs = append(b.msgs, es.heartbeatMsg()) // after the events: their position
	}
	return b, err
}

// wrote notes when a heartbeat was written (the quiet message): only a
// heartbeat puts the next one off.
func (src *eventSource) wrote(m heldMsg) {
	if m.quiet {
		src.lastBeat = src.l.srv.opts.Now()
	}
}

func (src *eventSource) delivered(context.Context, bool) {}

// upkeepIn is when the next heartbeat, or the backing session's refresh,
// is due.
func (src *eventSource) upkeepIn(now time.Time) time.Duration {
	return min(src.heartbeat-now.Sub(src.lastBeat), src.l.chores())
}

// upkeep refreshes the backing session if due and returns a heartbeat
// if due: the position read up to, so that the client's cursor advances
// while no event matches.
func (src *eventSource) upkeep(ctx context.Context) []heldMsg {
	es := (*eventStream)(src)
	es.l.refresh(ctx)
	if es.l.srv.opts.Now().Sub(es.lastBeat) >= es.heartbeat {
		return []heldMsg{es.heartbeatMsg()}
	}
	return nil
}

// finish ends the stream: at the deadline, on shutdown and when the
// backing session is gone, with a last heartbeat (the position read up
// to) and the empty result, and after a termination with the result; a
// cancelled stream, or one whose client left, gets nothing. The backing
// session is deleted in every case.
func (src *eventSource) finish(ctx context.Context, sse *sseWriter, why heldEnd) {
	es := (*eventStream)(src)
	switch {
	case why == endDeadline || why == endGone:
		if sse.event("", es.heartbeatMsg().data) == nil {
			sse.event("", es.result())
		}
	case why == endDone && es.terminated:
		sse.event("", es.result())
	}
	es.l.close(ctx)
}

// eventsStreamCapabilities are the client capabilities of an events
// stream's backing session: the Events extension, so that the session is
// told of changes of the events registry in either era (notifiedKinds).
var eventsStreamCapabilities = json.RawMessage(`{"extensions":{"` + EventsExtension + `":{}}}`)

// serveEventStream serves events/stream (either era) on w: a refusal as
// a JSON-RPC error before anything is stored, else the SSE stream.
func (h *StreamableHandler) serveEventStream(w http.ResponseWriter, r *http.Request, ss *ServerSession, m *Message) {
	ctx := r.Context()
	s := h.srv
	era := ss.Era()
	es, truncated, err := s.checkEventStream(ctx, ss, m)
	var rpcErr *Error
	if errors.As(err, &rpcErr) {
		writeError(w, era, m.ID, rpcErr)
		return
	}
	if err != nil {
		h.storeFailure(ctx, w, era, m.ID, err, "opening events stream")
		return
	}
	h.streams.Add(1)
	defer h.streams.Done()
	owner := quotaPrincipal(r, ss.Principal())
	err = s.allowListen(ctx, owner)
	var quota *errListenQuota
	if errors.As(err, &quota) {
		writeError(w, era, m.ID, quota.refusal(s.opts.EventsErrors))
		return
	}
	process, err := s.holdLiveness(ctx)
	if err != nil {
		h.storeFailure(ctx, w, era, m.ID, err, "storing the liveness record")
		return
	}
	defer s.releaseLiveness(ctx)
	hashes, err := s.store.RegistryHashes(ctx)
	if err != nil {
		h.storeFailure(ctx, w, era, m.ID, err, "reading registry hashes")
		return
	}
	ttl := h.listenTTL()
	now := s.opts.Now()
	info := notify.ListenState{Process: process, Request: canonicalID(m.ID), Session: ss.ID()}
	st := &notify.Session{
		ID:                 "evstream-" + randomID(16),
		Principal:          listenPrincipal(owner),
		ProtocolVersion:    ss.ProtocolVersion(),
		Listen:             info,
		ClientCapabilities: eventsStreamCapabilities,
		Initialized:        true,
		// At the highest level the ingest fans out only
		// resources/updated to it: the wake-up.
		LogLevel:       string(loggingLevels[len(loggingLevels)-1]),
		CreatedAt:      now,
		ExpiresAt:      now.Add(ttl),
		NotifiedHashes: hashes,
		Subscriptions:  []string{topicURI(es.e.Topic)},
	}
	if err := s.store.CreateSession(ctx, st); err != nil {
		h.storeFailure(ctx, w, era, m.ID, err, "creating the events stream's backing session")
		return
	}
	es.l = &listenStream{srv: s, sess: &ServerSession{srv: s, state: st}, principal: ss.Principal(), id: m.ID,
		filter: &SubscriptionFilter{}, ttl: ttl, info: info}
	// Subscribed before the first read: an event appended after it is
	// fanned out to the backing session, one before it is read now.
	first, err := es.start(ctx, truncated)
	if err != nil {
		es.l.close(ctx)
		h.storeFailure(ctx, w, era, m.ID, err, "reading the event type's topic")
		return
	}
	es.heartbeat = h.heartbeatEvery()
	es.lastTopic = s.opts.Now()
	es.startFaults()
	sse := newSSEWriter(w)
	sse.start()
	if sse.event("", first.data) != nil {
		es.l.close(ctx)
		return
	}
	es.lastBeat = s.opts.Now() // the confirmation: the first heartbeat is due heartbeat after it
	hs := &heldStream{h: h, sse: sse, src: (*eventSource)(es), session: st.ID, hold: h.opts.StreamHold, watchFirst: true, hooks: h.heldHooks}
	hs.run(ctx)
}

// checkEventStream checks an events/stream request before anything is
// stored: its params, event type (NotFound, Unsupported for a type
// without push), arguments (InvalidParams against inputSchema) and
// cursor (InvalidParams: forged, another type's). It returns the stream
// without its backing session, positioned at the cursor, and whether
// that position is already a gap (the type moved to another topic).
func (s *Server) checkEventStream(ctx context.Context, _ *ServerSession, m *Message) (*eventStream, bool, error) {
	if !s.eventsOn() {
		return nil, false, Errorf(CodeMethodNotFound, "method not found: %s (this server does not offer the Events extension)", m.Method)
	}
	p, err := decodeParams[StreamEventsParams](m.Params)
	if err != nil {
		return nil, false, err
	}
	e, err := s.eventType(ctx, p.Name, notify.DeliveryPush)
	if err != nil {
		return nil, false, err
	}
	args, err := s.bindArguments(ctx, e, p.Arguments)
	if err != nil {
		return nil, false, err
	}
	filters, err := eventFilter(e, args)
	if err != nil {
		return nil, false, err
	}
	es := &eventStream{e: e, args: args, filters: filters, pos: -1}
	if p.MaxAgeMs != nil && *p.MaxAgeMs < 0 {
		return nil, false, Errorf(CodeInvalidParams, "invalid params: maxAgeMs must not be negative")
	}
	if p.Cursor == nil {
		return es, false, nil // from now: the head, read once subscribed
	}
	c, err := s.states.verifyCursor(*p.Cursor, e.Name)
	if err != nil {
		return nil, false, Errorf(CodeInvalidParams, "invalid params: cursor: %v", err)
	}
	if c.Topic != e.Topic {
		return es, true, nil // moved: from the new topic's head, truncated
	}
	es.pos = c.Seq
	if p.MaxAgeMs != nil {
		es.floor = s.opts.Now().Add(-time.Duration(min(*p.MaxAgeMs, int64(1<<62)/int64(time.Millisecond))) * time.Millisecond)
	}
	return es, false, nil
}

// start makes the stream's first read (the replay from its cursor, up to
// streamReadEvents events; what follows is read once the stream is
// watched) and returns its confirmation, notifications/events/active,
// with truncated when the position was a gap, the log no longer keeps
// what followed the cursor, or maxAgeMs skipped events.
func (es *eventStream) start(ctx context.Context, truncated bool) (heldMsg, error) {
	s := es.l.srv
	if es.pos < 0 {
		head, err := s.store.TopicHead(ctx, es.e.Topic)
		if err != nil {
			return heldMsg{}, err
		}
		es.pos = head
		return es.active(truncated), nil
	}
	r, err := s.readEventsAfter(ctx, es.e, es.filters, es.pos, es.floor, streamReadEvents)
	if err != nil {
		return heldMsg{}, err
	}
	if r.truncated {
		truncated = true
		if len(r.seqs) > 0 {
			es.pos = r.seqs[0] - 1
		} else {
			es.pos = r.pos
		}
	}
	msg := es.active(truncated)
	es.pending = r
	return msg, nil
}

// endEventStreams ends the events streams opened in the 2025-era session
// sid of owner, which was deleted: it appends the cancellation record of
// each one's request to its backing session's log (found among owner's
// backing sessions, listenProfiles: one read), which the stream reads at
// once, on whichever process serves it.
func (s *Server) endEventStreams(ctx context.Context, owner, sid string) {
	if !s.eventsOn() || sid == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	streams, err := s.listenProfiles(ctx, listenPrincipal(owner), notify.ListenMatch{Session: sid}, s.listenScan())
	if err != nil {
		s.log.WarnContext(ctx, "ending the events streams of a deleted session", "session", sid, "err", err)
		return
	}
	for _, st := range streams {
		if _, _, err := s.store.Append(ctx, st.ID, getStream, [][]byte{listenCancelOf(st.Listen.Request)}, nil); err != nil && !errors.Is(err, notify.ErrNotFound) {
			s.log.WarnContext(ctx, "ending an events stream of a deleted session", "stream", st.ID, "err", err)
		}
		s.watcher.wake(st.ID)
	}
}

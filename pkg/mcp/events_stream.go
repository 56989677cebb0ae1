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

// events/stream (push) is a held stream (held.go) of one subscription:
// it writes each event of its event type's topic log that matches its
// arguments as notifications/events/event, with the cursor after it (the
// signed cursor of events/poll: a push cursor resumes a poll and a poll
// cursor a stream). Served in both eras (a POST of a 2025-era session, a
// 2026-era request). On Lambda it ends before the deadline like every
// held stream (the empty StreamEventsResult) and the client opens a new
// one from its cursor: nothing is parked, the cursor is the replay.
//
// The path of an event to the client, in the order the data flows:
//
//  1. Doorbell. The ingest appends the event to its topic's log and fans
//     out a notifications/resources/updated of events://<topic> to every
//     subscribed session (pkg/notify/ingest/fanout.go), the stream's
//     backing session among them: a doorbell, never the event itself
//     (the doorbell rule, stated at [Server.createBacking] and enforced
//     by admitsInfo in fanout.go).
//  2. Wake. The change feed names the backing session, and the
//     process's watcher (watch.go) wakes the stream's loop,
//     [heldStream.run].
//  3. Read. [eventStream.read] reads the doorbell: [doorbell.read] polls
//     the backing session's log through [Server.pollGetLog]
//     (getstream.go: one GetSession, and a ReadEvents when the log's head
//     moved), noting a cancellation and a notifications/events/list_changed,
//  4. and refreshes the backing session's expiry, one write per half its
//     ttl ([listenStream.refresh], [Server.updateSessionIf]).
//  5. Recheck. After a list_changed, [eventStream.checkType] looks the
//     event type up again ([Server.eventType] → [Server.eventTypes] →
//     [Server.registry]), ends the stream if the subscription no longer
//     holds, and moves the doorbell if the type moved to another topic
//     ([doorbell.move]).
//  6. Topic. [topicReader.read] reads the topic's log after the stream's
//     position through [Server.readEventsAfter] (events_poll.go), as
//     events/poll does: the same position yields the same events.
//  7. Frame. [eventFrames] makes each event a notifications/events/event
//     with its cursor (and the active, heartbeat and terminated
//     notifications); [heldStream.run] writes each as an SSE frame.
//
// The backing session is a listen stream's ([listenPrincipal],
// notify.ListenState): it counts against MaxListensPerPrincipal, a
// notifications/cancelled of the request ends the stream
// ([Server.cancelListen]), a crashed process's streams are reclaimed
// ([Server.reclaimListens]), and a DELETE of the 2025-era session it was
// opened in ends it ([Server.endEventStreams]).

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

// eventStream is one events/stream, and the heldSource of its held
// stream. It is composed of three parts that know nothing of one
// another: its doorbell (the backing session that wakes it), its
// topicReader (the subscription and its position in the topic's log) and
// its eventFrames (the notifications it writes, and their heartbeat).
// Not safe for concurrent use: one goroutine serves a stream.
type eventStream struct {
	srv   *Server
	bell  doorbell
	topic topicReader
	out   eventFrames
	// recheck: the events registry changed, and the event type is to be
	// looked at again (until a look succeeds).
	recheck bool
	// faults: the injected faults reported (ServerOptions.EventFaults,
	// events_faults.go; test builds only).
	faults faultMark
}

// doorbell is an events stream's backing session, whose log is read only
// for what rings it: a notifications/resources/updated of the topic (the
// ingest's fan-out of an event: never the event itself, see
// [Server.createBacking]), a notifications/events/list_changed, and the
// cancellation of the stream's request. It is a listen stream's backing
// session without a filter, so that what counts, cancels, reclaims and
// refreshes listen streams does so for events streams too.
type doorbell struct{ l *listenStream }

// ring is what one read of a doorbell found.
type ring struct {
	logged      bool // something was logged: the topic's log may have moved
	listChanged bool // the events registry changed
	cancelled   bool // a notifications/cancelled of the request: end, with no response
	more        bool // a full batch: read again at once
}

// read reads what rang since the last read ([Server.pollGetLog]: an idle
// read is one GetSession) and, when the read succeeded, extends the
// backing session's expiry if due ([listenStream.refresh]). An error may
// come with a ring (a failed registry check, see pollGetLog).
func (d doorbell) read(ctx context.Context, registryAge time.Duration) (ring, error) {
	l := d.l
	logged, err := l.srv.pollGetLog(ctx, l.sess, l.after, false, registryAge)
	if err != nil && len(logged) == 0 {
		return ring{}, err
	}
	var r ring
	for _, ev := range logged {
		l.after = ev.Seq
		if string(ev.Data) == string(listenCancel(l.id)) {
			return ring{cancelled: true}, nil
		}
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(ev.Data, &m) == nil && m.Method == methodEventsListChanged {
			r.listChanged = true
		}
	}
	r.logged, r.more = len(logged) > 0, len(logged) == readBatch
	if err == nil {
		l.refresh(ctx)
	}
	return r, err
}

// move subscribes the backing session to topic to instead of from: the
// event type moved. Failing to unsubscribe from from is logged (the
// session is then woken by both topics' events).
func (d doorbell) move(ctx context.Context, from, to string) error {
	s, id := d.l.srv, d.l.sess.ID()
	if err := s.store.Subscribe(ctx, id, topicURI(to)); err != nil {
		return fmt.Errorf("subscribing to the event type's new topic: %w", err)
	}
	if err := s.store.Unsubscribe(ctx, id, topicURI(from)); err != nil && !errors.Is(err, notify.ErrNotFound) {
		s.log.WarnContext(ctx, "unsubscribing an events stream from its old topic", "stream", id, "err", err)
	}
	return nil
}

// upkeepIn is how long until the backing session's refresh is due
// ([listenStream.chores]).
func (d doorbell) upkeepIn() time.Duration { return d.l.chores() }

// refresh extends the backing session's expiry if due
// ([listenStream.refresh]).
func (d doorbell) refresh(ctx context.Context) { d.l.refresh(ctx) }

// close deletes the backing session: the stream no longer rings.
func (d doorbell) close(ctx context.Context) { d.l.close(ctx) }

// topicReader is an events stream's subscription (its event type and
// arguments) and its position in the type's topic log.
type topicReader struct {
	srv     *Server
	e       *notify.EventItem
	args    json.RawMessage
	filters map[string]json.RawMessage
	pos     int64 // the topic log's position read up to; < 0 before the first read: from the head
	// floor is now less the request's maxAgeMs: the first read skips
	// events received before it.
	floor time.Time
	// pending is the first read, made before the stream was confirmed,
	// whose events are not written yet.
	pending  *eventsRead
	lastRead time.Time // the last read of the topic's log
}

// cursorAt is the signed cursor of position seq of the topic's log.
func (t *topicReader) cursorAt(seq int64) *string {
	c := t.srv.states.signCursor(eventCursor{Name: t.e.Name, Topic: t.e.Topic, Seq: seq})
	return &c
}

// cursor is the signed cursor of the position read up to.
func (t *topicReader) cursor() *string { return t.cursorAt(t.pos) }

// start makes the first read: the topic's head when the stream starts
// from now, else the replay from the cursor (up to streamReadEvents
// events, kept as pending; what follows is read once the stream is
// watched). It reports whether the stream starts at a gap: truncated
// already (the type moved to another topic), or the log no longer keeps
// what followed the cursor, or maxAgeMs skipped events.
func (t *topicReader) start(ctx context.Context, truncated bool) (bool, error) {
	if t.pos < 0 {
		head, err := t.srv.store.TopicHead(ctx, t.e.Topic)
		if err != nil {
			return false, err
		}
		t.pos = head
		return truncated, nil
	}
	r, err := t.srv.readEventsAfter(ctx, t.e, t.filters, t.pos, t.floor, streamReadEvents)
	if err != nil {
		return false, err
	}
	if r.truncated {
		truncated = true
		t.skipGap(r)
	}
	t.pending = r
	return truncated, nil
}

// read reads the topic's log after the position, at now
// ([Server.readEventsAfter]). At a gap (r.truncated: the log no longer
// keeps what came after the position) it moves the position to just
// before what r found; [topicReader.advance] moves it past r.
func (t *topicReader) read(ctx context.Context, now time.Time) (*eventsRead, error) {
	r, err := t.srv.readEventsAfter(ctx, t.e, t.filters, t.pos, time.Time{}, streamReadEvents)
	if err != nil {
		return nil, err
	}
	t.lastRead = now
	if r.truncated {
		t.skipGap(r)
	}
	return r, nil
}

// skipGap moves the position to just before the first event r found, or
// to where r read up to if it found none.
func (t *topicReader) skipGap(r *eventsRead) {
	if len(r.seqs) > 0 {
		t.pos = r.seqs[0] - 1
	} else {
		t.pos = r.pos
	}
}

// advance moves the position past what r read, once its events are
// framed.
func (t *topicReader) advance(r *eventsRead) { t.pos = r.pos }

// eventFrames are the notifications an events stream writes, each with
// the subscription id in its _meta, and the heartbeat's schedule.
type eventFrames struct {
	id        json.RawMessage // the subscription id: the request's id
	heartbeat time.Duration   // the interval of heartbeats
	// lastBeat is when the last heartbeat (or the confirmation) was
	// written: the next is due heartbeat after it, whatever was written
	// since.
	lastBeat   time.Time
	terminated bool // a notifications/events/terminated was made
}

// notification is a notification of the stream, with params and the
// subscription id.
func (f *eventFrames) notification(method string, params map[string]any) heldMsg {
	params["_meta"] = map[string]json.RawMessage{metaSubscriptionID: f.id}
	b, _ := encodeNotification(method, params)
	return heldMsg{data: b, quiet: method == methodEventsHeartbeat}
}

// active is notifications/events/active: the confirmation, and after a
// gap a fresh one with truncated.
func (f *eventFrames) active(cursor *string, truncated bool) heldMsg {
	return f.notification(methodEventsActive, map[string]any{"cursor": cursor, "truncated": truncated})
}

// beat is notifications/events/heartbeat with the position read up to.
func (f *eventFrames) beat(cursor *string) heldMsg {
	return f.notification(methodEventsHeartbeat, map[string]any{"cursor": cursor})
}

// terminate is notifications/events/terminated, which ends the stream.
func (f *eventFrames) terminate(e *Error) heldMsg {
	f.terminated = true
	return f.notification(methodEventsTerminated, map[string]any{"error": e})
}

// events is a notifications/events/event of each of r's events, with the
// cursor after it (cursorAt of its position) and the event's own _meta.
func (f *eventFrames) events(r *eventsRead, cursorAt func(int64) *string) []heldMsg {
	var out []heldMsg
	for i, occ := range r.events {
		meta := map[string]json.RawMessage{metaSubscriptionID: f.id}
		for k, v := range occ.Meta {
			meta[k], _ = json.Marshal(v)
		}
		b, _ := encodeNotification(methodEventsEvent, map[string]any{
			"eventId": occ.EventID, "name": occ.Name, "timestamp": occ.Timestamp, "data": occ.Data, "cursor": cursorAt(r.seqs[i]), "_meta": meta,
		})
		out = append(out, heldMsg{data: b})
	}
	return out
}

// beatIn is how long after now the next heartbeat is due (<= 0: due).
func (f *eventFrames) beatIn(now time.Time) time.Duration { return f.heartbeat - now.Sub(f.lastBeat) }

// result is the empty StreamEventsResult that ends the stream.
func (f *eventFrames) result() []byte { return emptyStreamResult(f.id) }

// active is the stream's notifications/events/active at its position.
func (es *eventStream) active(truncated bool) heldMsg {
	return es.out.active(es.topic.cursor(), truncated)
}

// heartbeat is the stream's heartbeat: the position read up to, so that
// the client's cursor advances while no event matches.
func (es *eventStream) heartbeat() heldMsg { return es.out.beat(es.topic.cursor()) }

// events frames r's events and moves the position past r.
func (es *eventStream) events(r *eventsRead) []heldMsg {
	msgs := es.out.events(r, es.topic.cursorAt)
	es.topic.advance(r)
	return msgs
}

// checkType looks at the event type again after a change of the events
// registry: a terminated message if the subscription no longer holds (the
// type is gone, offers no push, or its inputSchema refuses the
// arguments); a notifications/events/active with truncated if the type
// moved to another topic (the doorbell moves with it, and the stream goes
// on from that topic's head, as a poll does); nothing otherwise.
func (es *eventStream) checkType(ctx context.Context) ([]heldMsg, error) {
	s, t := es.srv, &es.topic
	e, err := s.eventType(ctx, t.e.Name, notify.DeliveryPush)
	var rpcErr *Error
	if errors.As(err, &rpcErr) {
		return []heldMsg{es.out.terminate(rpcErr)}, nil
	}
	if err != nil {
		return nil, err
	}
	if !bindHolds(ctx, e, t.args) {
		return []heldMsg{es.out.terminate(s.eventForbidden(e.Name))}, nil
	}
	filters, err := eventFilter(e, t.args)
	if errors.As(err, &rpcErr) {
		return []heldMsg{es.out.terminate(rpcErr)}, nil
	}
	if err != nil {
		return nil, err
	}
	if e.Topic == t.e.Topic {
		t.e, t.filters = e, filters
		return nil, nil
	}
	// The type moved: the stream takes the new type only with the new
	// topic's position, so a failure here leaves it on the old one and the
	// next read moves it again (moving the doorbell twice is harmless).
	if err := es.bell.move(ctx, t.e.Topic, e.Topic); err != nil {
		return nil, err
	}
	head, err := s.store.TopicHead(ctx, e.Topic)
	if err != nil {
		return nil, err
	}
	t.e, t.filters, t.pos = e, filters, head
	return []heldMsg{es.active(true)}, nil
}

// read is the heldSource's read: the pending first read, else the
// doorbell, a recheck of the event type if the registry changed, any
// injected faults, the topic's log when the doorbell rang (or at the
// stream's own check: a lost wake-up), and a heartbeat if due.
func (es *eventStream) read(ctx context.Context, age time.Duration) (heldBatch, error) {
	s := es.srv
	if r := es.topic.pending; r != nil {
		// The first read, made before the confirmation; read again at
		// once, as the watcher was registered only now.
		es.topic.pending = nil
		return heldBatch{msgs: es.events(r), more: true}, nil
	}
	rang, err := es.bell.read(ctx, age)
	if rang.cancelled {
		return heldBatch{end: true}, nil // cancelled: no response
	}
	if err != nil && !rang.logged {
		return heldBatch{}, err
	}
	es.recheck = es.recheck || rang.listChanged
	b := heldBatch{more: rang.more}
	if es.recheck {
		msgs, err := es.checkType(ctx)
		if err != nil {
			return b, err // looked at again at the next read
		}
		es.recheck = false
		b.msgs = append(b.msgs, msgs...)
		if es.out.terminated {
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
	// The topic's log is read when the doorbell rang, and at each of the
	// stream's own checks (a lost wake-up).
	if rang.logged || now.Sub(es.topic.lastRead) >= s.idleCheckEvery() {
		r, rerr := es.topic.read(ctx, now)
		if rerr != nil {
			return b, rerr
		}
		if r.truncated {
			b.msgs = append(b.msgs, es.active(true)) // a gap: a fresh active with truncated, and on
		}
		b.msgs = append(b.msgs, es.events(r)...)
		b.more = b.more || r.hasMore
	}
	if es.out.beatIn(now) <= 0 {
		b.msgs = append(b.msgs, es.heartbeat()) // after the events: their position
	}
	return b, err
}

// wrote notes when a heartbeat was written (the quiet message): only a
// heartbeat puts the next one off.
func (es *eventStream) wrote(m heldMsg) {
	if m.quiet {
		es.out.lastBeat = es.srv.opts.Now()
	}
}

func (es *eventStream) delivered(context.Context, bool) {}

// upkeepIn is when the next heartbeat, or the backing session's refresh,
// is due.
func (es *eventStream) upkeepIn(now time.Time) time.Duration {
	return min(es.out.beatIn(now), es.bell.upkeepIn())
}

// upkeep refreshes the backing session if due and returns a heartbeat
// if due.
func (es *eventStream) upkeep(ctx context.Context) []heldMsg {
	es.bell.refresh(ctx)
	if es.out.beatIn(es.srv.opts.Now()) <= 0 {
		return []heldMsg{es.heartbeat()}
	}
	return nil
}

// finish ends the stream: at the deadline, on shutdown and when the
// backing session is gone, with a last heartbeat (the position read up
// to) and the empty result, and after a termination with the result; a
// cancelled stream, or one whose client left, gets nothing. The backing
// session is deleted in every case.
func (es *eventStream) finish(ctx context.Context, sse *sseWriter, why heldEnd) {
	switch {
	case why == endDeadline || why == endGone:
		if sse.event("", es.heartbeat().data) == nil {
			sse.event("", es.out.result())
		}
	case why == endDone && es.out.terminated:
		sse.event("", es.out.result())
	}
	es.bell.close(ctx)
}

// eventsStreamCapabilities are the client capabilities of an events
// stream's backing session: the Events extension, so that the session is
// told of changes of the events registry in either era (notifiedKinds).
var eventsStreamCapabilities = json.RawMessage(`{"extensions":{"` + EventsExtension + `":{}}}`)

// serveEventStream serves events/stream (either era) on w: a refusal as
// a JSON-RPC error before anything is stored, else the SSE stream.
func (h *StreamableHandler) serveEventStream(w http.ResponseWriter, r *http.Request, ss *ServerSession, m *Message) {
	// What opens the stream is in openEventStream, whose frame is gone
	// while the stream waits (see heldStream.run).
	hs := h.openEventStream(w, r, ss, m)
	if hs == nil {
		return
	}
	defer h.streams.Done()
	defer h.srv.releaseLiveness(r.Context())
	hs.run(r.Context())
}

// openEventStream opens the events/stream of a request to
// serveEventStream: its checks, the liveness record, the backing session,
// the first read and the confirmation. It returns the stream to run,
// counted in h.streams and holding the liveness record, which the caller
// releases once it ends; nil when the request was answered otherwise.
//
//go:noinline
func (h *StreamableHandler) openEventStream(w http.ResponseWriter, r *http.Request, ss *ServerSession, m *Message) (hs *heldStream) {
	ctx := r.Context()
	s := h.srv
	era := ss.Era()
	es, truncated, err := s.checkEventStream(ctx, ss, m)
	var rpcErr *Error
	if errors.As(err, &rpcErr) {
		writeError(w, era, m.ID, rpcErr)
		return nil
	}
	if err != nil {
		h.storeFailure(ctx, w, era, m.ID, err, "opening events stream")
		return nil
	}
	h.streams.Add(1)
	live := false // holds the liveness record
	defer func() {
		if hs == nil { // not opened: released here, as serveEventStream would
			if live {
				s.releaseLiveness(ctx)
			}
			h.streams.Done()
		}
	}()
	owner := quotaPrincipal(r, ss.Principal())
	err = s.allowListen(ctx, owner)
	var quota *errListenQuota
	if errors.As(err, &quota) {
		writeError(w, era, m.ID, quota.refusal(s.opts.EventsErrors))
		return nil
	}
	process, err := s.holdLiveness(ctx)
	if err != nil {
		h.storeFailure(ctx, w, era, m.ID, err, "storing the liveness record")
		return nil
	}
	live = true
	hashes, err := s.store.RegistryHashes(ctx)
	if err != nil {
		h.storeFailure(ctx, w, era, m.ID, err, "reading registry hashes")
		return nil
	}
	l, err := s.createBacking(ctx, &backing{
		kind: "evstream", ss: ss, owner: owner, id: m.ID, filter: &SubscriptionFilter{}, process: process,
		session: ss.ID(), caps: eventsStreamCapabilities, hashes: hashes, subs: []string{topicURI(es.topic.e.Topic)}, ttl: h.listenTTL(),
	})
	if err != nil {
		h.storeFailure(ctx, w, era, m.ID, err, "creating the events stream's backing session")
		return nil
	}
	es.bell = doorbell{l}
	// Subscribed before the first read: an event appended after it is
	// fanned out to the backing session, one before it is read now.
	first, err := es.start(ctx, truncated)
	if err != nil {
		es.bell.close(ctx)
		h.storeFailure(ctx, w, era, m.ID, err, "reading the event type's topic")
		return nil
	}
	es.out.heartbeat = h.heartbeatEvery()
	es.topic.lastRead = s.opts.Now()
	es.startFaults()
	sse := newSSEWriter(w)
	sse.start()
	if sse.event("", first.data) != nil {
		es.bell.close(ctx)
		return nil
	}
	es.out.lastBeat = s.opts.Now() // the confirmation: the first heartbeat is due heartbeat after it
	return &heldStream{h: h, sse: sse, src: es, session: l.sess.ID(), hold: h.opts.StreamHold, watchFirst: true, hooks: h.heldHooks}
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
	es := &eventStream{srv: s, out: eventFrames{id: m.ID}, topic: topicReader{srv: s, e: e, args: args, filters: filters, pos: -1}}
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
	es.topic.pos = c.Seq
	if p.MaxAgeMs != nil {
		es.topic.floor = s.opts.Now().Add(-time.Duration(min(*p.MaxAgeMs, int64(1<<62)/int64(time.Millisecond))) * time.Millisecond)
	}
	return es, false, nil
}

// start makes the stream's first read ([topicReader.start]) and returns
// its confirmation, notifications/events/active, with truncated when the
// stream starts at a gap.
func (es *eventStream) start(ctx context.Context, truncated bool) (heldMsg, error) {
	truncated, err := es.topic.start(ctx, truncated)
	if err != nil {
		return heldMsg{}, err
	}
	return es.active(truncated), nil
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

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// isResponse reports whether a logged message is a JSON-RPC response: the
// last message of a request's stream.
func isResponse(data []byte) bool {
	var m struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	return json.Unmarshal(data, &m) == nil && m.Method == "" && m.ID != nil
}

// DefaultStreamHold is the default StreamableOptions.StreamHold.
const DefaultStreamHold = 5 * time.Second

// readBatch is how many log entries one poll reads.
const readBatch = 100

func (h *StreamableHandler) serveGET(w http.ResponseWriter, r *http.Request, principal string) {
	// What opens the stream is in openGETStream, whose frame is gone while the
	// stream waits (see heldStream.run).
	hs, sid := h.openGETStream(w, r, principal)
	if hs == nil {
		return
	}
	defer h.open.release(sid)
	defer h.streams.Done()
	hs.run(r.Context())
}

// openGETStream opens the GET stream of a request to serveGET: it checks the
// request, takes over (a fresh GET stream) and writes the response's
// head. It returns the stream to run, counted in h.open (under sid, the
// session's ID) and h.streams, which the caller releases once it ends; nil
// when the request was answered otherwise.
//
//go:noinline
func (h *StreamableHandler) openGETStream(w http.ResponseWriter, r *http.Request, principal string) (hs *heldStream, sid string) {
	if !accepts(r, "text/event-stream") {
		writeError(w, Era2025, nil, refuse(errNotAcceptable, "Not Acceptable: Accept must include text/event-stream"))
		return nil, ""
	}
	// One read: the session, with the head of its GET stream log.
	ss := h.session(w, r, principal)
	if ss == nil {
		return nil, ""
	}
	stream, after, resume := getStream, int64(0), false
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		var ok bool
		resume = true
		if stream, after, ok = parseEventID(last); !ok {
			writeError(w, Era2025, nil, refuse(errBadRequest, "Bad Request: malformed Last-Event-ID "+clipText(last, 128)))
			return nil, ""
		}
		if stream != getStream && !h.checkResume(r.Context(), w, ss, stream, after) {
			return nil, ""
		}
	}
	sid = ss.ID()
	if !h.open.acquire(sid, h.srv.opts.Limits.MaxStreamsPerSession, 0) {
		writeError(w, Era2025, nil, tooMany("too many streams open for this session"))
		return nil, ""
	}
	h.streams.Add(1)
	defer func(id string) {
		if hs == nil { // not opened: released here, as serveGET would
			h.streams.Done()
			h.open.release(id)
		}
	}(sid)
	ctx := r.Context()
	mine := int64(-1) // a POST stream being resumed has no takeover record
	if stream == getStream && !resume {
		// A fresh GET stream takes over: it appends a takeover record,
		// which ends any GET stream of the session that reads it, and
		// delivers from where delivery stopped, read after the record: a
		// stream that delivered up to here has recorded it, and one still
		// running stops at our record without writing more.
		seq, _, err := h.srv.store.Append(ctx, ss.ID(), getStream, [][]byte{takeover}, nil)
		if err != nil {
			h.storeFailure(ctx, w, Era2025, nil, err, "opening GET stream", "session", ss.ID())
			return nil, ""
		}
		h.srv.watcher.wake(ss.ID()) // a stream of this process it takes over ends at once
		mine = seq
		fresh, err := h.srv.store.GetSession(ctx, ss.ID())
		if err != nil {
			h.storeFailure(ctx, w, Era2025, nil, err, "opening GET stream", "session", ss.ID())
			return nil, ""
		}
		ss.state = fresh
		after = fresh.Delivered
	} else if stream == getStream {
		// A resumed GET stream writes nothing to open: its position is in
		// its Last-Event-ID, with the takeover record of the stream that
		// sent it. It yields to any later takeover record: a fresh GET
		// stream opened since.
		mine = after
		if owner, ok := eventOwner(r.Header.Get("Last-Event-ID")); ok {
			mine = max(mine, owner)
		}
	}
	h.srv.touch(ctx, ss)
	sse := newSSEWriter(w)
	sse.start()
	resumable := version(ss.ProtocolVersion()).primesStreams()
	if resumable {
		id := eventID(stream, after)
		if stream == getStream {
			id = getEventID(after, mine, time.Now().UnixNano())
		}
		if sse.prime(id, h.opts.RetryInterval) != nil {
			return nil, ""
		}
	}
	// Hold policy (see StreamableOptions.StreamHold): a resumable GET
	// stream stays open StreamHold after it opens fresh or last sends a
	// message; a resumed one starts idle, so that with nothing to send it
	// ends after one check.
	hold, idle := time.Duration(-1), false
	if stream == getStream && resumable && h.opts.StreamHold >= 0 {
		hold, idle = h.opts.StreamHold, resume
	}
	src := &getSource{h: h, ss: ss, stream: stream, after: after, mine: mine, fresh: true}
	hs = &heldStream{h: h, sse: sse, src: src, hold: hold, endIdle: hold >= 0, startIdle: idle, hooks: h.heldHooks}
	if stream == getStream {
		hs.session = ss.ID()
	}
	return hs, sid
}

// getSource is the heldSource of a GET stream and of a resumed POST
// response stream: it copies the stream's log to the client until the
// stream is taken over (GET) or its response is written (POST). A GET
// stream records what it wrote (MarkDelivered), so that the stream that
// takes it over delivers from there.
//
// A GET stream reads its log when it starts, when the watcher wakes it
// (the change feed names its session, or the registries changed: see
// watch.go) and once per idleCheck; each read is one GetSession (which
// reports the log's head), plus a ReadEvents only when there is
// something new; a registry change is noticed from this process's cached
// registry hashes. A resumed POST stream polls every PollInterval.
type getSource struct {
	h      *StreamableHandler
	ss     *ServerSession
	stream string
	after  int64 // the last sequence number read
	mine   int64 // the stream's own takeover record (GET), or -1
	fresh  bool  // ss's state was just read: the first read need not
	// written is the last sequence number written, marked the last one
	// recorded with MarkDelivered.
	written, marked int64
}

func (g *getSource) read(ctx context.Context, age time.Duration) (heldBatch, error) {
	var (
		evs []notify.Event
		err error
	)
	if g.stream == getStream {
		evs, err = g.h.srv.pollGetLog(ctx, g.ss, g.after, g.fresh, age)
	} else {
		evs, err = g.h.srv.store.ReadEvents(ctx, g.ss.ID(), g.stream, g.after, readBatch)
	}
	g.fresh = false
	if err != nil && (ctx.Err() != nil || errors.Is(err, notify.ErrNotFound)) {
		return heldBatch{}, err
	}
	if g.stream == getStream {
		for _, ev := range evs {
			if ev.Seq > g.mine && bytes.Equal(ev.Data, takeover) {
				// A newer GET stream took over. It delivers from what
				// this one recorded: write nothing more.
				return heldBatch{end: true}, nil
			}
		}
	}
	b := heldBatch{more: len(evs) == readBatch}
	for _, ev := range evs {
		g.after = ev.Seq
		if isControl(ev.Data) {
			continue
		}
		id := eventID(g.stream, ev.Seq)
		if g.stream == getStream && ev.Seq < g.mine {
			// Delivered before this stream's own takeover record: tag
			// the id, so that a stream resumed from it does not yield to
			// that record.
			id = getEventID(ev.Seq, g.mine, 0)
		}
		b.msgs = append(b.msgs, heldMsg{id: id, data: ev.Data, seq: ev.Seq})
		if g.stream != getStream && isResponse(ev.Data) {
			b.end, b.more = true, false // the request's stream is complete
			break
		}
	}
	if g.stream == getStream {
		b.msgs = g.h.srv.filterTopicMessages(ctx, b.msgs)
	}
	return b, err
}

func (g *getSource) wrote(m heldMsg) { g.written = m.seq }

func (g *getSource) delivered(ctx context.Context, more bool) {
	g.mark(ctx)
	if !more {
		// Amortised: writes only when half the idle timeout has passed.
		g.h.srv.touch(ctx, g.ss)
	}
}

// mark records what the GET stream wrote, even when the client has gone
// (ctx is cancelled then).
func (g *getSource) mark(ctx context.Context) {
	if g.stream != getStream || g.written <= g.marked {
		return
	}
	if err := g.h.srv.store.MarkDelivered(context.WithoutCancel(ctx), g.ss.ID(), g.written); err != nil {
		g.h.srv.log.WarnContext(ctx, "marking delivered", "session", g.ss.ID(), "err", err)
		return
	}
	g.marked = g.written
}

func (g *getSource) upkeepIn(time.Time) time.Duration { return noUpkeep }

func (g *getSource) upkeep(context.Context) []heldMsg { return nil }

func (g *getSource) finish(ctx context.Context, sse *sseWriter, why heldEnd) {
	switch why {
	case endIdle:
		// The client comes back after the retry interval, from where the
		// log was read (past any control records), and its reconnection
		// checks once. The nonce differs on every stream (wall clock).
		sse.prime(getEventID(g.after, g.mine, time.Now().UnixNano()), g.h.opts.RetryInterval)
	case endDeadline:
		sse.retry(g.h.opts.RetryInterval)
	}
	g.mark(ctx)
}

// idleRegistryAge is how old this process's registry hashes may be for an
// idle stream's reconnection: trusting them that long, instead of
// RegistryRefresh, keeps a lone idle client (one reconnection a second on
// an instance that serves nothing else) from costing a registry read per
// reconnection. Its list_changed arrives within about this long.
const idleRegistryAge = 10 * time.Second

// pollGetLog is one poll of a session's GET stream log (a GET stream's or
// a listen stream's): it returns up to readBatch events after after. It
// reads the session (one read, which reports the log's head and refreshes
// ss's state) unless fresh says ss's state was just read, puts any
// list_changed due into the log (from this process's cached registry
// hashes, up to registryAge old), and reads the log only when it has
// something after after. An idle poll is thus one read. ErrNotFound when
// the session is gone. A failed registry check is returned with the
// events read: the caller delivers them and reads again (readRetry), so
// that the list_changed it could not log is not left to its next wake-up.
func (s *Server) pollGetLog(ctx context.Context, ss *ServerSession, after int64, fresh bool, registryAge time.Duration) ([]notify.Event, error) {
	read := false
	if !fresh {
		st, err := s.store.GetSession(ctx, ss.ID())
		switch {
		case errors.Is(err, notify.ErrNotFound):
			return nil, err
		case err != nil:
			if ctx.Err() != nil {
				return nil, err
			}
			s.log.WarnContext(ctx, "polling session", "session", ss.ID(), "err", err)
			read = true // decide on the log itself
		default:
			ss.state = st
		}
	}
	notified := maps.Clone(ss.state.NotifiedHashes)
	regErr := s.notifyChangesAged(ctx, ss, registryAge)
	if regErr != nil {
		regErr = fmt.Errorf("checking registry changes: %w", regErr)
	}
	if !read && ss.state.StreamHead <= after && maps.Equal(notified, ss.state.NotifiedHashes) {
		return nil, regErr
	}
	evs, err := s.store.ReadEvents(ctx, ss.ID(), getStream, after, readBatch)
	if err != nil {
		return nil, err
	}
	return evs, regErr
}

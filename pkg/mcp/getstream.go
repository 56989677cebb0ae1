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

// takeover is a control record in a GET stream's log: a GET stream that
// reads one appended after its own closes, so that at most one GET stream
// of a session delivers messages at a time, whichever process serves it.
var takeover = []byte(`{"mcpush/control":"takeover"}`)

// isControl reports whether a log entry is a control record rather than a
// JSON-RPC message for the client.
func isControl(data []byte) bool { return bytes.HasPrefix(data, []byte(`{"mcpush/control"`)) }

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
	if !accepts(r, "text/event-stream") {
		httpError(w, http.StatusNotAcceptable, CodeInvalidRequest, "Not Acceptable: Accept must include text/event-stream")
		return
	}
	// One read: the session, with the head of its GET stream log.
	ss := h.session(w, r, principal)
	if ss == nil {
		return
	}
	stream, after, resume := getStream, int64(0), false
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		var ok bool
		resume = true
		if stream, after, ok = parseEventID(last); !ok {
			httpError(w, http.StatusBadRequest, CodeInvalidRequest, "Bad Request: malformed Last-Event-ID "+clipText(last, 128))
			return
		}
		if stream != getStream && !h.checkResume(r.Context(), w, ss, stream, after) {
			return
		}
	}
	if !h.open.acquire(ss.ID(), h.srv.opts.Limits.MaxStreamsPerSession, 0) {
		tooMany(w, "too many streams open for this session")
		return
	}
	defer h.open.release(ss.ID())
	h.streams.Add(1)
	defer h.streams.Done()
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
			h.storeFailure(w, r, err, "opening GET stream", "session", ss.ID())
			return
		}
		h.srv.watcher.wake(ss.ID()) // a stream of this process it takes over ends at once
		mine = seq
		fresh, err := h.srv.store.GetSession(ctx, ss.ID())
		if err != nil {
			h.storeFailure(w, r, err, "opening GET stream", "session", ss.ID())
			return
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
			return
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
	h.pump(ctx, sse, ss, stream, after, mine, hold, idle)
}

// pump copies a stream's log to the client until the client leaves, the
// stream is taken over or finished, the session ends, or the stream must
// close (then with "retry:"): before a deadline, or, when hold >= 0, once
// hold has passed since the stream started (unless it starts idle) or
// last sent a message.
//
// A GET stream reads its log when it starts, when the watcher wakes it
// (the change feed names its session, or the registries changed: see
// watch.go) and once per idleCheck; each read is one GetSession (which
// reports the log's head), plus a ReadEvents only when there is
// something new; a registry change is noticed from this process's cached
// registry hashes. Without a watcher, and for a resumed POST stream, it
// polls every PollInterval instead.
func (h *StreamableHandler) pump(ctx context.Context, sse *sseWriter, ss *ServerSession, stream string, after, mine int64, hold time.Duration, idle bool) {
	store := h.srv.store
	var deadline <-chan time.Time
	if d, ok := h.streamDeadline(ctx); ok {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		deadline = t.C
	}
	// A GET stream registers with the watcher once it is about to wait
	// (an idle reconnection that ends after its one check never does),
	// and then reads once more: nothing between its last read and the
	// registration is missed.
	var wake <-chan struct{}
	sw, watching := &streamWatch{}, stream != getStream
	defer func() { sw.stop() }()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	lastWrite := time.Now()
	lastPoll := time.Now()
	active := time.Now() // when the stream last sent a message (or started)
	if idle {
		active = active.Add(-hold)
	}
	// Record what this stream wrote on every way out, even when the
	// client has gone (ctx is cancelled then).
	var written, marked int64
	mark := func() {
		if stream != getStream || written <= marked {
			return
		}
		if err := store.MarkDelivered(context.WithoutCancel(ctx), ss.ID(), written); err != nil {
			h.srv.log.WarnContext(ctx, "marking delivered", "session", ss.ID(), "err", err)
			return
		}
		marked = written
	}
	defer mark()
	first := true // the session state is fresh: serveGET just read it
	poll := true
	var retry readRetry
	for {
		if poll {
			var (
				evs []notify.Event
				err error
			)
			if stream == getStream {
				age := h.srv.opts.RegistryRefresh
				if first && idle {
					age = max(age, idleRegistryAge) // an idle reconnection's one check
				}
				evs, err = h.srv.pollGetLog(ctx, ss, after, first, age)
			} else {
				evs, err = store.ReadEvents(ctx, ss.ID(), stream, after, readBatch)
			}
			first = false
			lastPoll = time.Now()
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, notify.ErrNotFound) {
					return // the client left, or the session was deleted
				}
				h.srv.log.WarnContext(ctx, "reading stream log", "session", ss.ID(), "stream", stream, "err", err)
				retry.failed(h.srv.opts.PollInterval)
			} else {
				retry.succeeded()
			}
			if stream == getStream {
				for _, ev := range evs {
					if ev.Seq > mine && bytes.Equal(ev.Data, takeover) {
						// A newer GET stream took over. It delivers from what
						// this one recorded: write nothing more.
						return
					}
				}
			}
			for _, ev := range evs {
				after = ev.Seq
				if isControl(ev.Data) {
					continue
				}
				id := eventID(stream, ev.Seq)
				if stream == getStream && ev.Seq < mine {
					// Delivered before this stream's own takeover record:
					// tag the id, so that a stream resumed from it does not
					// yield to that record.
					id = getEventID(ev.Seq, mine, 0)
				}
				if sse.event(id, ev.Data) != nil {
					return
				}
				lastWrite = time.Now()
				active = lastWrite
				sw.busy(active.Add(hold))
				written = ev.Seq
				if stream != getStream && isResponse(ev.Data) {
					return // the request's stream is complete
				}
			}
			mark()
			if len(evs) == readBatch {
				continue
			}
			// Amortised: writes only when half the idle timeout has passed.
			h.srv.touch(ctx, ss)
		}
		if hold >= 0 && time.Since(active) >= hold {
			// Idle: end the stream; the client comes back after the retry
			// interval, from where the log was read (past any control
			// records), and its reconnection checks once.
			sse.prime(getEventID(after, mine, time.Now().UnixNano()), h.opts.RetryInterval)
			return
		}
		if time.Since(lastWrite) >= h.opts.KeepAlive {
			if sse.comment("keepalive") != nil {
				return
			}
			lastWrite = time.Now()
		}
		if !watching {
			watching = true
			sw = h.srv.watch(ctx, ss.ID(), hold < 0)
			wake = sw.wake
			sw.busy(active.Add(hold))
			if wake != nil {
				poll = true
				continue
			}
		}
		// Sleep until the next of: the keepalive, the end of the hold,
		// the next poll (without a watcher) or own check (with one).
		next := h.opts.KeepAlive - time.Since(lastWrite)
		if hold >= 0 {
			next = min(next, hold-time.Since(active))
		}
		if wake == nil {
			next = min(next, h.srv.opts.PollInterval)
		} else {
			next = min(next, h.srv.idleCheckEvery()-time.Since(lastPoll))
		}
		if d, ok := retry.wait(); ok {
			next = min(next, d)
		}
		timer.Reset(max(next, 0))
		select {
		case <-ctx.Done():
			return
		case <-h.closing:
			sse.retry(h.opts.RetryInterval)
			return
		case <-deadline:
			sse.retry(h.opts.RetryInterval)
			return
		case <-wake:
			poll = true
		case <-timer.C:
			poll = wake == nil || time.Since(lastPoll) >= h.srv.idleCheckEvery() || retry.due()
		}
	}
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

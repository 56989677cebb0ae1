package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// readBatch is how many log entries one poll reads.
const readBatch = 100

func (h *StreamableHandler) serveGET(w http.ResponseWriter, r *http.Request, principal string) {
	if !accepts(r, "text/event-stream") {
		httpError(w, http.StatusNotAcceptable, CodeInvalidRequest, "Not Acceptable: Accept must include text/event-stream")
		return
	}
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
	if stream == getStream {
		seq, _, err := h.srv.store.Append(ctx, ss.ID(), getStream, [][]byte{takeover}, nil)
		if err != nil {
			h.storeFailure(w, r, err, "opening GET stream", "session", ss.ID())
			return
		}
		mine = seq
		if !resume {
			// Where delivery stopped, read after our takeover record: a
			// stream that delivered up to here has recorded it, and one
			// still running stops at our record without writing more.
			fresh, err := h.srv.store.GetSession(ctx, ss.ID())
			if err != nil {
				h.storeFailure(w, r, err, "opening GET stream", "session", ss.ID())
				return
			}
			ss.state = fresh
			after = fresh.Delivered
		}
	}
	h.srv.touch(ctx, ss)
	sse := newSSEWriter(w)
	sse.start()
	if version(ss.ProtocolVersion()).primesStreams() {
		if sse.prime(eventID(stream, after), h.opts.RetryInterval) != nil {
			return
		}
	}
	h.pump(ctx, sse, ss, stream, after, mine)
}

// pump copies a stream's log to the client, polling for what other
// processes append, until the client leaves, the stream is taken over or
// finished, the session ends, or the stream must close before a deadline
// (then with "retry:").
func (h *StreamableHandler) pump(ctx context.Context, sse *sseWriter, ss *ServerSession, stream string, after, mine int64) {
	store := h.srv.store
	var deadline <-chan time.Time
	if d, ok := h.streamDeadline(ctx); ok {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		deadline = t.C
	}
	poll := time.NewTimer(0)
	defer poll.Stop()
	lastWrite := time.Now()
	lastCheck := time.Now()
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
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.closing:
			sse.retry(h.opts.RetryInterval)
			return
		case <-deadline:
			sse.retry(h.opts.RetryInterval)
			return
		case <-poll.C:
		}
		if stream == getStream {
			if err := h.srv.notifyChanges(ctx, ss); err != nil && ctx.Err() == nil {
				h.srv.log.WarnContext(ctx, "checking registry changes", "session", ss.ID(), "err", err)
			}
		}
		evs, err := store.ReadEvents(ctx, ss.ID(), stream, after, readBatch)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, notify.ErrNotFound) {
				return // the client left, or the session was deleted
			}
			h.srv.log.WarnContext(ctx, "reading stream log", "session", ss.ID(), "stream", stream, "err", err)
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
			if sse.event(eventID(stream, ev.Seq), ev.Data) != nil {
				return
			}
			lastWrite = time.Now()
			written = ev.Seq
			if stream != getStream && isResponse(ev.Data) {
				return // the request's stream is complete
			}
		}
		mark()
		if time.Since(lastWrite) >= h.opts.KeepAlive {
			if sse.comment("keepalive") != nil {
				return
			}
			lastWrite = time.Now()
		}
		if time.Since(lastCheck) >= 30*time.Second {
			// A deleted or expired session's stream ends; a live one that
			// only listens stays alive.
			fresh, err := store.GetSession(ctx, ss.ID())
			if errors.Is(err, notify.ErrNotFound) {
				return
			}
			if err == nil {
				ss.state = fresh
				h.srv.touch(ctx, ss)
			}
			lastCheck = time.Now()
		}
		if len(evs) == readBatch {
			poll.Reset(0)
		} else {
			poll.Reset(h.srv.opts.PollInterval)
		}
	}
}

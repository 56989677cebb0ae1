package mcp

import (
	"context"
	"errors"
	"net/http"

	"github.com/mcpush/mcpush/pkg/notify"
)

// logOpen appends streamOpen to the stream's log. Caller holds o.mu.
func (o *outStream) logOpen() {
	ctx := context.Background()
	if _, _, err := o.h.srv.store.Append(ctx, o.session.ID(), o.streamID, [][]byte{streamOpen}, nil); err != nil {
		if errors.Is(err, notify.ErrNotFound) {
			o.h.srv.local.cancelSession(o.session.ID()) // deleted: see emitLocked
			return
		}
		o.h.srv.log.WarnContext(ctx, "logging stream start", "session", o.session.ID(), "stream", o.streamID, "err", err)
	}
}

// checkResume reports whether a resume of a POST stream after seq can
// deliver anything: the stream must exist, after must be an event of it
// (0: its priming event) and not its last one, the response. Otherwise it
// answers 404 and reports false: a resume of an unknown stream, or past
// a finished one, must not poll forever. One store read.
func (h *StreamableHandler) checkResume(ctx context.Context, w http.ResponseWriter, ss *ServerSession, stream string, after int64) bool {
	from := max(after-1, 0)
	evs, err := h.srv.store.ReadEvents(ctx, ss.ID(), stream, from, 2)
	if err != nil {
		h.storeFailure(ctx, w, Era2025, nil, err, "reading stream log", "session", ss.ID())
		return false
	}
	ok := len(evs) > 0
	if ok && after > 0 {
		ok = evs[0].Seq == after && !isResponse(evs[0].Data)
	}
	if !ok {
		writeError(w, Era2025, nil, refuse(errNoStream, "Not Found: no stream to resume at this Last-Event-ID"))
	}
	return ok
}

package mcp

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// sessionQuotaRetry is the Retry-After of an initialize refused because
// its principal holds MaxSessionsPerPrincipal live sessions, none of them
// idle: none frees up until the client deletes one or one idles out.
const sessionQuotaRetry = time.Minute

// allowSession reports whether principal may create one more session:
// whether it holds fewer than MaxSessionsPerPrincipal live sessions, by
// one read of the store's per-principal index (notify.SessionCounter),
// shared by every process. At the limit, one idle session of the
// principal (notify.SessionReclaimer: one that holds nothing, no
// subscription, no stream, no pending message, as clients that never
// DELETE leave them), the least recently extended, is deleted to make
// room: abandoned sessions lock nobody out, while the bound still holds
// for sessions in use. A store without a counter, or a failed read, does
// not refuse (the failure is logged). When it refuses it has answered.
func (h *StreamableHandler) allowSession(ctx context.Context, w http.ResponseWriter, principal string) bool {
	sc, ok := h.srv.store.(notify.SessionCounter)
	if !ok {
		return true
	}
	limit := h.srv.opts.Limits.MaxSessionsPerPrincipal
	n, err := sc.CountSessions(ctx, principal, limit)
	if err != nil {
		h.srv.log.WarnContext(ctx, "counting the sessions of a principal", "err", err)
		return true
	}
	if n < limit || h.reclaimSession(ctx, principal) {
		return true
	}
	rateLimited(w, sessionQuotaRetry, "this principal has "+itoa(int64(limit))+
		" live sessions, the limit, and none is idle; end one with DELETE or let one expire")
	return false
}

// reclaimSession deletes principal's least recently extended idle
// session and reports whether it did (or another process did it first).
func (h *StreamableHandler) reclaimSession(ctx context.Context, principal string) bool {
	sr, ok := h.srv.store.(notify.SessionReclaimer)
	if !ok {
		return false
	}
	ids, err := sr.IdleSessions(ctx, principal, 1)
	if err != nil {
		if !errors.Is(err, errors.ErrUnsupported) {
			h.srv.log.WarnContext(ctx, "finding an idle session to reclaim", "err", err)
		}
		return false
	}
	if len(ids) == 0 {
		return false
	}
	if err := h.srv.store.DeleteSession(ctx, ids[0]); err != nil && !errors.Is(err, notify.ErrNotFound) {
		h.srv.log.WarnContext(ctx, "reclaiming an idle session", "session", ids[0], "err", err)
		return false
	}
	h.srv.log.InfoContext(ctx, "idle session reclaimed for a new one", "session", ids[0])
	return true
}

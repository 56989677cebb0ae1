package mcp

import (
	"context"
	"net/http"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// sessionQuotaRetry is the Retry-After of an initialize refused because
// its principal holds MaxSessionsPerPrincipal live sessions: none frees up
// until the client deletes one or one idles out.
const sessionQuotaRetry = time.Minute

// allowSession reports whether principal may create one more session:
// whether it holds fewer than MaxSessionsPerPrincipal live sessions, by
// one read of the store's per-principal index (notify.SessionCounter),
// shared by every process. A store without one, or a failed read, does
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
	if n < limit {
		return true
	}
	rateLimited(w, sessionQuotaRetry, "this principal has "+itoa(int64(limit))+
		" live sessions, the limit; end one with DELETE or let one expire")
	return false
}

package mcp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// activityGranularity is how precisely a session's expiry records its last
// request (touchRequest); reclaimIdle is how long a session must have
// served no request to be reclaimed for a new one of its principal.
const (
	activityGranularity = time.Minute
	reclaimIdle         = time.Minute
)

// sessionQuotaRetry is the Retry-After of an initialize refused because
// its principal holds MaxSessionsPerPrincipal live sessions, none of them
// idle: none frees up until the client deletes one or one idles out.
const sessionQuotaRetry = time.Minute

// allowSession reports whether principal may create one more session:
// whether it holds fewer than MaxSessionsPerPrincipal live sessions, by
// one read of the store's per-principal index (notify.SessionCounter),
// shared by every process. At the limit, one idle session of the
// principal, the least recently extended, is deleted to make room
// (reclaimSession): abandoned sessions lock nobody out, while the bound
// still holds for sessions in use. A failed read does not refuse (the
// failure is logged). When it refuses it has answered.
func (h *StreamableHandler) allowSession(ctx context.Context, w http.ResponseWriter, principal string) bool {
	sc := h.srv.store
	limit := h.srv.opts.Limits.MaxSessionsPerPrincipal
	n, err := sc.CountSessions(ctx, principal, limit)
	if err != nil {
		h.srv.log.WarnContext(ctx, "counting the sessions of a principal", "err", err)
		return true
	}
	if n < limit || h.reclaimSession(ctx, principal) {
		return true
	}
	writeError(w, Era2025, nil, rateLimited(sessionQuotaRetry, "this principal has "+itoa(int64(limit))+
		" live sessions, the limit, and none is idle; end one with DELETE or let one expire"))
	return false
}

// reclaimCandidates is how many idle sessions reclaimSession asks for: a
// request racing another one for the same idle session tries the next.
const reclaimCandidates = 3

// reclaimSession deletes principal's least recently extended idle session
// and reports whether it did. Idle is what notify.SessionReclaimer finds,
// a session that holds nothing (no subscription, no stream, no logged
// event, no pending message: a client that ever opened a GET stream,
// subscribed or had a response streamed keeps its session until it
// expires), and that served no request for reclaimIdle (its expiry, which
// touchRequest extends, is that far behind a whole timeout). A request
// takes no longer than SSEAfter without a logged stream, so no request in
// flight loses its session either. Only a deletion this call made counts:
// two requests racing for one idle session do not both get a place.
func (h *StreamableHandler) reclaimSession(ctx context.Context, principal string) bool {
	sr := h.srv.store
	idleBy := h.srv.opts.Now().Add(h.srv.opts.SessionIdleTimeout - activityGranularity - reclaimIdle)
	ids, err := sr.IdleSessions(ctx, principal, idleBy, reclaimCandidates)
	if err != nil {
		h.srv.log.WarnContext(ctx, "finding an idle session to reclaim", "err", err)
		return false
	}
	for _, id := range ids {
		err := h.srv.store.DeleteSession(ctx, id)
		if err == nil {
			h.srv.log.InfoContext(ctx, "idle session reclaimed for a new one", "session", id)
			return true
		}
		if !errors.Is(err, notify.ErrNotFound) {
			h.srv.log.WarnContext(ctx, "reclaiming an idle session", "session", id, "err", err)
			return false
		}
	}
	return false
}

// quotaPrincipal is the principal whose quotas a request of principal
// counts against, and that owns the sessions it creates: principal
// itself, or, for the anonymous principal "", the client's address
// ("addr:" and the host of r.RemoteAddr: the TCP peer locally, the source
// IP of the Function URL or HTTP API request in Lambda, which the
// adapters put there), so that the anonymous users of a public
// deployment each get the per-principal bounds rather than share them.
// Behind a proxy every client has the proxy's address.
func quotaPrincipal(r *http.Request, principal string) string {
	if principal != "" || r.RemoteAddr == "" {
		return principal
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr // a bare IP, as the Lambda adapters set it
	}
	return addressPrefix + host
}

// ownedBy reports whether principal may use a session of owner: its own,
// and for the anonymous principal also any session an anonymous client
// created, from whatever address (the session id is the secret, as for
// every anonymous session; a client whose address changes keeps its
// session).
func ownedBy(owner, principal string) bool {
	return owner == principal || principal == "" && strings.HasPrefix(owner, addressPrefix)
}

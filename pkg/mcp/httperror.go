package mcp

import (
	"context"
	"errors"
	"net/http"

	"github.com/mcpush/mcpush/pkg/notify"
)

// storeFailure answers a request whose store operation failed. It is the
// one place that maps store errors to HTTP: a missing (deleted, expired)
// session is 404 "Session not found", so the client starts a new one; an
// item too large is 413; any other failure (a throttled or unreachable
// store) is 503 with Retry-After and an error id, so the client retries the
// same session instead of abandoning it.
func (h *StreamableHandler) storeFailure(w http.ResponseWriter, r *http.Request, err error, op string, attrs ...any) {
	switch {
	case errors.Is(err, notify.ErrNotFound):
		httpError(w, http.StatusNotFound, CodeInvalidRequest, "Session not found")
	case errors.Is(err, notify.ErrTooLarge):
		httpError(w, http.StatusRequestEntityTooLarge, CodeInvalidRequest, "Request Entity Too Large: "+err.Error())
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client left; nobody reads an answer.
	default:
		e := h.srv.internalError(r.Context(), op, err, attrs...)
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write(encodeResponse(nil, nil, e))
	}
}

// authFailure answers a request the Authenticator refused: 403 for
// ErrInsufficientScope, 503 with Retry-After for ErrAuthUnavailable, 401
// otherwise, with the error's WWW-Authenticate challenge if it has one.
func authFailure(w http.ResponseWriter, err error) {
	var c Challenger
	if errors.As(err, &c) {
		if v := c.WWWAuthenticate(); v != "" {
			w.Header().Set("WWW-Authenticate", v)
		}
	}
	switch {
	case errors.Is(err, ErrInsufficientScope):
		httpError(w, http.StatusForbidden, CodeInvalidRequest, "Forbidden: "+err.Error())
	case errors.Is(err, ErrAuthUnavailable):
		w.Header().Set("Retry-After", "5")
		httpError(w, http.StatusServiceUnavailable, CodeInternalError, "Service Unavailable: "+err.Error())
	default:
		httpError(w, http.StatusUnauthorized, CodeInvalidRequest, "Unauthorized: "+err.Error())
	}
}

package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/mcpush/mcpush/pkg/notify"
)

// storeRetryAfter is the Retry-After, in seconds, of a 503 answered for a
// store that failed or was unavailable: SQLite waits out another
// process's write lock for its busy timeout before it gives up, and the
// AWS SDK has already retried a throttled or unreachable DynamoDB, so the
// next try may as well come soon.
const storeRetryAfter = 1

// storeFailure answers a request whose store operation failed. It is the
// one place that maps store errors to HTTP: a missing (deleted, expired)
// session is 404 "Session not found", so the client starts a new one; an
// item too large is 413; any other failure (a busy, throttled or
// unreachable store, notify.ErrUnavailable) is 503 with Retry-After and an
// error id, so the client retries the same session instead of abandoning
// it.
func (h *StreamableHandler) storeFailure(w http.ResponseWriter, r *http.Request, err error, op string, attrs ...any) {
	h.storeFailureID(r.Context(), w, nil, err, op, attrs...)
}

// storeFailureID is storeFailure answering the request of context ctx
// with JSON-RPC id id (nil: none).
func (h *StreamableHandler) storeFailureID(ctx context.Context, w http.ResponseWriter, id json.RawMessage, err error, op string, attrs ...any) {
	switch {
	case errors.Is(err, notify.ErrNotFound):
		writeJSON(w, http.StatusNotFound, encodeResponse(id, nil, &Error{Code: CodeInvalidRequest, Message: "Session not found"}))
	case errors.Is(err, notify.ErrTooLarge):
		writeJSON(w, http.StatusRequestEntityTooLarge, encodeResponse(id, nil, &Error{Code: CodeInvalidRequest, Message: "Request Entity Too Large: " + err.Error()}))
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		// The client left; nobody reads an answer.
	default:
		e := h.srv.internalError(ctx, op, err, attrs...)
		w.Header().Set("Retry-After", strconv.Itoa(storeRetryAfter))
		writeJSON(w, http.StatusServiceUnavailable, encodeResponse(id, nil, e))
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

// unavailableError is the JSON-RPC error of a request that failed because
// the store was unavailable (notify.ErrUnavailable), logged under id: an
// internal error whose data carries "retryAfter", which makes a plain JSON
// answer 503 with Retry-After (responseStatus).
func unavailableError(id string) *Error {
	data, _ := json.Marshal(map[string]any{"errorId": id, "retryAfter": storeRetryAfter})
	return &Error{Code: CodeInternalError, Message: "Service Unavailable: the store is busy or unreachable; retry (id " + id + ")", Data: data}
}

// responseStatus is the HTTP status of a plain JSON response resp, by the
// error it carries, if any: 503, with Retry-After set on w, for an
// unavailableError; otherwise what httpStatus gives for the protocol era
// (era2026; a 2025-era response is 200).
func responseStatus(w http.ResponseWriter, resp []byte, era2026 bool) int {
	var m struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(resp, &m) != nil || m.Error == nil {
		return http.StatusOK
	}
	if m.Error.Code == CodeInternalError && len(m.Error.Data) > 0 {
		var d struct {
			RetryAfter int `json:"retryAfter"`
		}
		if json.Unmarshal(m.Error.Data, &d) == nil && d.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(d.RetryAfter))
			return http.StatusServiceUnavailable
		}
	}
	if era2026 {
		return httpStatus(m.Error)
	}
	return http.StatusOK
}

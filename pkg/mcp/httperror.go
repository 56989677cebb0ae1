package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/mcpush/mcpush/pkg/notify"
)

// storeRetryAfter is the Retry-After, in seconds, of a 503 answered for a
// store that failed or was unavailable: SQLite waits out another
// process's write lock for its busy timeout before it gives up, and the
// AWS SDK has already retried a throttled or unreachable DynamoDB, so the
// next try may as well come soon.
const storeRetryAfter = 1

// authRetryAfter is the Retry-After, in seconds, of a request refused
// with ErrAuthUnavailable.
const authRetryAfter = 5

// storeFailure answers the request of context ctx with JSON-RPC id id
// (nil: none), in era, whose store operation op failed with err, by the
// status errorStatus gives the store's error: a missing (deleted,
// expired) session is 404 "Session not found", so the client starts a
// new one; an item too large is 413; any other failure (a busy, throttled
// or unreachable store, notify.ErrUnavailable) is 503 with Retry-After
// and an error id, logged with err, so the client retries the same
// session instead of abandoning it. A client that left gets nothing.
func (h *StreamableHandler) storeFailure(ctx context.Context, w http.ResponseWriter, era Era, id json.RawMessage, err error, op string, attrs ...any) {
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return // the client left; nobody reads an answer
	}
	f := &refusal{kind: err}
	switch status, _ := errorStatus(era, f); status {
	case http.StatusNotFound:
		f.msg = "Session not found"
	case http.StatusRequestEntityTooLarge:
		f.msg = "Request Entity Too Large: " + err.Error()
	default:
		e := h.srv.internalError(ctx, op, err, attrs...)
		f.msg, f.data, f.retryAfter = e.Message, e.Data, storeRetryAfter
	}
	writeError(w, era, id, f)
}

// authFailure answers a request the Authenticator refused with err, by
// the status errorStatus gives it (403 for ErrInsufficientScope, 503 with
// Retry-After for ErrAuthUnavailable, 401 otherwise), with the error's
// WWW-Authenticate challenge if it has one.
func authFailure(w http.ResponseWriter, era Era, err error) {
	var c Challenger
	if errors.As(err, &c) {
		if v := c.WWWAuthenticate(); v != "" {
			w.Header().Set("WWW-Authenticate", v)
		}
	}
	f := &refusal{kind: ErrUnauthorized, cause: err}
	status, _ := errorStatus(era, f)
	f.msg = http.StatusText(status) + ": " + err.Error()
	if status == http.StatusServiceUnavailable {
		f.retryAfter = authRetryAfter
	}
	writeError(w, era, nil, f)
}

// unavailableError is the JSON-RPC error of a request that failed because
// the store was unavailable (notify.ErrUnavailable), logged under id: an
// internal error whose data carries "retryAfter" (storeRetryAfter, which
// a plain JSON answer also sends as Retry-After with its 503).
func unavailableError(id string) *Error {
	data, _ := json.Marshal(map[string]any{"errorId": id, "retryAfter": storeRetryAfter})
	return &Error{Code: CodeInternalError, Message: "Service Unavailable: the store is busy or unreachable; retry (id " + id + ")", Data: data}
}

// requestFailure is the answer to a request whose handler failed with
// err, which is not a *Error: err is logged under an error id (with msg
// and attrs) and the client gets an internal error naming the id, in the
// response; for a store that was unavailable it gets a refusal (503 with
// Retry-After where the answer is plain JSON), which it retries.
func (s *Server) requestFailure(ctx context.Context, msg string, err error, attrs ...any) failure {
	e := s.internalError(ctx, msg, err, attrs...)
	if errors.Is(err, notify.ErrUnavailable) {
		return &refusal{kind: notify.ErrUnavailable, msg: e.Message, data: e.Data, retryAfter: storeRetryAfter}
	}
	return e
}

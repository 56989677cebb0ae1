package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/mcpush/mcpush/pkg/notify"
)

// internalError logs err (with msg and attrs) under a new error id and
// returns the JSON-RPC error the client gets instead: CodeInternalError
// with the id, never err's text, which may name tables, files or AWS
// request details; for a store that was unavailable (notify.ErrUnavailable)
// an unavailableError, which the client should retry. The id ("errorId" in the log record and in the error's
// data) lets an operator find the record from what a user reports.
func (s *Server) internalError(ctx context.Context, msg string, err error, attrs ...any) *Error {
	id := newErrorID()
	s.log.ErrorContext(ctx, msg, append(attrs, "err", err, "errorId", id)...)
	if errors.Is(err, notify.ErrUnavailable) {
		return unavailableError(id)
	}
	data, _ := json.Marshal(map[string]string{"errorId": id})
	return &Error{Code: CodeInternalError, Message: "internal error (id " + id + ")", Data: data}
}

// newErrorID returns 8 random bytes in hex.
func newErrorID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// InternalError marks err as a failure of the server (a store or network
// error), not of the tool's input. A tool handler that returns it gets a
// JSON-RPC internal error that carries only an error id, logged with err,
// instead of an isError result with err's text. Nil stays nil.
func InternalError(err error) error {
	if err == nil {
		return nil
	}
	return &internalErr{err}
}

type internalErr struct{ err error }

func (e *internalErr) Error() string { return e.err.Error() }
func (e *internalErr) Unwrap() error { return e.err }

// isInternal reports whether err was marked with InternalError.
func isInternal(err error) bool {
	var ie *internalErr
	return errors.As(err, &ie)
}

package mcp

import "errors"

// Errors an Authenticator returns (wrapped) to choose the HTTP answer; see
// StreamableHandler.authFailure in httperror.go. Any other error is 401.
var (
	// ErrUnauthorized: no credentials, or credentials that do not
	// verify. 401.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrInsufficientScope: valid credentials without a permission the
	// server requires. 403.
	ErrInsufficientScope = errors.New("insufficient scope")
	// ErrAuthUnavailable: the credentials cannot be checked now (the
	// authorization server's keys or metadata cannot be fetched). 503
	// with Retry-After: the client retries with the same credentials.
	ErrAuthUnavailable = errors.New("authorization temporarily unavailable")
)

// Challenger is implemented by Authenticator errors that carry a
// WWW-Authenticate challenge (RFC 9110 §11.6.1), such as an OAuth bearer
// token challenge; it is sent with the 401 or 403.
type Challenger interface {
	WWWAuthenticate() string
}

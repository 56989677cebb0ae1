package oauth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// ErrConfig is wrapped by the errors of New for bad Options.
var ErrConfig = errors.New("oauth: bad configuration")

// errInvalidDocument is wrapped by the errors of a metadata or JWKS
// document that cannot be used.
var errInvalidDocument = errors.New("invalid document")

// errUnavailable is wrapped (with mcp.ErrAuthUnavailable) by failures to
// fetch the authorization server's metadata or keys.
var errUnavailable = fmt.Errorf("%w: the authorization server's metadata or keys cannot be fetched", mcp.ErrAuthUnavailable)

// Error is a refused request: it wraps mcp.ErrUnauthorized,
// mcp.ErrInsufficientScope or mcp.ErrAuthUnavailable and carries the
// WWW-Authenticate challenge (RFC 6750 §3, RFC 9728 §5.1) of the answer.
type Error struct {
	// Code is the RFC 6750 error code: "" (no token was sent),
	// "invalid_request", "invalid_token" or "insufficient_scope".
	Code string
	// Description says what was wrong, for people.
	Description string
	kind        error
	challenge   string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Code == "" {
		return e.Description
	}
	return e.Code + ": " + e.Description
}

// Unwrap returns the mcp sentinel that chooses the HTTP status.
func (e *Error) Unwrap() error { return e.kind }

// WWWAuthenticate implements mcp.Challenger.
func (e *Error) WWWAuthenticate() string { return e.challenge }

// challenge builds a Bearer challenge with the given parameters, skipping
// empty values.
func challenge(params ...string) string {
	var b strings.Builder
	b.WriteString("Bearer")
	sep := " "
	for i := 0; i+1 < len(params); i += 2 {
		if params[i+1] == "" {
			continue
		}
		b.WriteString(sep + params[i] + `="` + quote(params[i+1]) + `"`)
		sep = ", "
	}
	return b.String()
}

// maxDescriptionBytes bounds an error description: it can quote what the
// token said (a key id, an audience).
const maxDescriptionBytes = 256

// describe is err's text, at most maxDescriptionBytes long.
func describe(err error) string {
	s := err.Error()
	if len(s) > maxDescriptionBytes {
		s = strings.ToValidUTF8(s[:maxDescriptionBytes-3], "") + "..."
	}
	return s
}

// quote makes s safe inside a quoted-string: no quotes, backslashes or
// control characters (error_description allows only %x20-21 / %x23-5B /
// %x5D-7E, RFC 6750 §3).
func quote(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '\''
		}
		return r
	}, s)
}

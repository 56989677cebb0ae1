package mcp

import (
	"context"
	"net/http"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Challenger is implemented by Authenticator errors that carry a
// WWW-Authenticate challenge (RFC 9110 §11.6.1), such as an OAuth bearer
// token challenge; it is sent with the 401 or 403.
type Challenger interface {
	WWWAuthenticate() string
}

// ExpiringAuthenticator is implemented by Authenticators whose
// credentials expire, such as an OAuth bearer token (its "exp"). A held
// stream (a GET stream, a resumed POST stream, a listen stream) opened
// with them ends when they expire, as it does at a deadline: a GET or
// POST stream with "retry:", a listen stream parked, with the empty
// listen result. The client comes back
// with fresh credentials, which are checked again.
type ExpiringAuthenticator interface {
	Authenticator
	// AuthenticateUntil is Authenticate that also returns when the
	// credentials expire; the zero time is never.
	AuthenticateUntil(r *http.Request) (principal string, expires time.Time, err error)
}

// authenticate identifies r's principal with a, and returns r with the
// caller in its context (withIdentity: the principal, and the claims a
// ClaimsAuthenticator tells) and the credentials' expiry
// (credentialsExpiry) if a tells it.
func authenticate(a Authenticator, r *http.Request) (string, *http.Request, error) {
	var (
		p      string
		until  time.Time
		claims notify.Claims
		err    error
	)
	switch a := a.(type) {
	case ClaimsAuthenticator:
		p, until, claims, err = a.AuthenticateClaims(r)
	case ExpiringAuthenticator:
		p, until, err = a.AuthenticateUntil(r)
	default:
		p, err = a.Authenticate(r)
	}
	if err != nil {
		return p, r, err
	}
	ctx := withIdentity(r.Context(), p, claims)
	if !until.IsZero() {
		ctx = context.WithValue(ctx, credentialsKey{}, until)
	}
	return p, r.WithContext(ctx), nil
}

// credentialsKey is the context key of the request's credentials expiry.
type credentialsKey struct{}

// credentialsExpiry is when the credentials of ctx's request expire, if
// its Authenticator said so.
func credentialsExpiry(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(credentialsKey{}).(time.Time)
	return t, ok
}

package mcp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/oauth2"
)

// An Authorizer gets a client the OAuth token source it needs after the
// server refused a request (ClientOptions.Authorizer).
type Authorizer interface {
	// Authorize runs the discovery the challenge points to and a grant,
	// and returns the token source of the requests that follow.
	Authorize(ctx context.Context, c *AuthChallenge) (oauth2.TokenSource, error)
}

// AuthChallenge is a server's refusal of a request, from its
// WWW-Authenticate: Bearer header (RFC 6750 §3, RFC 9728 §5.1).
type AuthChallenge struct {
	// URL is the MCP endpoint that refused the request.
	URL string
	// Status is 401, or 403 for insufficient_scope.
	Status int
	// ResourceMetadata is the protected resource metadata URL
	// ("resource_metadata"), if the server sent one.
	ResourceMetadata string
	// Scope is the scope the server asks for ("scope").
	Scope string
	// Error is the RFC 6750 error code ("invalid_token",
	// "insufficient_scope"), if any.
	Error string
}

// ParseChallenge reads the Bearer challenge of a 401 or 403 response; nil
// if it has none.
func ParseChallenge(resp *http.Response) *AuthChallenge {
	for _, h := range resp.Header.Values("WWW-Authenticate") {
		scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			continue
		}
		c := &AuthChallenge{Status: resp.StatusCode}
		if resp.Request != nil {
			u := *resp.Request.URL
			u.RawQuery, u.Fragment = "", ""
			c.URL = u.String()
		}
		for k, v := range authParams(rest) {
			switch strings.ToLower(k) {
			case "resource_metadata":
				c.ResourceMetadata = v
			case "scope":
				c.Scope = v
			case "error":
				c.Error = v
			}
		}
		return c
	}
	return nil
}

// authParams parses auth-params: name=token or name="quoted string",
// comma-separated (RFC 9110 §11.2).
func authParams(s string) map[string]string {
	out := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; {
		name, rest, ok := strings.Cut(s, "=")
		if !ok {
			break
		}
		name = strings.TrimSpace(strings.TrimLeft(name, ", "))
		rest = strings.TrimLeft(rest, " ")
		var val string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				b.WriteByte(rest[i])
			}
			val, rest = b.String(), rest[min(i+1, len(rest)):]
		} else {
			val, rest, _ = strings.Cut(rest, ",")
			val = strings.TrimSpace(val)
		}
		out[name] = val
		_, rest, _ = strings.Cut(rest, ",")
		s = strings.TrimSpace(rest)
	}
	return out
}

// withAuth returns a copy of hc whose transport adds the bearer token of
// ts to every request and, on a 401 (or a 403 insufficient_scope) with a
// challenge, asks a for a new token source and sends the request again,
// once.
func withAuth(hc *http.Client, ts oauth2.TokenSource, a Authorizer) *http.Client {
	c := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = &authTransport{base: base, ts: ts, authorizer: a}
	return &c
}

// authTransport is the http.RoundTripper of withAuth. Safe for concurrent
// use: one authorization runs at a time, and requests refused meanwhile
// retry with its result.
type authTransport struct {
	base       http.RoundTripper
	authorizer Authorizer

	authMu sync.Mutex // serializes Authorize
	mu     sync.Mutex // guards ts and gen
	ts     oauth2.TokenSource
	gen    int // incremented with each new ts
}

func (t *authTransport) source() (oauth2.TokenSource, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ts, t.gen
}

// send sends a clone of req with ts's token.
func (t *authTransport) send(req *http.Request, ts oauth2.TokenSource) (*http.Response, error) {
	r := req.Clone(req.Context())
	if ts != nil {
		tok, err := ts.Token()
		if err != nil {
			return nil, fmt.Errorf("mcp: getting an OAuth token: %w", err)
		}
		tok.SetAuthHeader(r)
	}
	return t.base.RoundTrip(r)
}

// RoundTrip implements http.RoundTripper.
func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ts, gen := t.source()
	resp, err := t.send(req, ts)
	if err != nil || t.authorizer == nil {
		return resp, err
	}
	c := ParseChallenge(resp)
	if c == nil || !(resp.StatusCode == http.StatusUnauthorized || (resp.StatusCode == http.StatusForbidden && c.Error == "insufficient_scope")) {
		return resp, nil
	}
	if req.Body != nil && req.GetBody == nil {
		return resp, nil // the body cannot be sent again
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()

	t.authMu.Lock()
	ts, newGen := t.source()
	if newGen == gen { // nobody authorized since this request was sent
		var aerr error
		ts, aerr = t.authorizer.Authorize(req.Context(), c)
		if aerr != nil {
			t.authMu.Unlock()
			return nil, fmt.Errorf("mcp: authorizing with %s: %w", req.URL.Host, aerr)
		}
		t.mu.Lock()
		t.ts, t.gen = ts, t.gen+1
		t.mu.Unlock()
	}
	t.authMu.Unlock()

	retry := req.Clone(req.Context())
	if req.GetBody != nil {
		if retry.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	resp, err = t.send(retry, ts)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) && ParseChallenge(resp) != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %s", ErrUnauthorizedRetry, resp.Status)
	}
	return resp, err
}

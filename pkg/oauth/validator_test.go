package oauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpush/mcpush/internal/oauthtest"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/oauth"
)

const resource = "http://127.0.0.1:9/mcp"

func startAS(t *testing.T) *oauthtest.Server {
	t.Helper()
	return oauthtest.Start(t, &oauthtest.Options{
		Scopes: []string{"mcp:tools", "mcp:other"},
		Clients: []oauthtest.Client{
			{ID: "alice", Secret: "alice-secret", Scope: "mcp:tools mcp:other"},
			{ID: "carol", Secret: "carol-secret", Scope: "mcp:other"},
		},
	})
}

func newValidator(t *testing.T, as *oauthtest.Server, mod func(*oauth.Options)) *oauth.Validator {
	t.Helper()
	o := &oauth.Options{Issuer: as.Issuer, Resource: resource, Scopes: []string{"mcp:tools"}}
	if mod != nil {
		mod(o)
	}
	v, err := oauth.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestValidate: a token the real authorization server issues for the
// resource is valid and its principal is issuer#client; every kind of bad
// token is refused with mcp.ErrUnauthorized, and a valid one without the
// required scope with mcp.ErrInsufficientScope.
func TestValidate(t *testing.T) {
	as := startAS(t)
	v := newValidator(t, as, nil)
	ctx := context.Background()

	good := as.Token(t, "alice", "alice-secret", resource, "mcp:tools")
	c, err := v.Validate(ctx, good, "")
	if err != nil {
		t.Fatalf("valid token: %v", err)
	}
	if got, want := c.Principal(), as.Issuer+"#alice"; got != want {
		t.Errorf("principal = %q, want %q", got, want)
	}

	now := time.Now()
	claims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		m := jwt.MapClaims{"iss": as.Issuer, "sub": "mallory", "aud": resource, "scope": "mcp:tools",
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		if mod != nil {
			mod(m)
		}
		return m
	}
	minted := as.Mint(t, claims(nil))
	if _, err := v.Validate(ctx, minted, ""); err != nil {
		t.Fatalf("a token signed with the server's key: %v", err)
	}
	// Header and payload of a token signed with the server's key.
	parts := strings.Split(minted, ".")
	b64 := base64.RawURLEncoding.EncodeToString

	// An HMAC keyed with the server's public key (PEM and DER), the
	// classic algorithm confusion.
	der, _ := x509.MarshalPKIXPublicKey(as.PublicKey())
	hs := func(key []byte) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(nil))
		tok.Header["kid"] = as.KeyID()
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// A key the server never had, under a made-up kid and under the
	// server's kid.
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	foreign := func(kid string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims(nil))
		tok.Header["kid"] = kid
		s, _ := tok.SignedString(other)
		return s
	}

	// The bad tokens every resource server test uses, and more.
	bad := as.BadTokens(t, resource, "mcp:tools")
	bad = append(bad, []oauthtest.NamedToken{
		{Name: "issued in the future", Token: as.Mint(t, claims(func(m jwt.MapClaims) { m["iat"] = now.Add(5 * time.Minute).Unix() }))},
		{Name: "missing sub", Token: as.Mint(t, claims(func(m jwt.MapClaims) { delete(m, "sub") }))},
		{Name: "wrong audience (minted)", Token: as.Mint(t, claims(func(m jwt.MapClaims) { m["aud"] = "https://other.example/mcp" }))},
		{Name: "no audience", Token: as.Mint(t, claims(func(m jwt.MapClaims) { delete(m, "aud") }))},
		{Name: "issuer with a trailing slash", Token: as.Mint(t, claims(func(m jwt.MapClaims) { m["iss"] = as.Issuer + "/" }))},
		{Name: "alg none with the real signature", Token: b64([]byte(`{"alg":"none","kid":"`+as.KeyID()+`"}`)) + "." + parts[1] + "." + parts[2]},
		{Name: "HMAC with the public key as DER", Token: hs(der)},
		{Name: "foreign key under the server's kid", Token: foreign(as.KeyID())},
		{Name: "tampered payload", Token: parts[0] + "." + b64([]byte(`{"iss":"`+as.Issuer+`","sub":"root","aud":"`+resource+`","exp":9999999999}`)) + "." + parts[2]},
		{Name: "malformed three parts", Token: "a.b.c"},
		{Name: "too long", Token: strings.Repeat("a", oauth.MaxTokenBytes+1)},
	}...)
	for _, tc := range bad {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := v.Validate(ctx, tc.Token, "")
			if !errors.Is(err, mcp.ErrUnauthorized) {
				t.Errorf("err = %v, want ErrUnauthorized", err)
			}
		})
	}

	t.Run("insufficient scope", func(t *testing.T) {
		tok := as.Token(t, "carol", "carol-secret", resource, "mcp:other")
		if _, err := v.Validate(ctx, tok, ""); !errors.Is(err, mcp.ErrInsufficientScope) {
			t.Errorf("err = %v, want ErrInsufficientScope", err)
		}
	})
	t.Run("configured audience", func(t *testing.T) {
		v := newValidator(t, as, func(o *oauth.Options) { o.Audiences = []string{"api://mcpush"} })
		if _, err := v.Validate(ctx, as.Mint(t, claims(func(m jwt.MapClaims) { m["aud"] = []string{"x", "api://mcpush"} })), ""); err != nil {
			t.Errorf("aud with a configured audience: %v", err)
		}
	})
	// Cognito: access tokens have no aud but a client_id.
	t.Run("client id without audience", func(t *testing.T) {
		v := newValidator(t, as, func(o *oauth.Options) { o.ClientIDs = []string{"app1"} })
		noAud := func(client string) string {
			return as.Mint(t, claims(func(m jwt.MapClaims) { delete(m, "aud"); m["client_id"] = client; m["token_use"] = "access" }))
		}
		if _, err := v.Validate(ctx, noAud("app1"), ""); err != nil {
			t.Errorf("listed client: %v", err)
		}
		idToken := as.Mint(t, claims(func(m jwt.MapClaims) { delete(m, "aud"); m["client_id"] = "app1"; m["token_use"] = "id" }))
		if _, err := v.Validate(ctx, idToken, ""); !errors.Is(err, mcp.ErrUnauthorized) {
			t.Errorf("Cognito ID token: %v, want ErrUnauthorized", err)
		}
		if _, err := v.Validate(ctx, noAud("app2"), ""); !errors.Is(err, mcp.ErrUnauthorized) {
			t.Errorf("unlisted client: %v, want ErrUnauthorized", err)
		}
		if _, err := v.Validate(ctx, as.Mint(t, claims(func(m jwt.MapClaims) { m["aud"] = "other"; m["client_id"] = "app1" })), ""); !errors.Is(err, mcp.ErrUnauthorized) {
			t.Errorf("listed client, wrong aud: %v, want ErrUnauthorized", err)
		}
	})
}

// TestRotation: after the server rotates its key, a token signed with the
// new key is accepted at once (its unknown kid fetches the JWKS again),
// and tokens of the old key still are while the JWKS holds it.
func TestRotation(t *testing.T) {
	as := startAS(t)
	v := newValidator(t, as, func(o *oauth.Options) { o.RefreshInterval = time.Millisecond })
	ctx := context.Background()
	old := as.Token(t, "alice", "alice-secret", resource, "mcp:tools")
	if _, err := v.Validate(ctx, old, ""); err != nil {
		t.Fatal(err)
	}
	kid := as.Rotate(t)
	time.Sleep(2 * time.Millisecond)
	tok := as.Token(t, "alice", "alice-secret", resource, "mcp:tools")
	if h, _, _ := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{}); h.Header["kid"] != kid {
		t.Fatalf("the server signs with %v, want the new key %s", h.Header["kid"], kid)
	}
	if _, err := v.Validate(ctx, tok, ""); err != nil {
		t.Errorf("token of the new key: %v", err)
	}
	if _, err := v.Validate(ctx, old, ""); err != nil {
		t.Errorf("token of the old key: %v", err)
	}
	if n := as.JWKSFetches(t); n != 2 {
		t.Errorf("JWKS fetched %d times, want 2 (first use, new kid)", n)
	}
}

// TestUnknownKidFlood: a flood of tokens with made-up kids, sent
// concurrently for a second, costs at most one JWKS fetch per refresh
// interval (counted at the authorization server), and still refetches
// (so rotation works).
func TestUnknownKidFlood(t *testing.T) {
	as := startAS(t)
	const interval = 100 * time.Millisecond
	v := newValidator(t, as, func(o *oauth.Options) { o.RefreshInterval = interval })
	ctx := context.Background()
	if _, err := v.Validate(ctx, as.Token(t, "alice", "alice-secret", resource, "mcp:tools"), ""); err != nil {
		t.Fatal(err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	start := time.Now()
	var wg sync.WaitGroup
	var sent, refused atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < time.Second {
				tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": as.Issuer, "sub": "x", "aud": resource, "exp": time.Now().Add(time.Hour).Unix()})
				tok.Header["kid"] = rand.Text()
				s, _ := tok.SignedString(other)
				sent.Add(1)
				if _, err := v.Validate(ctx, s, ""); errors.Is(err, mcp.ErrUnauthorized) {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	fetches := as.JWKSFetches(t)
	bound := 1 + 1 + int(elapsed/interval) // the first use, then one per interval begun
	t.Logf("%d tokens with unknown kids in %v: %d JWKS fetches (bound %d)", sent.Load(), elapsed, fetches, bound)
	if refused.Load() != sent.Load() {
		t.Errorf("%d of %d refused, want all", refused.Load(), sent.Load())
	}
	if fetches > bound {
		t.Errorf("%d JWKS fetches in %v, want at most %d", fetches, elapsed, bound)
	}
	if fetches < 3 {
		t.Errorf("%d JWKS fetches in %v: unknown kids should refetch once per interval", fetches, elapsed)
	}
}

// TestUnavailable: when the authorization server cannot be reached the
// error is mcp.ErrAuthUnavailable (503), not 401, and failed discoveries
// are retried at most once per refresh interval.
func TestUnavailable(t *testing.T) {
	var hits int
	var mu sync.Mutex
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer down.Close()
	v, err := oauth.New(&oauth.Options{Issuer: down.URL, Resource: resource, RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": down.URL, "sub": "x", "aud": resource, "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "k"
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	s, _ := tok.SignedString(key)
	for range 5 {
		if _, err := v.Validate(context.Background(), s, ""); !errors.Is(err, mcp.ErrAuthUnavailable) {
			t.Fatalf("err = %v, want ErrAuthUnavailable", err)
		}
	}
	if hits != 1 {
		t.Errorf("%d metadata requests for 5 tokens, want 1", hits)
	}
}

// TestNewRefuses: options that would leave the server open or talking
// plain HTTP to a remote issuer are errors.
func TestNewRefuses(t *testing.T) {
	for _, o := range []oauth.Options{
		{},
		{Issuer: "http://as.example.com"},
		{Issuer: "ftp://as.example.com"},
		{Issuer: "https://as.example.com#frag"},
		{Issuer: "https://as.example.com?q=1"},
		{Issuer: "https://as.example.com", Resource: "http://mcp.example.com/mcp"},
		{Issuer: "https://as.example.com", Resource: "/mcp"},
	} {
		if _, err := oauth.New(&o); !errors.Is(err, oauth.ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", o, err)
		}
	}
	for _, o := range []oauth.Options{
		{Issuer: "http://127.0.0.1:8000", Resource: "http://localhost:8080/mcp"},
		{Issuer: "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_abc", Resource: "https://x.lambda-url.us-east-1.on.aws/mcp"},
	} {
		if _, err := oauth.New(&o); err != nil {
			t.Errorf("New(%+v) = %v", o, err)
		}
	}
}

// TestChallengeBounded: a token whose key id is long and full of quotes
// gets a challenge of bounded size, without them.
func TestChallengeBounded(t *testing.T) {
	as := startAS(t)
	v := newValidator(t, as, nil)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": as.Issuer, "sub": "x", "aud": resource, "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = strings.Repeat(`"a\`, 1000)
	s, _ := tok.SignedString(key)
	r := httptest.NewRequest("POST", resource, nil)
	r.Header.Set("Authorization", "Bearer "+s)
	_, err := v.Authenticate(r)
	var e *oauth.Error
	if !errors.As(err, &e) || e.Code != "invalid_token" || !strings.Contains(e.Description, "no key") {
		t.Fatalf("err = %v, want invalid_token for the unknown key", err)
	}
	h := e.WWWAuthenticate()
	if len(h) > 600 || strings.Count(h, `"`) != 8 || strings.Contains(h, `\`) {
		t.Errorf("challenge (%d bytes): %s", len(h), h)
	}
}

// TestTokenShape: a JWS with a "crit" header is refused (no critical
// extension is understood), and "exp", "nbf" and "iat" must be JSON
// numbers: a numeric string is refused. Against oauthtest.KeyServer, a
// real local authorization server; the same token with a numeric exp is
// valid.
func TestTokenShape(t *testing.T) {
	as := oauthtest.NewKeyServer(t)
	v, err := oauth.New(&oauth.Options{Issuer: as.Issuer, Resource: resource})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		m := jwt.MapClaims{"iss": as.Issuer, "sub": "mallory", "aud": resource, "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		if mod != nil {
			mod(m)
		}
		return m
	}
	ctx := context.Background()
	if _, err := v.Validate(ctx, as.Mint(t, claims(nil)), ""); err != nil {
		t.Fatalf("valid token: %v", err)
	}
	for _, tc := range []struct {
		name   string
		header map[string]any
		claims jwt.MapClaims
		want   string
	}{
		{"crit naming an extension", map[string]any{"crit": []string{"exp"}, "exp": now.Unix()}, claims(nil), "critical"},
		{"crit empty", map[string]any{"crit": []string{}}, claims(nil), "critical"},
		{"exp a numeric string", nil, claims(func(m jwt.MapClaims) { m["exp"] = strconv.FormatInt(now.Add(time.Hour).Unix(), 10) }), `"exp" is not a number`},
		{"nbf a numeric string", nil, claims(func(m jwt.MapClaims) { m["nbf"] = strconv.FormatInt(now.Unix(), 10) }), `"nbf" is not a number`},
		{"iat a numeric string", nil, claims(func(m jwt.MapClaims) { m["iat"] = strconv.FormatInt(now.Unix(), 10) }), `"iat" is not a number`},
		{"exp null", nil, claims(func(m jwt.MapClaims) { m["exp"] = nil }), `"exp" is not a number`},
		{"exp an object", nil, claims(func(m jwt.MapClaims) { m["exp"] = map[string]any{"n": 1} }), `"exp" is not a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Validate(ctx, as.MintHeader(t, tc.header, tc.claims), "")
			if !errors.Is(err, mcp.ErrUnauthorized) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrUnauthorized (%s)", err, tc.want)
			}
		})
	}
}

package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/google/go-cmp/cmp"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// asServer is an authorization server on a real HTTP server that serves
// its metadata at the well-known URLs in serve only, records every
// request path, and serves a JWKS with the given Cache-Control.
type asServer struct {
	*httptest.Server
	mu     sync.Mutex
	paths  []string
	serve  []string // well-known paths answered, with the issuer's path
	issuer string   // issuer in the metadata; default the server's URL + path
	path   string   // issuer path
	cache  string   // Cache-Control of the JWKS
}

func newASServer(t *testing.T, path string, serve ...string) *asServer {
	s := &asServer{path: path, serve: serve}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	j, err := jwkset.NewJWKFromKey(key.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "k1", ALG: jwkset.AlgES256}})
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{j.Marshal()}})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		if r.URL.Path == "/jwks" {
			if s.cache != "" {
				w.Header().Set("Cache-Control", s.cache)
			}
			w.Write(jwks)
			return
		}
		if !slices.Contains(s.serve, r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		iss := s.issuer
		if iss == "" {
			iss = s.URL + s.path
		}
		json.NewEncoder(w).Encode(ASMetadata{Issuer: iss, JWKSURI: s.URL + "/jwks"})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *asServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.paths)
}

// TestDiscover: RFC 8414 metadata with path insertion comes first, then
// OpenID discovery with path insertion, then with the path appended; the
// metadata's issuer must be the configured one exactly.
func TestDiscover(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		serve      []string
		want       []string
	}{
		{"RFC 8414", "", []string{"/.well-known/oauth-authorization-server"},
			[]string{"/.well-known/oauth-authorization-server"}},
		{"RFC 8414 with a path", "/tenant1", []string{"/.well-known/oauth-authorization-server/tenant1"},
			[]string{"/.well-known/oauth-authorization-server/tenant1"}},
		{"OpenID fallback", "", []string{"/.well-known/openid-configuration"},
			[]string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"}},
		{"OpenID appended (Cognito, Keycloak)", "/realms/mcp", []string{"/realms/mcp/.well-known/openid-configuration"},
			[]string{"/.well-known/oauth-authorization-server/realms/mcp", "/.well-known/openid-configuration/realms/mcp", "/realms/mcp/.well-known/openid-configuration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newASServer(t, tc.path, tc.serve...)
			meta, err := discover(context.Background(), s.Client(), s.URL+tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if meta.JWKSURI != s.URL+"/jwks" {
				t.Errorf("jwks_uri = %q", meta.JWKSURI)
			}
			if diff := cmp.Diff(tc.want, s.requests()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("issuer mismatch", func(t *testing.T) {
		s := newASServer(t, "", "/.well-known/oauth-authorization-server")
		s.issuer = "https://evil.example"
		if _, err := discover(context.Background(), s.Client(), s.URL); err == nil {
			t.Error("metadata for another issuer accepted")
		}
	})
	t.Run("nothing there", func(t *testing.T) {
		s := newASServer(t, "")
		if _, err := discover(context.Background(), s.Client(), s.URL); err == nil {
			t.Error("no metadata, no error")
		}
	})
}

// TestKeysCache: the JWKS is cached for its max-age and fetched again
// after it (the stale keys serving during the refresh); no-store means at
// most once per refresh interval; with the server gone, stale keys serve
// up to MaxStale past their expiry.
func TestKeysCache(t *testing.T) {
	s := newASServer(t, "", "/.well-known/oauth-authorization-server")
	clock := newTestClock()
	fetches := func() int {
		n := 0
		for _, p := range s.requests() {
			if p == "/jwks" {
				n++
			}
		}
		return n
	}
	s.cache = "public, max-age=600"
	k := newTestKeySet(s.URL, clock.Now)
	k.client = s.Client()
	ctx := context.Background()
	lookup := func(what string) {
		t.Helper()
		if _, found, err := k.lookup(ctx, "k1"); !found || err != nil {
			t.Fatalf("k1 %s: %v %v", what, found, err)
		}
		k.settle()
	}
	for range 3 {
		lookup("fresh")
	}
	clock.Advance(599 * time.Second)
	lookup("within max-age")
	if n := fetches(); n != 1 {
		t.Errorf("%d fetches within max-age, want 1", n)
	}
	clock.Advance(2 * time.Second)
	lookup("after max-age")
	if n := fetches(); n != 2 {
		t.Errorf("%d fetches after max-age, want 2", n)
	}
	s.cache = "no-store"
	clock.Advance(601 * time.Second)
	lookup("stale") // fetched, not cacheable: fresh for the interval
	lookup("within the interval")
	clock.Advance(5 * time.Second)
	lookup("after the interval")
	if n := fetches(); n != 4 {
		t.Errorf("%d fetches, want 4", n)
	}
	// A server that goes away: stale keys serve, no error.
	s.Close()
	clock.Advance(30 * time.Minute)
	lookup("stale with the server gone")
	// Past MaxStale: unavailable.
	clock.Advance(time.Hour)
	if _, _, err := k.lookup(ctx, "k1"); !errors.Is(err, mcp.ErrAuthUnavailable) {
		t.Errorf("past MaxStale, server gone: %v, want ErrAuthUnavailable", err)
	}
	// A key set that was never fetched: unavailable.
	k2 := newTestKeySet(s.URL, clock.Now)
	if _, _, err := k2.lookup(ctx, "k1"); !errors.Is(err, mcp.ErrAuthUnavailable) {
		t.Errorf("no keys, server gone: %v, want ErrAuthUnavailable", err)
	}
}

func TestCacheTTL(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		h    map[string]string
		want time.Duration
	}{
		{nil, defaultKeysTTL},
		{map[string]string{"Cache-Control": "max-age=60"}, time.Minute},
		{map[string]string{"Cache-Control": "public, max-age=3600, must-revalidate"}, time.Hour},
		{map[string]string{"Cache-Control": "max-age=1"}, 5 * time.Second}, // floor
		{map[string]string{"Cache-Control": "max-age=9999999"}, maxKeysTTL},
		{map[string]string{"Cache-Control": "no-cache"}, 5 * time.Second},
		{map[string]string{"Expires": now.Add(time.Hour).Format(http.TimeFormat)}, time.Hour},
		{map[string]string{"Expires": "0"}, 5 * time.Second},
	} {
		h := http.Header{}
		for k, v := range tc.h {
			h.Set(k, v)
		}
		if got := cacheTTL(h, now, 5*time.Second); got != tc.want {
			t.Errorf("cacheTTL(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestDiscoverClient: a client follows the challenge's resource_metadata,
// falls back to the well-known URLs, and refuses metadata for another
// resource than the endpoint (or a prefix of it on its origin).
func TestDiscoverClient(t *testing.T) {
	as := newASServer(t, "", "/.well-known/oauth-authorization-server")
	var prm ResourceMetadata
	var mu sync.Mutex
	var paths []string
	rs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		p := prm
		mu.Unlock()
		if r.URL.Path != WellKnownPath+"/mcp" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(p)
	}))
	defer rs.Close()
	set := func(resource string) {
		mu.Lock()
		prm = ResourceMetadata{Resource: resource, AuthorizationServers: []string{as.URL}}
		mu.Unlock()
	}
	ctx := context.Background()

	set(rs.URL + "/mcp")
	md, err := Discover(ctx, nil, &mcp.AuthChallenge{URL: rs.URL + "/mcp"})
	if err != nil || md.Server.Issuer != as.URL || md.Resource.Resource != rs.URL+"/mcp" {
		t.Fatalf("well-known discovery: %+v %v", md, err)
	}
	set(rs.URL) // a prefix of the endpoint covers it
	if _, err := Discover(ctx, nil, &mcp.AuthChallenge{URL: rs.URL + "/mcp", ResourceMetadata: rs.URL + WellKnownPath + "/mcp"}); err != nil {
		t.Errorf("resource covering the endpoint: %v", err)
	}
	for _, bad := range []string{"https://evil.example/mcp", rs.URL + "/other", rs.URL + "/mcpx"} {
		set(bad)
		if _, err := Discover(ctx, nil, &mcp.AuthChallenge{URL: rs.URL + "/mcp"}); err == nil {
			t.Errorf("metadata for %s accepted for %s/mcp", bad, rs.URL)
		}
	}
	// No server there: no metadata, an error.
	if _, err := Discover(ctx, nil, &mcp.AuthChallenge{URL: "http://127.0.0.1:1/mcp"}); err == nil {
		t.Error("discovery succeeded for a server that is not there")
	}
}

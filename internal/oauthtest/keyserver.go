package oauthtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// KeyServer is the smallest authorization server a resource server
// talks to, on a real local HTTP server: RFC 8414 metadata at
// /.well-known/oauth-authorization-server and a JWKS of one ES256 key at
// /jwks. It issues no tokens (Mint signs them); tests make its JWKS hang
// or fail, point its jwks_uri elsewhere (/redirect?to=URL answers 302 to
// URL), and count the fetches it serves. Safe for concurrent use.
type KeyServer struct {
	*httptest.Server
	// Issuer is the server's issuer identifier, its URL.
	Issuer string
	key    *ecdsa.PrivateKey
	jwks   []byte

	mu      sync.Mutex
	hang    chan struct{} // non-nil: JWKS requests wait for it to close
	status  int           // non-zero: the JWKS answers this status
	cache   string        // Cache-Control of the JWKS
	jwksURI string        // jwks_uri of the metadata; default Issuer + "/jwks"

	jwksFetches, metaFetches, inFlight, maxInFlight atomic.Int64
}

// KeyID is the key id of a KeyServer's signing key.
const KeyID = "ks1"

// NewKeyServer starts a KeyServer; it stops when t ends (any JWKS
// request still hanging is released first).
func NewKeyServer(t testing.TB) *KeyServer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	j, err := jwkset.NewJWKFromKey(key.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: KeyID, ALG: jwkset.AlgES256, USE: jwkset.UseSig}})
	if err != nil {
		t.Fatal(err)
	}
	s := &KeyServer{key: key, jwks: mustJSON(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{j.Marshal()}})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	s.Issuer = s.URL
	t.Cleanup(func() {
		s.Hang(false)
		s.Close()
	})
	return s
}

func (s *KeyServer) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		s.metaFetches.Add(1)
		s.mu.Lock()
		u := s.jwksURI
		s.mu.Unlock()
		if u == "" {
			u = s.Issuer + "/jwks"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"issuer": s.Issuer, "jwks_uri": u})
	case "/jwks":
		s.jwksFetches.Add(1)
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for m := s.maxInFlight.Load(); n > m && !s.maxInFlight.CompareAndSwap(m, n); m = s.maxInFlight.Load() {
		}
		s.mu.Lock()
		hang, status, cache := s.hang, s.status, s.cache
		s.mu.Unlock()
		if hang != nil {
			select {
			case <-hang:
			case <-r.Context().Done():
				return
			}
		}
		if status != 0 {
			http.Error(w, "upstream trouble at "+s.Issuer, status)
			return
		}
		if cache != "" {
			w.Header().Set("Cache-Control", cache)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(s.jwks)
	case "/redirect":
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	default:
		http.NotFound(w, r)
	}
}

// Hang makes JWKS requests wait (on) until Hang(false) releases them, or
// until their client leaves.
func (s *KeyServer) Hang(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case on && s.hang == nil:
		s.hang = make(chan struct{})
	case !on && s.hang != nil:
		close(s.hang)
		s.hang = nil
	}
}

// SetStatus makes the JWKS answer status (0: serve the keys).
func (s *KeyServer) SetStatus(status int) {
	s.mu.Lock()
	s.status = status
	s.mu.Unlock()
}

// SetCacheControl sets the Cache-Control header of the JWKS.
func (s *KeyServer) SetCacheControl(v string) {
	s.mu.Lock()
	s.cache = v
	s.mu.Unlock()
}

// SetJWKSURI sets the jwks_uri of the metadata ("": Issuer + "/jwks").
func (s *KeyServer) SetJWKSURI(u string) {
	s.mu.Lock()
	s.jwksURI = u
	s.mu.Unlock()
}

// JWKSFetches is the number of JWKS requests received.
func (s *KeyServer) JWKSFetches() int { return int(s.jwksFetches.Load()) }

// MetadataFetches is the number of metadata requests received.
func (s *KeyServer) MetadataFetches() int { return int(s.metaFetches.Load()) }

// MaxJWKSInFlight is the largest number of JWKS requests served at once.
func (s *KeyServer) MaxJWKSInFlight() int { return int(s.maxInFlight.Load()) }

// Mint signs claims with the server's key (ES256, kid KeyID).
func (s *KeyServer) Mint(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	return s.MintHeader(t, nil, claims)
}

// MintHeader is Mint with further JOSE header parameters.
func (s *KeyServer) MintHeader(t testing.TB, header map[string]any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = KeyID
	for k, v := range header {
		tok.Header[k] = v
	}
	str, err := tok.SignedString(s.key)
	if err != nil {
		t.Fatal(err)
	}
	return str
}

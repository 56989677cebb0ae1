package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
)

// Bounds on what the authorization server sends.
const (
	maxDocumentBytes = 1 << 20 // a metadata or JWKS document
	maxKeys          = 100     // keys kept from one JWKS
	defaultKeysTTL   = 5 * time.Minute
	maxKeysTTL       = 24 * time.Hour
)

// ASMetadata is the part of the authorization server metadata (RFC 8414,
// OpenID Connect Discovery) a Validator uses.
type ASMetadata struct {
	Issuer                string   `json:"issuer"`
	JWKSURI               string   `json:"jwks_uri"`
	AuthorizationEndpoint string   `json:"authorization_endpoint,omitempty"`
	TokenEndpoint         string   `json:"token_endpoint,omitempty"`
	ScopesSupported       []string `json:"scopes_supported,omitempty"`
}

// keySet is the authorization server's metadata and signing keys, fetched
// on first use and cached. Safe for concurrent use.
type keySet struct {
	issuer   string
	client   *http.Client
	now      func() time.Time
	interval time.Duration // minimum time between fetches
	log      *slog.Logger

	fetchMu sync.Mutex // serializes fetches; never held with mu

	mu        sync.RWMutex // guards the fields below
	meta      *ASMetadata
	keys      map[string]jwkset.JWK // by kid ("" for keys without one)
	expires   time.Time             // when keys go stale
	lastFetch time.Time             // last fetch attempt
	lastErr   error                 // error of the last attempt
}

// lookup returns the key for kid, fetching the keys when none are cached,
// when they are stale, or when kid is unknown and the last fetch is at
// least interval old. found is false for an unknown kid; err wraps
// errUnavailable when keys are needed and cannot be fetched.
func (k *keySet) lookup(ctx context.Context, kid string) (key jwkset.JWK, found bool, err error) {
	k.mu.RLock()
	key, found = k.keys[kid]
	fresh := k.keys != nil && k.now().Before(k.expires)
	k.mu.RUnlock()
	if found && fresh {
		return key, true, nil
	}
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	k.mu.RLock()
	key, found = k.keys[kid]
	have := k.keys != nil
	fresh = have && k.now().Before(k.expires)
	recent := !k.lastFetch.IsZero() && k.now().Sub(k.lastFetch) < k.interval
	lastErr := k.lastErr
	k.mu.RUnlock()
	switch {
	case found && fresh:
		return key, true, nil
	case recent && !have:
		return jwkset.JWK{}, false, lastErr
	case recent:
		return key, found, nil // stale keys serve until the next attempt
	}
	if err := k.fetch(ctx); err != nil {
		k.log.WarnContext(ctx, "oauth: fetching the authorization server's keys", "issuer", k.issuer, "err", err)
		k.mu.RLock()
		defer k.mu.RUnlock()
		if k.keys == nil {
			return jwkset.JWK{}, false, err
		}
		key, found = k.keys[kid]
		return key, found, nil
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	key, found = k.keys[kid]
	return key, found, nil
}

// all returns the cached keys (for a token without kid).
func (k *keySet) all() []jwkset.JWK {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]jwkset.JWK, 0, len(k.keys))
	for _, v := range k.keys {
		out = append(out, v)
	}
	return out
}

// fetch discovers the metadata (once) and fetches the JWKS. Called with
// fetchMu held.
func (k *keySet) fetch(ctx context.Context) (err error) {
	k.mu.Lock()
	k.lastFetch = k.now()
	meta := k.meta
	k.mu.Unlock()
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w: %v", errUnavailable, err)
		}
		k.mu.Lock()
		k.lastErr = err
		k.mu.Unlock()
	}()
	if meta == nil {
		if meta, err = discover(ctx, k.client, k.issuer); err != nil {
			return err
		}
		k.mu.Lock()
		k.meta = meta
		k.mu.Unlock()
	}
	body, header, err := get(ctx, k.client, meta.JWKSURI)
	if err != nil {
		return err
	}
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(body, &set); err != nil {
		return fmt.Errorf("JWKS %s: %w", meta.JWKSURI, err)
	}
	keys := make(map[string]jwkset.JWK)
	for _, m := range set.Keys {
		if len(keys) == maxKeys {
			break
		}
		if m.USE != "" && m.USE != jwkset.UseSig {
			continue
		}
		// Private: false: symmetric (oct) keys are never loaded, so no
		// token can be verified with an HMAC.
		j, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			continue // a key type or curve this package cannot use
		}
		keys[m.KID] = j
	}
	if len(keys) == 0 {
		return fmt.Errorf("JWKS %s: no usable signing keys", meta.JWKSURI)
	}
	k.mu.Lock()
	k.keys = keys
	k.expires = k.now().Add(cacheTTL(header, k.now(), k.interval))
	k.mu.Unlock()
	return nil
}

// cacheTTL is how long a response may be cached: its Cache-Control
// max-age (no-store and no-cache: not at all), else its Expires, else
// defaultKeysTTL; at least floor, at most maxKeysTTL.
func cacheTTL(h http.Header, now time.Time, floor time.Duration) time.Duration {
	ttl := defaultKeysTTL
	cc := strings.ToLower(h.Get("Cache-Control"))
	exp, expErr := http.ParseTime(h.Get("Expires"))
	switch {
	case strings.Contains(cc, "no-store") || strings.Contains(cc, "no-cache"):
		ttl = 0
	case strings.Contains(cc, "max-age="):
		for _, d := range strings.Split(cc, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(d), "max-age="); ok {
				if n, err := strconv.Atoi(v); err == nil && n >= 0 {
					ttl = time.Duration(n) * time.Second
				}
			}
		}
	case h.Get("Expires") != "":
		ttl = 0
		if expErr == nil {
			ttl = exp.Sub(now)
		}
	}
	return max(floor, min(ttl, maxKeysTTL))
}

// discover fetches the authorization server metadata of issuer: RFC 8414
// (path insertion), then OpenID Connect discovery with path insertion and
// with the path appended. The metadata's issuer must be issuer exactly.
func discover(ctx context.Context, client *http.Client, issuer string) (*ASMetadata, error) {
	meta, _, err := discoverRaw(ctx, client, issuer)
	return meta, err
}

// discoverRaw is discover that also returns the metadata document.
func discoverRaw(ctx context.Context, client *http.Client, issuer string) (*ASMetadata, []byte, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, nil, err
	}
	origin := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.Path, "/")
	var urls []string
	for _, c := range []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + "/.well-known/openid-configuration" + path,
		strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration",
	} {
		if !contains(urls, c) {
			urls = append(urls, c)
		}
	}
	var errs []error
	for _, m := range urls {
		body, _, err := get(ctx, client, m)
		if err != nil {
			errs = append(errs, err)
			var se *statusError
			if errors.As(err, &se) && se.code >= 400 && se.code < 500 {
				continue // not there: try the next well-known URL
			}
			return nil, nil, errors.Join(errs...)
		}
		var meta ASMetadata
		if err := json.Unmarshal(body, &meta); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m, err)
		}
		if meta.Issuer != issuer {
			return nil, nil, fmt.Errorf("%s: issuer %q, want %q", m, meta.Issuer, issuer)
		}
		if err := checkURL(meta.JWKSURI, "jwks_uri"); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m, err)
		}
		return &meta, body, nil
	}
	return nil, nil, errors.Join(errs...)
}

type statusError struct {
	url  string
	code int
}

func (e *statusError) Error() string { return fmt.Sprintf("GET %s: status %d", e.url, e.code) }

// get fetches a JSON document of at most maxDocumentBytes.
func get(ctx context.Context, client *http.Client, u string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, nil, &statusError{u, resp.StatusCode}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(body) > maxDocumentBytes {
		return nil, nil, fmt.Errorf("GET %s: larger than %d bytes", u, maxDocumentBytes)
	}
	return body, resp.Header, nil
}

// checkURL accepts an absolute https URL, or an http URL on a loopback
// host (a local authorization server during development and tests).
func checkURL(s, what string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%s %q is not an absolute URL", what, s)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && loopback(u.Hostname()):
	default:
		return fmt.Errorf("%s %q: want https (http only on a loopback host)", what, s)
	}
	if u.Fragment != "" {
		return fmt.Errorf("%s %q has a fragment", what, s)
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

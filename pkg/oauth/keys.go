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
//
// At most one fetch is in flight (single flight): it runs on a goroutine
// of its own, bounded by timeout and by nothing a request does, so a
// client that leaves never cancels it for the others. Requests that hold
// a usable key never wait for it: keys past their expiry keep serving
// (stale while revalidate) for up to maxStale while refreshes run or
// fail. A request without a usable key waits for the fetch in flight, at
// most wait and never past its own context. A fetch starts no sooner
// than interval after the previous one ended.
type keySet struct {
	issuer       string
	client       *http.Client
	now          func() time.Time
	interval     time.Duration // least time from a fetch's end to the next one's start
	timeout      time.Duration // bounds one fetch (metadata and JWKS)
	wait         time.Duration // bounds a request's wait for the fetch in flight
	maxStale     time.Duration // how long keys serve past their expiry
	metaInterval time.Duration // the metadata is read again after this
	log          *slog.Logger

	mu       sync.Mutex // guards the fields below; never held during I/O
	meta     *ASMetadata
	metaAt   time.Time             // when meta was fetched
	keys     map[string]jwkset.JWK // by kid ("" for keys without one)
	expires  time.Time             // when keys go stale
	lastEnd  time.Time             // end of the last fetch
	lastErr  error                 // error of the last fetch (wraps errUnavailable)
	inflight chan struct{}         // closed when the fetch in flight ends; nil if none
}

// lookup returns the key for kid. Fresh keys serve at once; stale keys
// (within maxStale) serve at once too while a refresh starts behind them.
// An unknown kid starts a fetch of the metadata and the keys (at most one
// per interval) and waits for it. found is false for a kid the keys do not
// have; err wraps errUnavailable when no usable keys could be had in time.
func (k *keySet) lookup(ctx context.Context, kid string) (key jwkset.JWK, found bool, err error) {
	k.mu.Lock()
	now := k.now()
	key, found = k.keys[kid]
	if found && now.Before(k.expires) {
		k.mu.Unlock()
		return key, true, nil
	}
	usable := k.usable(now)
	done := k.start(now, usable && !found)
	k.mu.Unlock()
	if found && usable {
		return key, true, nil
	}
	if done == nil { // backing off: what the last fetch left
		return k.result(kid, nil)
	}
	t := time.NewTimer(k.wait)
	defer t.Stop()
	select {
	case <-done:
		return k.result(kid, nil)
	case <-ctx.Done():
		return k.result(kid, fmt.Errorf("%w (%s)", errUnavailable, categoryWaitEnded))
	case <-t.C:
		return k.result(kid, fmt.Errorf("%w (%s)", errUnavailable, categoryTimeout))
	}
}

// usable reports whether the cached keys may serve at now: fetched, and
// at most maxStale past their expiry. Called with mu held.
func (k *keySet) usable(now time.Time) bool {
	return k.keys != nil && now.Before(k.expires.Add(k.maxStale))
}

// start returns the channel of the fetch in flight, starting one unless
// the last one ended less than interval ago (then it returns nil).
// refreshMeta makes a fetch it starts read the metadata again first.
// Called with mu held.
func (k *keySet) start(now time.Time, refreshMeta bool) chan struct{} {
	if k.inflight != nil {
		return k.inflight
	}
	if !k.lastEnd.IsZero() && now.Sub(k.lastEnd) < k.interval {
		return nil
	}
	done := make(chan struct{})
	k.inflight = done
	go k.fetch(done, refreshMeta)
	return done
}

// result is the key for kid from the usable keys; without usable keys,
// pending (the fetch has not ended) or the last fetch's error.
func (k *keySet) result(kid string, pending error) (jwkset.JWK, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.usable(k.now()) {
		if key, found := k.keys[kid]; found {
			return key, true, nil
		}
		if pending == nil {
			return jwkset.JWK{}, false, nil
		}
	}
	switch {
	case pending != nil:
		return jwkset.JWK{}, false, pending
	case k.lastErr != nil:
		return jwkset.JWK{}, false, k.lastErr
	}
	return jwkset.JWK{}, false, fmt.Errorf("%w (%s)", errUnavailable, categoryStale)
}

// all returns the usable keys (for a token without kid).
func (k *keySet) all() []jwkset.JWK {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.usable(k.now()) {
		return nil
	}
	out := make([]jwkset.JWK, 0, len(k.keys))
	for _, v := range k.keys {
		out = append(out, v)
	}
	return out
}

// fetch is the fetch in flight: it reads the metadata when there is none,
// when refreshMeta is set, or when it is metaInterval old, then the JWKS,
// all within timeout; it records the outcome and closes done.
func (k *keySet) fetch(done chan struct{}, refreshMeta bool) {
	ctx, cancel := context.WithTimeout(context.Background(), k.timeout)
	defer cancel()
	keys, ttl, err := k.fetchKeys(ctx, refreshMeta)
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	k.lastEnd = now
	k.inflight = nil
	if err != nil {
		k.lastErr = fmt.Errorf("%w (%s)", errUnavailable, category(err))
		k.log.Warn("oauth: fetching the authorization server's keys", "issuer", k.issuer, "err", err,
			"stale_keys_serving", k.usable(now))
	} else {
		k.keys, k.expires, k.lastErr = keys, now.Add(ttl), nil
	}
	close(done)
}

// fetchKeys reads the metadata if needed and the JWKS. A failed metadata
// refresh keeps the metadata fetched before (and leaves the JWKS half
// the time).
func (k *keySet) fetchKeys(ctx context.Context, refreshMeta bool) (map[string]jwkset.JWK, time.Duration, error) {
	k.mu.Lock()
	meta, metaAt := k.meta, k.metaAt
	k.mu.Unlock()
	if meta == nil || refreshMeta || k.now().Sub(metaAt) >= k.metaInterval {
		mctx, cancel := ctx, context.CancelFunc(func() {})
		if meta != nil {
			mctx, cancel = context.WithTimeout(ctx, k.timeout/2)
		}
		m, err := discover(mctx, k.client, k.issuer)
		cancel()
		switch {
		case err == nil:
			meta = m
			k.mu.Lock()
			k.meta, k.metaAt = m, k.now()
			k.mu.Unlock()
		case meta == nil:
			return nil, 0, err
		default:
			k.log.Warn("oauth: refreshing the authorization server's metadata; keeping the previous one",
				"issuer", k.issuer, "err", err, "fetched", metaAt)
		}
	}
	body, header, err := get(ctx, k.client, meta.JWKSURI)
	if err != nil {
		return nil, 0, err
	}
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, 0, fmt.Errorf("%w: JWKS %s: %v", errInvalidDocument, meta.JWKSURI, err)
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
		return nil, 0, fmt.Errorf("%w: JWKS %s: no usable signing keys", errInvalidDocument, meta.JWKSURI)
	}
	return keys, cacheTTL(header, k.now(), k.interval), nil
}

// The categories of a failed fetch, the only part of it a refused client
// is told (the URLs and upstream answers go to the log).
const (
	categoryTimeout   = "timed out"
	categoryWaitEnded = "the request ended while the keys were being fetched"
	categoryRedirect  = "redirect refused"
	categoryStatus    = "error status"
	categoryDocument  = "invalid document"
	categoryNetwork   = "unreachable"
	categoryStale     = "keys expired"
)

// redirectError is a redirect that was not followed.
type redirectError struct{ err error }

func (e *redirectError) Error() string { return "redirect refused: " + e.err.Error() }
func (e *redirectError) Unwrap() error { return e.err }

// category names the kind of a fetch failure.
func category(err error) string {
	var re *redirectError
	var se *statusError
	var ne net.Error
	switch {
	case errors.As(err, &re):
		return categoryRedirect
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return categoryTimeout
	case errors.As(err, &se):
		return categoryStatus
	case errors.Is(err, errInvalidDocument):
		return categoryDocument
	}
	return categoryNetwork
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
			return nil, nil, fmt.Errorf("%w: %s: %v", errInvalidDocument, m, err)
		}
		if meta.Issuer != issuer {
			return nil, nil, fmt.Errorf("%w: %s: issuer %q, want %q", errInvalidDocument, m, meta.Issuer, issuer)
		}
		if err := checkURL(meta.JWKSURI, "jwks_uri"); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %v", errInvalidDocument, m, err)
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
	resp, err := checkedRedirects(client).Do(req)
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
		return nil, nil, fmt.Errorf("%w: GET %s: larger than %d bytes", errInvalidDocument, u, maxDocumentBytes)
	}
	return body, resp.Header, nil
}

// maxRedirects bounds the redirects one metadata or JWKS fetch follows.
const maxRedirects = 3

// checkedRedirects is client with every redirect target checked as the
// first URL is (checkURL), and at most maxRedirects of them; the client's
// own CheckRedirect, if any, runs after.
func checkedRedirects(client *http.Client) *http.Client {
	c := *client
	own := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > maxRedirects {
			return &redirectError{fmt.Errorf("more than %d redirects", maxRedirects)}
		}
		if err := checkURL(req.URL.String(), "redirect target"); err != nil {
			return &redirectError{err}
		}
		if own != nil {
			return own(req, via)
		}
		return nil
	}
	return &c
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

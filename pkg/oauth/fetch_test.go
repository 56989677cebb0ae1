package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpush/mcpush/internal/oauthtest"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// testClock is a clock tests move by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *testClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// newTestKeySet is a keySet of issuer with the defaults of New, but a
// fetch timeout and wait short enough for tests.
func newTestKeySet(issuer string, clock func() time.Time) *keySet {
	return &keySet{issuer: issuer, client: &http.Client{Timeout: 10 * time.Second}, now: clock, interval: DefaultRefreshInterval,
		timeout: 2 * time.Second, wait: time.Second, maxStale: DefaultMaxStale, metaInterval: DefaultMetadataRefresh,
		log: discardLogger()}
}

// settle waits for the fetch in flight, if any, to end.
func (k *keySet) settle() {
	k.mu.Lock()
	done := k.inflight
	k.mu.Unlock()
	if done != nil {
		<-done
	}
}

// lookupAll runs n lookups of kid at once and returns their errors and
// the longest time one took.
func lookupAll(k *keySet, n int, kid string) (errs []error, longest time.Duration) {
	errs = make([]error, n)
	took := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			_, found, err := k.lookup(context.Background(), kid)
			if err == nil && !found {
				err = errors.New("not found")
			}
			errs[i], took[i] = err, time.Since(start)
		})
	}
	wg.Wait()
	for _, d := range took {
		longest = max(longest, d)
	}
	return errs, longest
}

// TestKeysSingleFlight: once the keys are stale and the authorization
// server hangs on its JWKS, 50 concurrent lookups are all served at once
// with the stale keys while exactly one fetch is in flight; with no keys
// ever fetched, all 50 get ErrAuthUnavailable within the wait bound, and
// still one fetch.
func TestKeysSingleFlight(t *testing.T) {
	t.Run("stale keys", func(t *testing.T) {
		as := oauthtest.NewKeyServer(t)
		clock := newTestClock()
		k := newTestKeySet(as.Issuer, clock.Now)
		if _, found, err := k.lookup(context.Background(), oauthtest.KeyID); !found || err != nil {
			t.Fatalf("first lookup: %v %v", found, err)
		}
		clock.Advance(10 * time.Minute) // past the default 5 min
		as.Hang(true)
		errs, longest := lookupAll(k, 50, oauthtest.KeyID)
		if err := errors.Join(errs...); err != nil {
			t.Errorf("stale keys did not serve: %v", err)
		}
		if longest > 500*time.Millisecond {
			t.Errorf("a lookup took %v with stale keys, want no wait", longest)
		}
		time.Sleep(200 * time.Millisecond) // let a second fetch show, if any
		if n := as.JWKSFetches(); n != 2 {
			t.Errorf("%d JWKS fetches, want 2 (the first, then one refresh)", n)
		}
		if n := as.MaxJWKSInFlight(); n != 1 {
			t.Errorf("%d JWKS fetches in flight at once, want 1", n)
		}
		as.Hang(false)
		k.settle()
	})
	t.Run("never fetched", func(t *testing.T) {
		as := oauthtest.NewKeyServer(t)
		as.Hang(true)
		k := newTestKeySet(as.Issuer, time.Now)
		errs, longest := lookupAll(k, 50, oauthtest.KeyID)
		for _, err := range errs {
			if !errors.Is(err, mcp.ErrAuthUnavailable) {
				t.Fatalf("err = %v, want ErrAuthUnavailable", err)
			}
		}
		if longest > k.wait+500*time.Millisecond {
			t.Errorf("a lookup took %v, want at most the wait (%v)", longest, k.wait)
		}
		if n := as.JWKSFetches(); n != 1 {
			t.Errorf("%d JWKS fetches, want 1", n)
		}
		k.settle() // the fetch times out on its own
		if _, _, err := k.lookup(context.Background(), oauthtest.KeyID); !errors.Is(err, mcp.ErrAuthUnavailable) || !strings.Contains(err.Error(), categoryTimeout) {
			t.Errorf("after the fetch timed out: %v, want ErrAuthUnavailable (%s)", err, categoryTimeout)
		}
	})
}

// TestKeysFetchOutlivesCancel: a request that leaves during the first
// fetch does not cancel it: the next request finds the keys it fetched,
// without a fetch of its own.
func TestKeysFetchOutlivesCancel(t *testing.T) {
	as := oauthtest.NewKeyServer(t)
	as.Hang(true)
	k := newTestKeySet(as.Issuer, time.Now)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := k.lookup(ctx, oauthtest.KeyID); !errors.Is(err, mcp.ErrAuthUnavailable) {
		t.Fatalf("lookup of a request that left: %v, want ErrAuthUnavailable", err)
	}
	as.Hang(false)
	k.settle()
	if _, found, err := k.lookup(context.Background(), oauthtest.KeyID); !found || err != nil {
		t.Errorf("after the first request left: %v %v, want the key", found, err)
	}
	if n := as.JWKSFetches(); n != 1 {
		t.Errorf("%d JWKS fetches, want 1", n)
	}
}

// TestKeysBackoffFromEnd: the refresh interval counts from a fetch's end:
// a failed fetch that took longer than the interval is not retried by the
// next request.
func TestKeysBackoffFromEnd(t *testing.T) {
	as := oauthtest.NewKeyServer(t)
	clock := newTestClock()
	k := newTestKeySet(as.Issuer, clock.Now)
	as.SetStatus(502)
	as.Hang(true)
	go func() {
		for as.JWKSFetches() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		clock.Advance(2 * k.interval) // the fetch takes twice the interval
		as.Hang(false)
	}()
	k.wait = 5 * time.Second
	_, _, err := k.lookup(context.Background(), oauthtest.KeyID)
	if !errors.Is(err, mcp.ErrAuthUnavailable) || !strings.Contains(err.Error(), categoryStatus) {
		t.Fatalf("err = %v, want ErrAuthUnavailable (%s)", err, categoryStatus)
	}
	if strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "502") {
		t.Errorf("the error shows the upstream: %v", err)
	}
	k.lookup(context.Background(), oauthtest.KeyID)
	k.settle()
	if n := as.JWKSFetches(); n != 1 {
		t.Errorf("%d JWKS fetches right after a slow failure, want 1", n)
	}
	clock.Advance(k.interval)
	as.SetStatus(0)
	if _, found, err := k.lookup(context.Background(), oauthtest.KeyID); !found || err != nil {
		t.Errorf("after the interval: %v %v", found, err)
	}
}

// TestKeysMaxStale: stale keys serve while the authorization server is
// down, for at most MaxStale past their expiry.
func TestKeysMaxStale(t *testing.T) {
	as := oauthtest.NewKeyServer(t)
	clock := newTestClock()
	k := newTestKeySet(as.Issuer, clock.Now)
	if _, found, err := k.lookup(context.Background(), oauthtest.KeyID); !found || err != nil {
		t.Fatalf("first lookup: %v %v", found, err)
	}
	as.SetStatus(503)
	clock.Advance(defaultKeysTTL + k.maxStale - time.Minute)
	if _, found, err := k.lookup(context.Background(), oauthtest.KeyID); !found || err != nil {
		t.Errorf("within MaxStale: %v %v, want the stale key", found, err)
	}
	k.settle()
	clock.Advance(2 * time.Minute)
	if _, _, err := k.lookup(context.Background(), oauthtest.KeyID); !errors.Is(err, mcp.ErrAuthUnavailable) {
		t.Errorf("past MaxStale: %v, want ErrAuthUnavailable", err)
	}
}

// TestMetadataRefresh: the metadata is read again at the first key fetch
// after MetadataRefresh, and at the fetch caused by an unknown key id; a
// failed refresh keeps the metadata read before.
func TestMetadataRefresh(t *testing.T) {
	as := oauthtest.NewKeyServer(t)
	clock := newTestClock()
	k := newTestKeySet(as.Issuer, clock.Now)
	ctx := context.Background()
	k.lookup(ctx, oauthtest.KeyID)
	clock.Advance(10 * time.Minute) // keys stale, metadata not
	k.lookup(ctx, oauthtest.KeyID)
	k.settle()
	if n := as.MetadataFetches(); n != 1 {
		t.Errorf("%d metadata fetches within MetadataRefresh, want 1", n)
	}
	clock.Advance(time.Hour)
	k.lookup(ctx, oauthtest.KeyID)
	k.settle()
	if n := as.MetadataFetches(); n != 2 {
		t.Errorf("%d metadata fetches after MetadataRefresh, want 2", n)
	}
	clock.Advance(time.Minute) // keys fresh; a kid they lack
	if _, found, err := k.lookup(ctx, "rotated"); found || err != nil {
		t.Errorf("unknown kid: %v %v, want not found", found, err)
	}
	if n := as.MetadataFetches(); n != 3 {
		t.Errorf("%d metadata fetches after an unknown kid, want 3", n)
	}
	// A moved JWKS is followed once the metadata says so.
	as.SetJWKSURI(as.Issuer + "/redirect?to=" + as.Issuer + "/jwks")
	clock.Advance(2 * time.Hour)
	before := as.JWKSFetches()
	if _, found, err := k.lookup(ctx, oauthtest.KeyID); !found || err != nil {
		t.Errorf("stale key during the refresh: %v %v", found, err)
	}
	k.settle()
	if n := as.JWKSFetches() - before; n != 1 {
		t.Errorf("%d JWKS fetches through the moved jwks_uri, want 1", n)
	}
}

// TestRedirectsChecked: a redirect of the JWKS (or of the metadata) to a
// plain-http host that is not loopback is refused before it is followed,
// and the 503's description names the category, not the URLs; a redirect
// to a loopback http URL is followed, as such a jwks_uri would be.
func TestRedirectsChecked(t *testing.T) {
	as := oauthtest.NewKeyServer(t)
	const evil = "http://192.0.2.1/jwks" // TEST-NET-1: never reached
	as.SetJWKSURI(as.Issuer + "/redirect?to=" + evil)
	v, err := New(&Options{Issuer: as.Issuer, Resource: "http://127.0.0.1:9/mcp", Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	tok := as.Mint(t, jwt.MapClaims{"iss": as.Issuer, "sub": "x", "aud": "http://127.0.0.1:9/mcp", "exp": time.Now().Add(time.Hour).Unix()})
	r := httptest.NewRequest("POST", "http://127.0.0.1:9/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	start := time.Now()
	_, err = v.Authenticate(r)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, mcp.ErrAuthUnavailable) {
		t.Fatalf("JWKS redirected to %s: %v, want ErrAuthUnavailable", evil, err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("refusing the redirect took %v: was it followed?", time.Since(start))
	}
	if !strings.Contains(e.Description, categoryRedirect) || strings.Contains(e.Description, "192.0.2.1") || strings.Contains(e.Description, "127.0.0.1") {
		t.Errorf("description %q, want the category %q and no URL", e.Description, categoryRedirect)
	}

	// Any fetch (the metadata's too): the target is checked.
	if _, _, err := get(context.Background(), http.DefaultClient, as.Issuer+"/redirect?to="+evil); category(err) != categoryRedirect {
		t.Errorf("redirected to %s: %v, want %s", evil, err, categoryRedirect)
	}
	if _, _, err := get(context.Background(), http.DefaultClient, as.Issuer+"/redirect?to=https://[::1]:1/x"); category(err) == categoryRedirect {
		t.Errorf("redirect to https refused: %v", err)
	}

	// To loopback http: followed.
	as.SetJWKSURI(as.Issuer + "/redirect?to=" + as.Issuer + "/jwks")
	v, _ = New(&Options{Issuer: as.Issuer, Resource: "http://127.0.0.1:9/mcp", Logger: discardLogger()})
	if _, err := v.Authenticate(r); err != nil {
		t.Errorf("JWKS redirected to loopback http: %v", err)
	}
}

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpush/mcpush/internal/oauthtest"
)

// TestOAuthOutage: an authorization server that hangs on its JWKS stalls
// no request for long. The server process runs with MCPUSH_AUTH=oauth
// against a real local authorization server (oauthtest.KeyServer) whose
// JWKS may be cached for the least time (no-store: the 5 s refresh
// interval). Once the keys went stale and the JWKS hangs, 50 concurrent
// valid requests are all answered 200 within 2 s with the stale keys,
// and the authorization server sees exactly one fetch in flight; when no
// keys were ever fetched, all 50 get 503 within 2 s (a body naming the
// kind of failure, no URL), again with one fetch. Either way the process
// exits within 5 s of SIGTERM while the fetch still hangs.
func TestOAuthOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the OAuth outage test (waits for the keys to go stale)")
	}
	bin := ServerBinary(t)
	start := func(t *testing.T, ks *oauthtest.KeyServer) (*Cluster, string) {
		env := append(SQLiteStore().Env(t), "MCPUSH_AUTH=oauth", "MCPUSH_OAUTH_ISSUER="+ks.Issuer, interopGORACE())
		c := StartCluster(t, 1, &ClusterOptions{Binary: bin, Env: env, ReadyPath: "/healthz", StopTimeout: 5 * time.Second})
		url := c.URL(0)
		return c, ks.Mint(t, jwt.MapClaims{"iss": ks.Issuer, "sub": "alice", "aud": url, "exp": time.Now().Add(time.Hour).Unix()})
	}
	// stop sends SIGTERM and fails the test unless the process exits
	// cleanly within the cluster's 5 s.
	stop := func(t *testing.T, c *Cluster) {
		t.Helper()
		begin := time.Now()
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		t.Logf("exited %v after SIGTERM", time.Since(begin).Round(time.Millisecond))
	}

	t.Run("stale keys", func(t *testing.T) {
		ks := oauthtest.NewKeyServer(t)
		ks.SetCacheControl("no-store")
		c, token := start(t, ks)
		if codes, _, _ := flood(c.URL(0), token, 1); codes[200] != 1 {
			t.Fatalf("first request: %v, want 200", codes)
		}
		codes, base, _ := flood(c.URL(0), token, 50)
		t.Logf("50 requests with fresh keys: %v, slowest %v", codes, base.Round(time.Millisecond))
		time.Sleep(6 * time.Second) // past the 5 s the keys may be cached
		ks.Hang(true)
		codes, longest, body := flood(c.URL(0), token, 50)
		t.Logf("50 requests against a hanging JWKS: %v, slowest %v", codes, longest.Round(time.Millisecond))
		if codes[200] != 50 {
			t.Errorf("statuses %v (one body: %s), want 50 × 200 with the stale keys", codes, body)
		}
		if longest > max(2*time.Second, base+time.Second) {
			t.Errorf("slowest answer %v, want within 2 s (or 1 s more than with fresh keys on a busy machine)", longest)
		}
		time.Sleep(200 * time.Millisecond) // a second fetch would show now
		if n, m := ks.JWKSFetches(), ks.MaxJWKSInFlight(); n != 2 || m != 1 {
			t.Errorf("%d JWKS fetches, at most %d at once; want 2 (the first, one refresh), 1", n, m)
		}
		stop(t, c)
	})

	t.Run("never fetched", func(t *testing.T) {
		ks := oauthtest.NewKeyServer(t)
		ks.Hang(true)
		c, token := start(t, ks)
		codes, longest, body := flood(c.URL(0), token, 50)
		t.Logf("50 requests, no keys, a hanging JWKS: %v, slowest %v; body %s", codes, longest.Round(time.Millisecond), body)
		if codes[503] != 50 {
			t.Errorf("statuses %v, want 50 × 503", codes)
		}
		if longest > 2*time.Second {
			t.Errorf("slowest answer %v, want within 2 s", longest)
		}
		if !strings.Contains(body, "timed out") || strings.Contains(body, "127.0.0.1") || strings.Contains(body, "http") {
			t.Errorf("503 body %s: want the kind of failure (timed out), no URL", body)
		}
		if n, m := ks.JWKSFetches(), ks.MaxJWKSInFlight(); n != 1 || m != 1 {
			t.Errorf("%d JWKS fetches, at most %d at once; want 1, 1", n, m)
		}
		stop(t, c)
	})
}

// flood sends n concurrent 2026-era tools/list requests with token and
// returns the count of each status (0: no answer within 10 s), the slowest
// answer's time and the body of one answer that was not 200. It closes
// its connections before it returns, as clients that went away have: a
// connection that never carried a request holds a server's Shutdown for
// 5 s (net/http counts it active until then).
func flood(url, token string, n int) (codes map[int]int, longest time.Duration, body string) {
	const req = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	codes = map[int]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			start := time.Now()
			code, b := 0, ""
			r, _ := http.NewRequest("POST", url, strings.NewReader(req))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			r.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			r.Header.Set("Mcp-Method", "tools/list")
			r.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(r)
			if err == nil {
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				code, b = resp.StatusCode, string(data)
			} else {
				b = fmt.Sprint(err)
			}
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			codes[code]++
			longest = max(longest, took)
			if code != 200 {
				body = b
			}
		})
	}
	wg.Wait()
	return codes, longest, body
}

package oauth_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/oauth"
)

// TestHeldStreamsEndAtTokenExpiry: a held stream opened with a bearer
// token ends when the token expires (the Validator is an
// mcp.ExpiringAuthenticator): a listen stream with the empty listen
// result (parked: the client listens again with a fresh token), a GET
// stream with "retry:". One opened with a token that outlives the test
// stays open. Before, both kept delivering after the token expired.
func TestHeldStreamsEndAtTokenExpiry(t *testing.T) {
	as := startAS(t)
	v := newValidator(t, as, func(o *oauth.Options) { o.Leeway = time.Second })
	st, err := sqlitestore.New(filepath.Join(t.TempDir(), "expiry.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "expiry", Version: "1"}, st, nil)
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{Authenticator: v, StreamHold: -1})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close(); st.Close() })

	token := func(life time.Duration) string {
		now := time.Now()
		return as.Mint(t, jwt.MapClaims{"iss": as.Issuer, "sub": "alice", "aud": resource, "scope": "mcp:tools",
			"iat": now.Unix(), "exp": now.Add(life).Unix()})
	}
	// open sends req with tok and returns a channel of the stream's
	// lines, closed when the server ends the response.
	open := func(method, body, tok string, hdr ...string) <-chan string {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, ts.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: HTTP %d", method, resp.StatusCode)
		}
		lines := make(chan string, 100)
		go func() {
			defer resp.Body.Close()
			defer close(lines)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		return lines
	}
	listen := func(tok, id string) <-chan string {
		return open(http.MethodPost, `{"jsonrpc":"2.0","id":"`+id+`","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			tok, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "subscriptions/listen")
	}
	getStream := func(tok string) <-chan string {
		req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		sid := resp.Header.Get("Mcp-Session-Id")
		if sid == "" {
			t.Fatalf("initialize: HTTP %d, no session", resp.StatusCode)
		}
		return open(http.MethodGet, "", tok, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25")
	}
	// ended waits for the end of the stream and returns its lines.
	ended := func(lines <-chan string, within time.Duration) ([]string, bool) {
		var got []string
		deadline := time.After(within)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					return got, true
				}
				got = append(got, l)
			case <-deadline:
				return got, false
			}
		}
	}

	start := time.Now()
	short := token(2 * time.Second) // accepted for 3 s: Leeway 1 s
	shortListen, shortGET := listen(short, "L1"), getStream(short)
	long := token(time.Hour)
	longListen, longGET := listen(long, "L2"), getStream(long)

	got, ok := ended(shortListen, 10*time.Second)
	if !ok {
		t.Fatalf("the listen stream with an expired token is still open after %v", time.Since(start))
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("the listen stream ended %v after it opened, before its token expired (3 s)", took)
	}
	if last := strings.Join(got, "\n"); !strings.Contains(last, `"id":"L1","result":`) {
		t.Errorf("the listen stream ended without the empty listen result:\n%s", last)
	}
	got, ok = ended(shortGET, 5*time.Second)
	if !ok {
		t.Fatalf("the GET stream with an expired token is still open after %v", time.Since(start))
	}
	if !strings.Contains(strings.Join(got, "\n"), "retry: ") {
		t.Errorf("the GET stream ended without retry:\n%s", strings.Join(got, "\n"))
	}
	if _, ok := ended(longListen, time.Second); ok {
		t.Error("the listen stream with a valid token ended")
	}
	if _, ok := ended(longGET, 100*time.Millisecond); ok {
		t.Error("the GET stream with a valid token ended")
	}
	// The client comes back with the expired token: refused.
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, ts.URL, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+short)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a request with the expired token: HTTP %d, want 401", resp.StatusCode)
	}
}

package mcp_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// TestSessionsPerPrincipal (finding 4): a principal holds at most
// MaxSessionsPerPrincipal live sessions over all processes sharing the
// store; one more initialize gets 429 with Retry-After, a message naming
// the limit, and stores nothing; after a DELETE a new one is allowed.
func TestSessionsPerPrincipal(t *testing.T) {
	const limit = 3
	c := newCluster(t, 2, func(o *mcp.ServerOptions) { o.Limits.MaxSessionsPerPrincipal = limit })
	st, err := sqlitestore.New(c.dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	live := func() int {
		t.Helper()
		n, err := st.CountSessions(t.Context(), "", 100)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var ids []string
	for i := range limit {
		ids = append(ids, initialize(t, c.urls[i%2], "2025-11-25"))
	}
	if n := live(); n != limit {
		t.Fatalf("%d live sessions after %d initialize, want %d", n, limit, limit)
	}
	const init = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, url := range c.urls {
		resp, b := rawCall{body: init}.do(t, url)
		var msg struct {
			Error *mcp.Error `json:"error"`
		}
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Fatalf("initialize over the limit: %v: %s", err, b)
		}
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" ||
			resp.Header.Get("Mcp-Session-Id") != "" || msg.Error == nil || !strings.Contains(msg.Error.Message, "3 live sessions") {
			t.Errorf("initialize over the limit: %d Retry-After %q session %q %s; want 429, Retry-After 60, no session, an error naming the limit",
				resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Mcp-Session-Id"), b)
		}
	}
	if n := live(); n != limit {
		t.Errorf("%d live sessions after refused initialize, want %d (nothing stored)", n, limit)
	}
	if resp, b := (rawCall{method: "DELETE", session: ids[0]}).do(t, c.urls[1]); resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, b)
	}
	if n := live(); n != limit-1 {
		t.Errorf("%d live sessions after DELETE, want %d", n, limit-1)
	}
	initialize(t, c.urls[0], "2025-11-25") // allowed again
	if resp, b := (rawCall{body: init}).do(t, c.urls[1]); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("initialize over the limit again: %d %s, want 429", resp.StatusCode, b)
	}

	// Another principal on the same store has its own count.
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, st, &mcp.ServerOptions{Limits: mcp.Limits{MaxSessionsPerPrincipal: limit}})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{Authenticator: headerAuth{}})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	for i := range limit + 1 {
		resp, b := rawCall{body: init, hdr: [][2]string{{"X-Principal", "bob"}}}.do(t, ts.URL)
		if want := map[bool]int{true: http.StatusOK, false: http.StatusTooManyRequests}[i < limit]; resp.StatusCode != want {
			t.Errorf("bob's initialize %d: %d %s, want %d", i+1, resp.StatusCode, b, want)
		}
	}
	if n, err := st.CountSessions(t.Context(), "bob", 100); err != nil || n != limit {
		t.Errorf("bob has %d live sessions (%v), want %d", n, err, limit)
	}
	if n := live(); n != limit {
		t.Errorf("the anonymous principal has %d live sessions, want %d", n, limit)
	}
}

// headerAuth takes the principal from the X-Principal header.
type headerAuth struct{}

func (headerAuth) Authenticate(r *http.Request) (string, error) {
	return r.Header.Get("X-Principal"), nil
}

// The quota needs a store that counts sessions: both stores do.
var _ notify.SessionCounter = (*sqlitestore.Store)(nil)

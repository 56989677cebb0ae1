package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// inUse subscribes session id to a resource: a session in use, which is
// never reclaimed for a new one.
func inUse(t *testing.T, url, id string, hdr ...[2]string) {
	t.Helper()
	resp, b := rawCall{session: id, hdr: hdr, body: `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"file:///a.txt"}}`}.do(t, url)
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"error"`) {
		t.Fatalf("subscribe: %d %s", resp.StatusCode, b)
	}
}

// TestSessionsPerPrincipal (finding 4): a principal holds at most
// MaxSessionsPerPrincipal live sessions in use over all processes sharing
// the store; one more initialize gets 429 with Retry-After, a message
// naming the limit, and stores nothing; after a DELETE a new one is
// allowed.
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
		n, err := st.CountSessions(t.Context(), "addr:127.0.0.1", 100)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var ids []string
	for i := range limit {
		ids = append(ids, initialize(t, c.urls[i%2], "2025-11-25"))
		inUse(t, c.urls[i%2], ids[i])
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
	inUse(t, c.urls[0], initialize(t, c.urls[0], "2025-11-25")) // allowed again
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
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			inUse(t, ts.URL, id, [2]string{"X-Principal", "bob"})
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

// TestAbandonedSessionsReclaimed (issue 19): 120 sessions that clients
// left behind without DELETE (initialized, one request each, one every 5
// s by the server's clock, as Inspector CLI runs leave them) do not lock
// their principal out at the default bound of 100: every initialize
// succeeds, the least recently extended idle session making room, and the
// principal never holds more than 100. A session that keeps serving
// requests is never reclaimed. The bound still holds for sessions in use:
// once 100 sessions hold a subscription, an open GET stream or recent
// requests, the next initialize gets 429 and stores nothing.
func TestAbandonedSessionsReclaimed(t *testing.T) {
	// The stores keep real time: the clock starts now and only goes ahead.
	clock := testutil.NewClock(time.Now())
	c := newCluster(t, 2, func(o *mcp.ServerOptions) { o.Now = clock.Now })
	st, err := sqlitestore.New(c.dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const principal = "addr:127.0.0.1" // an anonymous client's address
	live := func() int {
		t.Helper()
		n, err := st.CountSessions(t.Context(), principal, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	request := func(url, id string) {
		t.Helper()
		if resp, b := (rawCall{session: id, body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`}).do(t, url); resp.StatusCode != http.StatusOK {
			t.Fatalf("tools/list: %d %s", resp.StatusCode, b)
		}
	}
	limit := mcp.DefaultLimits.MaxSessionsPerPrincipal
	busy := initialize(t, c.urls[0], "2025-11-25")
	var abandoned []string
	for i := range limit + 20 {
		url := c.urls[i%2]
		id := initialize(t, url, "2025-11-25")
		request(url, id)
		abandoned = append(abandoned, id)
		request(c.urls[1-i%2], busy)
		clock.Advance(5 * time.Second)
	}
	if n := live(); n != limit {
		t.Errorf("%d live sessions after %d abandoned ones, want %d (the bound)", n, len(abandoned), limit)
	}
	// The oldest went first: the busy one and the newest 99 remain.
	for i, id := range abandoned {
		_, err := st.GetSession(t.Context(), id)
		if gone := errors.Is(err, notify.ErrNotFound); gone != (i < 21) {
			t.Errorf("abandoned session %d: GetSession = %v; want gone only for the 21 oldest", i, err)
		}
	}
	if _, err := st.GetSession(t.Context(), busy); err != nil {
		t.Errorf("the session in use was reclaimed: %v", err)
	}

	// Sessions in use: 5 with an open GET stream, the others subscribed,
	// beside the busy one.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for i := range limit - 1 {
		url := c.urls[i%2]
		id := initialize(t, url, "2025-11-25")
		if i < 5 {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET stream: %v %v", resp, err)
			}
			defer resp.Body.Close()
		} else {
			inUse(t, url, id)
		}
		request(url, busy)
		clock.Advance(5 * time.Second)
	}
	if n := live(); n != limit {
		t.Errorf("%d live sessions, want %d", n, limit)
	}
	const init = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	resp, b := rawCall{body: init}.do(t, c.urls[0])
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "none is idle") {
		t.Errorf("initialize with %d sessions in use: %d %s, want 429", limit, resp.StatusCode, b)
	}
	if n := live(); n != limit {
		t.Errorf("%d live sessions after the refused initialize, want %d", n, limit)
	}
	if _, err := st.GetSession(t.Context(), busy); err != nil {
		t.Errorf("the session in use was reclaimed: %v", err)
	}
}

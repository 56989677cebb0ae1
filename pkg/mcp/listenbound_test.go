package mcp_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// openListen posts subscriptions/listen with request id and filter to url.
// A stream's first message must be the acknowledgement, and the stream
// stays open until ctx ends. Any other answer is returned with the body
// read.
func openListen(t *testing.T, ctx context.Context, url, id, filter string) (*http.Response, []byte) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"` + id + `","method":"subscriptions/listen","params":{"notifications":` + filter + `,` + meta2026(`{}`) + `}}`
	resp := postListen(t, ctx, url, body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	t.Cleanup(func() { resp.Body.Close() })
	acked := make(chan bool, 1)
	go readEvents(t, resp.Body, func(ev sseEvent) bool {
		acked <- strings.Contains(ev.data, "notifications/subscriptions/acknowledged")
		return true
	})
	select {
	case ok := <-acked:
		if !ok {
			t.Fatalf("listen %s: the first message is not the acknowledgement", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("listen %s: no acknowledgement within 10s", id)
	}
	return resp, nil
}

// storeRows counts the rows of the SQLite store's per-session tables.
func storeRows(t *testing.T, db *sql.DB) map[string]int {
	t.Helper()
	rows := map[string]int{}
	for _, table := range []string{"sessions", "subscriptions", "streams", "events", "messages"} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		rows[table] = n
	}
	return rows
}

// TestListenBoundPerPrincipal (issue 20, finding 5): 180 listens of one
// principal, alternating between two processes on one store, each with 10
// resource subscriptions of 1900 bytes. The first MaxListensPerPrincipal
// (the default, 20) are acknowledged; each one over it gets HTTP 429 with
// Retry-After and a JSON-RPC error naming the limit, and stores nothing
// (the store's rows do not change). The open listens do not count
// against MaxSessionsPerPrincipal (here 1): a 2025-era initialize of the
// principal succeeds. Once a stream ends its slot frees up.
func TestListenBoundPerPrincipal(t *testing.T) {
	limit := mcp.DefaultLimits.MaxListensPerPrincipal
	c := newCluster(t, 2, func(o *mcp.ServerOptions) {
		o.DynamicRegistries = true
		o.Limits.MaxSessionsPerPrincipal = 1
	})
	db, err := sql.Open("sqlite", c.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var uris []string
	for i := range 10 {
		uris = append(uris, fmt.Sprintf("events://t%d-%s", i, strings.Repeat("u", 1900)))
	}
	subs, _ := json.Marshal(uris)
	filter := `{"toolsListChanged":true,"resourceSubscriptions":` + string(subs) + `}`

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var first context.CancelFunc
	var accepted, refused int
	var atLimit map[string]int
	for i := range 180 {
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		resp, b := openListen(t, sctx, c.urls[i%2], fmt.Sprintf("L%d", i), filter)
		switch {
		case resp.StatusCode == http.StatusOK:
			accepted++
			if first == nil {
				first = scancel
			}
			if accepted == limit {
				atLimit = storeRows(t, db)
			}
		case resp.StatusCode == http.StatusTooManyRequests:
			refused++
			var msg struct {
				Error *mcp.Error `json:"error"`
			}
			if err := json.Unmarshal(b, &msg); err != nil || msg.Error == nil ||
				!strings.Contains(msg.Error.Message, fmt.Sprintf("%d open listen streams", limit)) || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("listen %d over the limit: Retry-After %q, body %s; want Retry-After and a JSON-RPC error naming the limit", i, resp.Header.Get("Retry-After"), b)
			}
		default:
			t.Fatalf("listen %d: HTTP %d %s", i, resp.StatusCode, b)
		}
	}
	if accepted != limit || refused != 180-limit {
		t.Fatalf("%d listens acknowledged, %d refused; want %d and %d", accepted, refused, limit, 180-limit)
	}
	rows := storeRows(t, db)
	t.Logf("store rows with %d listens open, after %d refused: %v", accepted, refused, rows)
	if fmt.Sprint(rows) != fmt.Sprint(atLimit) {
		t.Errorf("store rows %v after the refused listens, %v before: the refused stored something", rows, atLimit)
	}
	// One backing session per open stream, each subscribed to its 10
	// resources, and one liveness record per process.
	if rows["sessions"] != limit+2 || rows["subscriptions"] != limit*10 {
		t.Errorf("%d sessions, %d subscriptions; want %d (and 2 liveness records) and %d", rows["sessions"], rows["subscriptions"], limit, limit*10)
	}

	// The listens leave the principal its 2025-era session.
	initialize(t, c.urls[0], "2025-11-25")

	// A stream that ends frees its slot.
	first()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM sessions WHERE id LIKE 'listen-%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n < limit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ended stream's backing session is still there after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp, b := openListen(t, ctx, c.urls[1], "again", filter); resp.StatusCode != http.StatusOK {
		t.Fatalf("listen after a stream ended: HTTP %d %s, want the acknowledgement", resp.StatusCode, b)
	}
}

// TestListenRefreshCheap (issue 20, finding 6; issue 17): a listen
// stream's backing session lives 5 minutes (not the hour of a 2025-era
// session) past its stream's last refresh and names the process serving
// it, whose liveness record lives 30 s past its last beat
// (TestListenIdleWritesPerProcess counts the refreshes). A stream the
// server ends is parked for 2 minutes, naming no process, and the
// process, which then holds no stream, deletes its record.
func TestListenRefreshCheap(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "db")
	raw, err := sqlitestore.New(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Now()}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, raw,
		&mcp.ServerOptions{PollInterval: 20 * time.Millisecond, DynamicRegistries: true, Now: clock.Now})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, KeepAlive: time.Hour})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); ts.Close(); raw.Close() })

	if resp, b := openListen(t, t.Context(), ts.URL, "R", `{"toolsListChanged":true}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("listen: HTTP %d %s", resp.StatusCode, b)
	}
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lifetime := func(like string) (string, time.Duration) {
		t.Helper()
		var id string
		var created, expires int64
		if err := db.QueryRow(`SELECT id, created_at, expires_at FROM sessions WHERE id LIKE ?`, like).Scan(&id, &created, &expires); err != nil {
			t.Fatalf("session %s: %v", like, err)
		}
		return id, time.Duration(expires - created)
	}
	id, ttl := lifetime("listen-%")
	if ttl != 5*time.Minute {
		t.Errorf("the backing session lives %v, want 5m0s", ttl)
	}
	process, ttl := lifetime("process-%")
	if ttl != 30*time.Second {
		t.Errorf("the liveness record lives %v, want 30s", ttl)
	}
	st, err := raw.GetSession(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if want := (notify.ListenState{Process: process, Request: "s:R"}); st.Listen != want || st.ClientInfo != nil {
		t.Errorf("the backing session records %+v, ClientInfo %s; want %+v and no client info", st.Listen, st.ClientInfo, want)
	}
	// A stream the server ends is parked for its 2 minutes, in one
	// write: the next listen can adopt it.
	before := st.Version
	h.Close()
	st, err = raw.GetSession(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.ExpiresAt, clock.Now().Add(2*time.Minute); got.Sub(want).Abs() > time.Second || st.Listen.Process != "" || st.Listen.Request != "" || st.Listen.Parked == "" {
		t.Errorf("parked: expiry %v, Listen %+v; want about %v (2 minutes), a park key and no process or request", got, st.Listen, want)
	}
	if st.Version != before+1 {
		t.Errorf("parking moved the session's version from %d to %d; want one write", before, st.Version)
	}
	if _, err := raw.GetSession(t.Context(), process); err == nil {
		t.Errorf("the liveness record outlives the process's last stream")
	}
}

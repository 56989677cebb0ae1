package mcp_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// throttledStore is a real store whose GetSession fails, while failing is
// set, the way a throttled DynamoDB read does.
type throttledStore struct {
	mcp.Store
	failing atomic.Bool
}

var errThrottled = errors.New("ProvisionedThroughputExceededException: rate of requests exceeds the allowed throughput")

func (s *throttledStore) GetSession(ctx context.Context, id string) (*notify.Session, error) {
	if s.failing.Load() {
		return nil, errThrottled
	}
	return s.Store.GetSession(ctx, id)
}

// TestStoreFailureStatus checks the one mapping of store errors to HTTP: a
// session that is gone is 404; a store that fails to read one is 503 with
// Retry-After (the client keeps its session and retries), on POST, GET and
// DELETE alike.
func TestStoreFailureStatus(t *testing.T) {
	real, err := sqlitestore.New(filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	store := &throttledStore{Store: real}
	h := mcp.NewStreamableHandler(mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, nil), nil)
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()
	id := initialize(t, ts.URL, "2025-11-25")

	do := func(method, session string) *http.Response {
		req, _ := http.NewRequest(method, ts.URL, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	store.failing.Store(true)
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if resp := do(m, id); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s with a throttled store: HTTP %d (Retry-After %q), want 503 with Retry-After", m, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if resp, _ := testutil.PostRead(t, nil, ts.URL, id, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("POST with a throttled store: HTTP %d, want 503", resp.StatusCode)
	}
	store.failing.Store(false)
	if resp, _ := testutil.PostRead(t, nil, ts.URL, id, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != http.StatusOK {
		t.Errorf("the session after the store recovered: HTTP %d, want 200", resp.StatusCode)
	}
	if resp := do(http.MethodGet, "no-such-session-0123456789abcdef"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET of an unknown session: HTTP %d, want 404", resp.StatusCode)
	}
}

// authErr is an Authenticator error with a challenge.
type authErr struct {
	kind      error
	challenge string
}

func (e authErr) Error() string           { return "refused" }
func (e authErr) Unwrap() error           { return e.kind }
func (e authErr) WWWAuthenticate() string { return e.challenge }

type refuse struct{ err error }

func (a refuse) Authenticate(*http.Request) (string, error) { return "", a.err }

// TestAuthFailureStatus checks the one mapping of Authenticator errors to
// HTTP: 401 by default, 403 for ErrInsufficientScope, 503 with
// Retry-After for ErrAuthUnavailable, each with the error's challenge.
func TestAuthFailureStatus(t *testing.T) {
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, nil)
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		challenge  string
		retryAfter bool
	}{
		{"plain error", errors.New("no"), 401, "", false},
		{"unauthorized", authErr{mcp.ErrUnauthorized, `Bearer resource_metadata="x"`}, 401, `Bearer resource_metadata="x"`, false},
		{"insufficient scope", authErr{mcp.ErrInsufficientScope, `Bearer error="insufficient_scope"`}, 403, `Bearer error="insufficient_scope"`, false},
		{"unavailable", authErr{mcp.ErrAuthUnavailable, ""}, 503, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{Authenticator: refuse{tc.err}}))
			defer ts.Close()
			resp, body := testutil.PostRead(t, nil, ts.URL, "", testutil.RPC(1, "ping", nil))
			if resp.StatusCode != tc.status || resp.Header.Get("WWW-Authenticate") != tc.challenge || (resp.Header.Get("Retry-After") != "") != tc.retryAfter {
				t.Errorf("%d WWW-Authenticate %q Retry-After %q %s; want %d %q retry-after %v",
					resp.StatusCode, resp.Header.Get("WWW-Authenticate"), resp.Header.Get("Retry-After"), body, tc.status, tc.challenge, tc.retryAfter)
			}
		})
	}
}

// TestStoreBusy: another connection holds the SQLite file's write lock
// (as a process frozen mid-transaction does); a request that must write
// gets 503 with Retry-After and a JSON-RPC error for its id once the busy
// timeout passes, never 500: a 2025 initialize and a 2026
// subscriptions/listen, each on a process of its own (a handler on a
// store of its own on the same file, so they wait at once). When the lock
// is released the same requests succeed.
func TestStoreBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpush.db")
	serve := func() string {
		store, err := sqlitestore.New(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		h := mcp.NewStreamableHandler(mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, nil), nil)
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		t.Cleanup(h.Close)
		return ts.URL
	}
	urls := []string{serve(), serve()}

	// The other process: a write transaction on the same file, held.
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`DELETE FROM sessions WHERE id = 'none'`); err != nil {
		t.Fatal(err)
	}

	initBody := `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	listenBody := `{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + meta2026(`{}`) + `}}`
	cases := []struct {
		name, url, body string
		header          []string
		wantID          string
	}{
		{"initialize", urls[0], initBody, nil, "7"},
		{"subscriptions/listen", urls[1], listenBody, headers2026("subscriptions/listen", ""), `"L1"`},
	}
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Go(func() {
			resp, b := testutil.PostRead(t, nil, c.url, "", c.body, c.header...)
			var m struct {
				ID    json.RawMessage `json:"id"`
				Error *mcp.Error      `json:"error"`
			}
			json.Unmarshal(b, &m)
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
				m.Error == nil || m.Error.Code != mcp.CodeInternalError || string(m.ID) != c.wantID {
				t.Errorf("%s with the write lock held elsewhere: HTTP %d, Retry-After %q, %s; want 503 with Retry-After and error -32603 for id %s",
					c.name, resp.StatusCode, resp.Header.Get("Retry-After"), b, c.wantID)
			}
		})
	}
	wg.Wait()

	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if resp, b := testutil.PostRead(t, nil, urls[0], "", initBody); resp.StatusCode != http.StatusOK {
		t.Errorf("initialize after the lock was released: HTTP %d %s", resp.StatusCode, b)
	}
}

// unavailableStore is a real store whose Subscribe fails, while failing
// is set, with notify.ErrUnavailable, as a busy SQLite or a throttled
// DynamoDB write does.
type unavailableStore struct {
	mcp.Store
	failing atomic.Bool
}

func (s *unavailableStore) Subscribe(ctx context.Context, id, uri string) error {
	if s.failing.Load() {
		return fmt.Errorf("subscribing: %w: database is locked", notify.ErrUnavailable)
	}
	return s.Store.Subscribe(ctx, id, uri)
}

// TestStoreUnavailableRequest: a request whose handler meets an
// unavailable store, answered as plain JSON, is 503 with Retry-After and
// the JSON-RPC error for its id (not 200 with -32603).
func TestStoreUnavailableRequest(t *testing.T) {
	real, err := sqlitestore.New(filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	store := &unavailableStore{Store: real}
	h := mcp.NewStreamableHandler(mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, nil), nil)
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()
	id := initialize(t, ts.URL, "2025-11-25")
	body := `{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"file:///a.txt"}}`
	store.failing.Store(true)
	resp, b := testutil.PostRead(t, nil, ts.URL, id, body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !bytes.Contains(b, []byte(`"id":3,"error":{"code":-32603`)) {
		t.Errorf("subscribe with the store unavailable: HTTP %d, Retry-After %q, %s; want 503, Retry-After 1, error -32603 for id 3", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	store.failing.Store(false)
	if resp, b := testutil.PostRead(t, nil, ts.URL, id, body); resp.StatusCode != http.StatusOK || bytes.Contains(b, []byte(`"error"`)) {
		t.Errorf("subscribe after the store came back: HTTP %d %s", resp.StatusCode, b)
	}
}

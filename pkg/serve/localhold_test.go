package serve

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// countingTransport counts the requests a client sends, by method.
type countingTransport struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.Method]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// TestLocalDefaultHoldsStreams: the local server with its defaults holds
// an idle client's GET stream (2025-11-25) instead of ending it with
// "retry:" after mcp.DefaultStreamHold, so the client makes no request
// after it opens the stream. The default hold is StreamHoldDeadline
// (logged at start), which on a local server has no deadline: the stream
// lasts until the client leaves, so at most one request a minute after the
// first minute holds by construction; the run here shows the stream is not
// re-opened over three times the on-demand Lambda hold (with that hold the
// client made a GET a second after the first 5 s: 10 in 15 s).
func TestLocalDefaultHoldsStreams(t *testing.T) {
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	var logs testutil.LockedBuffer
	go func() {
		done <- ListenAndServe(ctx, srv, &LocalOptions{Addr: "127.0.0.1:0", Ready: func(a net.Addr) { ready <- a }, Logger: NewLogger(&logs)})
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("ListenAndServe: %v", err)
	}
	if !strings.Contains(logs.String(), `"streamHold":"deadline"`) {
		t.Errorf("the local server's start record does not say it holds streams to the deadline:\n%s", logs.String())
	}

	rt := &countingTransport{n: map[string]int{}}
	c := mcp.NewClient(&mcp.Implementation{Name: "idle", Version: "1"}, &mcp.ClientOptions{
		HTTPClient: &http.Client{Transport: rt},
		Reconnect:  true,
	})
	cs, err := c.Connect(ctx, "http://"+addr.String()+"/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	window := 3 * mcp.DefaultStreamHold
	deadline := time.Now().Add(5 * time.Second)
	for rt.count(http.MethodGet) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(window)
	if got := rt.count(http.MethodGet); got != 1 {
		t.Errorf("an idle client made %d GET requests in %v, want 1 (the stream held)", got, window)
	}
	if got := rt.count(http.MethodPost); got != 2 { // initialize, notifications/initialized
		t.Errorf("an idle client made %d POST requests, want 2 (initialize, initialized)", got)
	}
}

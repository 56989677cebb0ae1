package serve

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// startLocal runs ListenAndServe for srv and returns its address and a
// channel with its result after cancel.
func startLocal(t *testing.T, srv *mcp.Server, shutdown time.Duration) (string, context.CancelFunc, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	var logs testutil.LockedBuffer
	go func() {
		done <- ListenAndServe(ctx, srv, &LocalOptions{Addr: "127.0.0.1:0", Ready: func(a net.Addr) { ready <- a }, Logger: NewLogger(&logs), ShutdownTimeout: shutdown})
	}()
	select {
	case a := <-ready:
		t.Cleanup(func() { t.Logf("server logs:\n%s", logs.String()) })
		return a.String(), cancel, done
	case err := <-done:
		t.Fatalf("ListenAndServe: %v", err)
	}
	return "", nil, nil
}

func newTestServer(t *testing.T, opts *mcp.ServerOptions, started chan<- struct{}) *mcp.Server {
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, opts)
	srv.AddTool(&mcp.Tool{Name: "block"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if started != nil {
			started <- struct{}{}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(30 * time.Second):
			return &mcp.CallToolResult{}, nil
		}
	})
	return srv
}

// TestShutdownWithOldSessionStream (issue 12, finding 10): SIGTERM while a
// request of a session before 2025-11-25 streams (which cannot be closed
// with retry:) still ends the server normally once the shutdown timeout
// has passed.
func TestShutdownWithOldSessionStream(t *testing.T) {
	started := make(chan struct{}, 1)
	addr, cancel, done := startLocal(t, newTestServer(t, nil, started), 300*time.Millisecond)
	url := "http://" + addr + "/mcp"
	resp, body := testutil.PostRead(t, nil, url, "", testutil.RPC(1, "initialize", map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"},
	}))
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(testutil.RPC(2, "tools/call", map[string]any{"name": "block", "arguments": map[string]any{}})))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	time.Sleep(1200 * time.Millisecond) // past SSEAfter: an SSE response without an event id yet
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ListenAndServe = %v after shutting down with an old session's stream open, want nil (exit 0)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ListenAndServe did not return")
	}
}

// TestTrickledBody (issue 12, finding 7): a POST body sent slower than
// Limits.BodyReadTimeout is answered 408 instead of holding the
// connection.
func TestTrickledBody(t *testing.T) {
	addr, _, _ := startLocal(t, newTestServer(t, &mcp.ServerOptions{Limits: mcp.Limits{BodyReadTimeout: 300 * time.Millisecond}}, nil), 0)
	for _, era := range []struct{ name, header string }{
		{"2025", ""},
		{"2026", "Mcp-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n"},
	} {
		t.Run(era.name, func(t *testing.T) { trickle(t, addr, era.header) })
	}
}

// trickle sends a POST whose body comes one byte per 100ms and wants a 408
// long before the body would be complete.
func trickle(t *testing.T, addr, header string) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const n = 100 // one byte per 100ms: 10s if it were read to the end
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%sContent-Length: %d\r\n\r\n", addr, header, n)
	status := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n')
		status <- line
	}()
	for range n {
		select {
		case line := <-status:
			if !strings.Contains(line, " 408 ") {
				t.Errorf("a trickled body got %q, want 408", line)
			}
			return
		case <-time.After(100 * time.Millisecond):
			conn.Write([]byte(" "))
		}
	}
	t.Fatal("the whole body was trickled without a 408")
}

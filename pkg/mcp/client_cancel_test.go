package mcp_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// TestClientCancelsAbandonedCall: a 2025-era tool call whose context ends
// (the caller's timeout, Ctrl-C in the CLI) is cancelled on the server:
// the client sends notifications/cancelled, and the tool's context ends
// within a second, not at the tool's own timeout. Before, the server ran
// the tool on (its request's stream survives the client's disconnect, for
// resumption) and nothing told it the call was given up.
func TestClientCancelsAbandonedCall(t *testing.T) {
	st, err := sqlitestore.New(filepath.Join(t.TempDir(), "cancel.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "cancel", Version: "1"}, st, nil)
	stopped := make(chan error, 1)
	srv.AddTool(&mcp.Tool{Name: "wait"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// Progress makes the response an SSE stream with event ids: one
		// the server keeps running when the client disconnects, so that
		// the client can resume it.
		req.Session.NotifyProgress(ctx, 1, 0, "waiting")
		select {
		case <-ctx.Done():
			stopped <- ctx.Err()
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			stopped <- errors.New("ran to its own timeout")
			return &mcp.CallToolResult{}, nil
		}
	})
	h := mcp.NewStreamableHandler(srv, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close(); st.Close() })

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(t.Context(), ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := cs.CallTool(ctx, "wait", map[string]any{}, func(*mcp.ProgressParams) {}); err == nil {
		t.Fatal("the call returned before its deadline")
	}
	abandoned := time.Now()
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the tool ended with %v, want its context cancelled", err)
		}
		t.Logf("the tool stopped %v after the call was abandoned", time.Since(abandoned).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("the tool still runs 5 s after the client gave up its call")
	}
}

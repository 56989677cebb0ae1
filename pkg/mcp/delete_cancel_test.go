package mcp_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// warnCounter is a slog handler that keeps the messages of records at
// WARN and above.
type warnCounter struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Level.String()+" "+r.Message)
	return nil
}
func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnCounter) WithGroup(string) slog.Handler      { return w }
func (w *warnCounter) messages() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

// TestDeleteCancelsRunningTools: a session DELETE stops the session's
// running tools on the process that serves the DELETE and on any other
// (a silent tool at its next cancellation check, a chatty one at its
// next message), and nothing is logged at WARN or above for it: the
// client left, that is not an error. Without the cancellation the tools
// run to their own 10 s timeout, and a chatty one logs an ERROR per
// message ("logging stream event ... not found").
func TestDeleteCancelsRunningTools(t *testing.T) {
	db := filepath.Join(t.TempDir(), "mcpush.db")
	logs := &warnCounter{}
	ended := make(chan string, 8)
	var urls []string
	for range 2 {
		store, err := sqlitestore.New(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, store, &mcp.ServerOptions{
			PollInterval:     20 * time.Millisecond,
			CancelWatchAfter: 100 * time.Millisecond,
			Logger:           slog.New(logs),
		})
		tool := func(chatty bool) func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				timeout := time.After(10 * time.Second)
				for {
					select {
					case <-ctx.Done():
						ended <- req.Params.Name
						return nil, ctx.Err()
					case <-timeout:
						ended <- req.Params.Name + ": not cancelled"
						return &mcp.CallToolResult{}, nil
					case <-tick.C:
						if chatty {
							req.Session.Log(ctx, mcp.LoggingLevel("warning"), "t", "still running")
						}
					}
				}
			}
		}
		srv.AddTool(&mcp.Tool{Name: "silent"}, tool(false))
		srv.AddTool(&mcp.Tool{Name: "chatty"}, tool(true))
		h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, MaxBodyBytes: 1 << 16})
		ts := httptest.NewServer(h)
		t.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
		urls = append(urls, ts.URL)
	}
	for _, tc := range []struct {
		name        string
		tool        string
		deleteOn    int
		withinLimit time.Duration
	}{
		{"same process", "silent", 0, 2 * time.Second},
		{"other process, silent tool", "silent", 1, 3 * time.Second},
		{"other process, chatty tool", "chatty", 1, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sid := initialize(t, urls[0], "2025-11-25")
			go func() {
				resp := post(t, urls[0], sid, `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"`+tc.tool+`","arguments":{}}}`)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}()
			time.Sleep(400 * time.Millisecond) // the tool runs, and has announced itself
			deleteSession(t, urls[tc.deleteOn], sid)
			select {
			case got := <-ended:
				if got != tc.tool {
					t.Fatalf("the tool ended as %q; want cancelled", got)
				}
			case <-time.After(tc.withinLimit + 10*time.Second):
				t.Fatal("the tool did not end")
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // anything logged after the ends
	if msgs := logs.messages(); len(msgs) > 0 {
		t.Errorf("deleting sessions with running tools logged %d records at WARN or above: %q", len(msgs), msgs)
	}
}

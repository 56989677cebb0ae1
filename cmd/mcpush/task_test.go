package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// newTaskServer serves a real mcpush server with two task tools: "slow"
// (a status message, then a result) and "block" (works until cancelled).
func newTaskServer(t *testing.T) string {
	t.Helper()
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "cli-test", Version: "1"}, store,
		&mcp.ServerOptions{PollInterval: 20 * time.Millisecond, Tasks: mcp.TaskOptions{PollInterval: 50 * time.Millisecond, CheckInterval: 50 * time.Millisecond}})
	srv.AddTaskTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if err := mcp.SetTaskStatus(ctx, "half way"); err != nil {
			return nil, err
		}
		time.Sleep(300 * time.Millisecond)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slow done"}}}, nil
	}, nil)
	srv.AddTaskTool(&mcp.Tool{Name: "block", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}, nil)
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
	return ts.URL
}

// TestCallTask: `call` waits for a task, its status on stderr and its
// result on stdout; `call --no-wait` prints the task id; `task get` prints
// the task, `task cancel` cancels it.
func TestCallTask(t *testing.T) {
	url := newTaskServer(t)
	e, out, errb := testEnv(url)
	if code := run(t.Context(), []string{"--protocol", "2026", "call", "slow"}, e); code != 0 {
		t.Fatalf("call slow: exit %d: %s", code, errb)
	}
	if out.String() != "slow done\n" {
		t.Errorf("stdout %q, want the result", out.String())
	}
	if s := errb.String(); !strings.Contains(s, ": working: half way\n") || !strings.Contains(s, ": completed\n") {
		t.Errorf("stderr %q, want the task's status lines", s)
	}

	e, out, errb = testEnv(url)
	if code := run(t.Context(), []string{"--protocol", "2026", "call", "--no-wait", "block"}, e); code != 0 {
		t.Fatalf("call --no-wait: exit %d: %s", code, errb)
	}
	id := strings.TrimSpace(out.String())
	get := func() map[string]any {
		t.Helper()
		e, out, errb := testEnv(url)
		if code := run(t.Context(), []string{"task", "get", id}, e); code != 0 {
			t.Fatalf("task get: exit %d: %s", code, errb)
		}
		var task map[string]any
		if err := json.Unmarshal([]byte(out.String()), &task); err != nil {
			t.Fatalf("task get output %q: %v", out.String(), err)
		}
		return task
	}
	if task := get(); task["taskId"] != id || task["status"] != "working" {
		t.Errorf("task get: %v, want %s working", task, id)
	}
	e, _, errb = testEnv(url)
	if code := run(t.Context(), []string{"task", "cancel", id}, e); code != 0 {
		t.Fatalf("task cancel: exit %d: %s", code, errb)
	}
	if task := get(); task["status"] != "cancelled" {
		t.Errorf("after task cancel: %v, want cancelled", task)
	}
	e, _, _ = testEnv(url)
	if code := run(t.Context(), []string{"task", "get"}, e); code != 2 {
		t.Errorf("task get without an id: exit %d, want 2 (usage)", code)
	}
}

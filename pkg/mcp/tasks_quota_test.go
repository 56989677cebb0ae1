package mcp_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// tryTask sends a task tool's tools/call as who through client (nil: the
// default) and returns the reply, error or not.
func tryTask(t *testing.T, client *http.Client, url, who, tool, args string) *rpcReply {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + meta2026(tasksCaps) + `}}`
	_, r := call2026With(t, client, url, body, append(headers2026("tools/call", tool), "X-Principal", who)...)
	return r
}

// TestTaskQuotaDeadLeases: the tasks of a process that died (a server
// whose work never renews its leases) stop counting against their
// principal's bound when their leases end, without anyone polling them:
// a principal that filled its 32 tasks there, and lost their ids, is
// refused at once and accepted again a lease later (it used to be
// refused until each was polled by id, or for the 1 h lifetime).
func TestTaskQuotaDeadLeases(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	lease := 2 * time.Second // the 32 creations take well under it
	dead := newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{Runner: idleRunner{}, Lease: lease})
	other := newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{Lease: lease})
	for range 32 {
		startTask(t, dead.url, "alice", "block", `{}`)
	}
	filled := time.Now()
	if r := tryTask(t, nil, other.url, "alice", "echo", `{}`); r.Error == nil || r.Error.Code != mcp.CodeInvalidRequest || !strings.Contains(r.Error.Message, "limit 32") {
		t.Fatalf("a 33rd task while the 32 are alive: %+v %+v, want -32600 naming the limit", r.Result, r.Error)
	}
	time.Sleep(time.Until(filled.Add(lease + 100*time.Millisecond)))
	id := startTask(t, other.url, "alice", "echo", `{}`)
	waitStatus(t, other.url, "alice", id, "completed")
}

// TestTaskInputWaitEnds: a task waiting for input past its execution
// timeout stops counting against the bound at once, unread, and ends
// failed, saying so, while its record is readable (not "not found" at
// its lifetime).
func TestTaskInputWaitEnds(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	timeout := time.Second
	p := newTaskProc(t, db, mcp.Limits{MaxTasksPerPrincipal: 1, TaskTTL: time.Minute}, mcp.TaskOptions{Timeout: timeout})
	id := startTask(t, p.url, "alice", "ask", `{}`)
	waitStatus(t, p.url, "alice", id, "input_required")
	if r := tryTask(t, nil, p.url, "alice", "echo", `{}`); r.Error == nil || r.Error.Code != mcp.CodeInvalidRequest {
		t.Fatalf("a second task while the first waits: %+v, want -32600", r.Error)
	}
	time.Sleep(timeout + 100*time.Millisecond)
	second := startTask(t, p.url, "alice", "echo", `{}`)
	waitStatus(t, p.url, "alice", second, "completed")
	res := waitStatus(t, p.url, "alice", id, "failed")
	if msg, _ := res["statusMessage"].(string); !strings.Contains(msg, "waited for input longer than 1s") {
		t.Errorf("statusMessage %q, want the execution timeout", msg)
	}
}

// fromAddress is a client whose connections come from ip (a loopback
// address other than 127.0.0.1: another anonymous client).
func fromAddress(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestTaskQuotaPerAddress: without authentication each client address
// has its own bound of live tasks, as for sessions and listen streams:
// one address holding its tasks does not block another (they all
// counted against the one anonymous principal). An anonymous task is
// still found by its id alone, from any address.
func TestTaskQuotaPerAddress(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	p := newTaskProc(t, db, mcp.Limits{MaxTasksPerPrincipal: 2}, mcp.TaskOptions{})
	var ids []string
	for range 2 {
		ids = append(ids, startTask(t, p.url, "", "block", `{}`))
	}
	if r := tryTask(t, nil, p.url, "", "block", `{}`); r.Error == nil || r.Error.Code != mcp.CodeInvalidRequest || !strings.Contains(r.Error.Message, "limit 2 per client address") {
		t.Fatalf("a third task from 127.0.0.1: %+v, want -32600 naming the limit per address", r.Error)
	}
	other := fromAddress("127.0.0.2")
	r := tryTask(t, other, p.url, "", "echo", `{"from":2}`)
	if r.Error != nil || r.Result["resultType"] != "task" {
		t.Fatalf("a task from 127.0.0.2 while 127.0.0.1 holds its 2: %+v %+v, want a task", r.Result, r.Error)
	}
	id, _ := r.Result["taskId"].(string)
	waitStatus(t, p.url, "", id, "completed") // read from 127.0.0.1
	for _, id := range ids {
		taskCall(t, p.url, "", "tasks/cancel", id, `"taskId":"`+id+`"`, tasksCaps)
	}
}

// TestTaskWorkerShare: one principal's tasks take at most
// WorkersPerPrincipal of the local workers (default half): while alice's
// 32 long tasks run or wait, bob's task runs and completes (it used to
// wait for one of alice's, 32 workers being her 32 tasks).
func TestTaskWorkerShare(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	p := newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{Lease: time.Minute})
	var alice []string
	for range 32 {
		alice = append(alice, startTask(t, p.url, "alice", "block", `{}`))
	}
	for range 16 {
		select {
		case <-p.started:
		case <-time.After(10 * time.Second):
			t.Fatal("alice's first 16 tasks did not all start")
		}
	}
	id := startTask(t, p.url, "bob", "echo", `{}`)
	waitStatus(t, p.url, "bob", id, "completed")
	if n := len(p.started); n != 0 {
		t.Errorf("%d more of alice's tasks started, want 16 in all (half the 32 workers)", 16+n)
	}
	for _, id := range alice {
		if r := getTask(t, p.url, "alice", id); r.Result["status"] != "working" {
			t.Errorf("alice's task %s: %v, want working", id, r.Result)
		}
	}
	// One ends: a queued one of alice's takes its place.
	taskCall(t, p.url, "alice", "tasks/cancel", alice[0], `"taskId":"`+alice[0]+`"`, tasksCaps)
	select {
	case <-p.started:
	case <-time.After(10 * time.Second):
		t.Error("no queued task of alice's started when one of hers ended")
	}
}

// TestTaskShutdown: ShutdownTasks (the local server's SIGTERM) fails at
// once the tasks whose work runs or waits for a worker in the process,
// saying so, and stops their work; a task created afterwards fails at
// once. They used to stay working until their lease reported a crash.
func TestTaskShutdown(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	p := newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{Workers: 1, Lease: time.Hour})
	other := newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{})
	running := startTask(t, p.url, "alice", "block", `{}`)
	<-p.started
	queued := startTask(t, p.url, "alice", "echo", `{}`)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := p.srv.ShutdownTasks(ctx); err != nil {
		t.Fatalf("ShutdownTasks: %v", err)
	}
	for _, id := range []string{running, queued} {
		r := getTask(t, other.url, "alice", id)
		if msg, _ := r.Result["statusMessage"].(string); r.Result["status"] != "failed" || !strings.Contains(msg, "shut down") {
			t.Errorf("task %s after ShutdownTasks: %v, want failed, saying the server shut down", id, r.Result)
		}
	}
	select {
	case got := <-p.cancelled:
		if got != running {
			t.Errorf("cancelled %s, want %s", got, running)
		}
	default:
		t.Error("the running task's work was not stopped")
	}
	late := startTask(t, p.url, "alice", "echo", `{}`)
	if r := getTask(t, other.url, "alice", late); r.Result["status"] != "failed" {
		t.Errorf("a task created after ShutdownTasks: %v, want failed", r.Result)
	}
}

// TestTaskStoredBytes: the stored records of one principal's unexpired
// tasks, ended ones included, are bounded (MaxTaskBytesPerPrincipal): at
// the bound a new task is refused with -32600 naming it and nothing is
// stored, while another principal's is accepted; on both stores (ended
// tasks used to be bounded only by the request rate: 500 added 100 MB).
func TestTaskStoredBytes(t *testing.T) {
	const bound = 20_000
	for _, hs := range heldStores(t) {
		t.Run(hs.name, func(t *testing.T) {
			st := hs.open(t)
			srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, st, &mcp.ServerOptions{Limits: mcp.Limits{MaxTaskBytesPerPrincipal: bound}})
			srv.AddTaskTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
				func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
				}, nil)
			h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: headerPrincipal{}})
			ts := httptest.NewServer(h)
			t.Cleanup(func() { srv.ShutdownTasks(context.Background()); h.Close(); ts.Close() })
			who := fmt.Sprintf("bytes-%d", time.Now().UnixNano()) // a fresh principal on the shared table
			args := `{"pad":"` + strings.Repeat("x", 3000) + `"}`
			accepted := 0
			for {
				r := tryTask(t, nil, ts.URL, who, "echo", args)
				if r.Error != nil {
					if r.Error.Code != mcp.CodeInvalidRequest || !strings.Contains(r.Error.Message, "limit 20000") {
						t.Fatalf("task %d: %+v, want -32600 naming the bound", accepted+1, r.Error)
					}
					break
				}
				id, _ := r.Result["taskId"].(string)
				waitStatus(t, ts.URL, who, id, "completed")
				if accepted++; accepted > 10 {
					t.Fatalf("%d tasks of 6 KB records accepted under a %d-byte bound", accepted, bound)
				}
			}
			if accepted < 3 {
				t.Errorf("refused after %d tasks of about 6 KB each, want 3 or 4 under %d bytes", accepted, bound)
			}
			c, err := st.(notify.TaskStore).CountTasks(t.Context(), who, 100)
			if err != nil {
				t.Fatal(err)
			}
			if c.Bytes < bound || c.Bytes > bound+7000 {
				t.Errorf("%d bytes stored after the refusal, want the bound (%d) plus less than one record", c.Bytes, bound)
			}
			id := startTask(t, ts.URL, who+"-other", "echo", args)
			waitStatus(t, ts.URL, who+"-other", id, "completed")
			t.Logf("%d tasks accepted, %d bytes stored, then refused", accepted, c.Bytes)
		})
	}
}

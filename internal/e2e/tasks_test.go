package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// taskLease is the task lease of the processes of TestTaskProcessKilled.
const taskLease = 2 * time.Second

// rpc2026 posts a 2026-era request declaring the tasks extension to url
// and returns its result (or fails on an error).
func rpc2026(t *testing.T, url, method, name, params string) map[string]any {
	t.Helper()
	res, rpcErr := try2026(t, url, method, name, params)
	if rpcErr != nil {
		t.Fatalf("%s: %s", method, rpcErr)
	}
	return res
}

// try2026 is rpc2026 that returns a JSON-RPC error.
func try2026(t *testing.T, url, method, name, params string) (map[string]any, json.RawMessage) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + `,"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m struct {
		Result map[string]any  `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Error == nil && m.Result == nil {
		t.Fatalf("%s: %d %s", method, resp.StatusCode, b)
	}
	return m.Result, m.Error
}

// TestTaskProcessKilled: a task whose process is killed (SIGKILL) while it
// works is reported failed by the other processes once its lease
// (MCPUSH_TASK_LEASE) expires, never left working; on every store.
func TestTaskProcessKilled(t *testing.T) {
	for _, store := range testStores() {
		t.Run(store.Name, func(t *testing.T) {
			opts := serverEnv(t, store)
			opts.Env = append(opts.Env, "MCPUSH_TASK_LEASE="+taskLease.String())
			c := StartCluster(t, 2, opts)
			created := rpc2026(t, c.URL(0), "tools/call", "slow_compute", `"name":"slow_compute","arguments":{"seconds":600,"label":"killed"}`)
			id, _ := created["taskId"].(string)
			if id == "" {
				t.Fatalf("tools/call: %v, want a task", created)
			}
			get := func() map[string]any { return rpc2026(t, c.URL(1), "tasks/get", id, `"taskId":"`+id+`"`) }
			// Alive: the lease is renewed past its first term.
			time.Sleep(taskLease + taskLease/2)
			if got := get(); got["status"] != "working" {
				t.Fatalf("while its process lives: %v, want working", got)
			}
			if err := c.Kill(0); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			for {
				got := get()
				if got["status"] == "failed" {
					if msg, _ := got["statusMessage"].(string); !strings.Contains(msg, "lease expired") {
						t.Errorf("statusMessage %q, want one saying the lease expired", msg)
					}
					break
				}
				if got["status"] != "working" || time.Since(killed) > taskLease+5*time.Second {
					t.Fatalf("%v after the kill: %v, want failed within the lease (%v)", time.Since(killed), got, taskLease)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// TestTaskQuotaAfterKill: a principal's 32 live tasks (the bound) on a
// process that is killed (SIGKILL) stop counting when their leases end,
// though no one polls them: a new task is refused at once and accepted
// within the lease (it used to be refused until each was polled by id,
// or for the 1 h lifetime); on every store.
func TestTaskQuotaAfterKill(t *testing.T) {
	for _, store := range testStores() {
		t.Run(store.Name, func(t *testing.T) {
			opts := serverEnv(t, store)
			opts.Env = append(opts.Env, "MCPUSH_TASK_LEASE="+taskLease.String(), "MCPUSH_MAX_TASKS_PER_PRINCIPAL=32")
			c := StartCluster(t, 2, opts)
			for i := range 32 {
				created := rpc2026(t, c.URL(0), "tools/call", "slow_compute", `"name":"slow_compute","arguments":{"seconds":600,"label":"held`+strconv.Itoa(i)+`"}`)
				if created["taskId"] == nil {
					t.Fatalf("tools/call %d: %v, want a task", i, created)
				}
			}
			if err := c.Kill(0); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			call := func() (map[string]any, json.RawMessage) {
				return try2026(t, c.URL(1), "tools/call", "slow_compute", `"name":"slow_compute","arguments":{"seconds":0,"label":"new"}`)
			}
			if _, rpcErr := call(); rpcErr == nil || !strings.Contains(string(rpcErr), "limit 32") {
				t.Fatalf("a 33rd task right after the kill: %s, want refused naming the limit", rpcErr)
			}
			refused := 1
			for {
				res, rpcErr := call()
				if rpcErr == nil {
					if res["taskId"] == nil {
						t.Fatalf("tools/call: %v, want a task", res)
					}
					t.Logf("a new task accepted %v after the kill (lease %v), %d refused before", time.Since(killed).Round(time.Millisecond), taskLease, refused)
					break
				}
				refused++
				if time.Since(killed) > taskLease+5*time.Second {
					t.Fatalf("%v after the kill the new task is still refused: %s", time.Since(killed), rpcErr)
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}

// TestTaskSIGTERM: SIGTERM fails at once the tasks whose work runs or
// waits for a worker in the process (MCPUSH_TASK_WORKERS=1: one of each),
// saying the server shut down, and the process exits cleanly; another
// process reads them failed right after (they used to stay working for a
// lease, here 1 min, and then be reported as a crash); on every store.
func TestTaskSIGTERM(t *testing.T) {
	for _, store := range testStores() {
		t.Run(store.Name, func(t *testing.T) {
			opts := serverEnv(t, store)
			opts.Env = append(opts.Env, "MCPUSH_TASK_LEASE=1m", "MCPUSH_TASK_WORKERS=1")
			c := StartCluster(t, 2, opts)
			var ids []string
			for _, label := range []string{"running", "queued"} {
				created := rpc2026(t, c.URL(0), "tools/call", "slow_compute", `"name":"slow_compute","arguments":{"seconds":600,"label":"`+label+`"}`)
				id, _ := created["taskId"].(string)
				if id == "" {
					t.Fatalf("tools/call: %v, want a task", created)
				}
				ids = append(ids, id)
			}
			start := time.Now()
			if err := c.Terminate(0); err != nil {
				t.Fatal(err)
			}
			t.Logf("process exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
			for _, id := range ids {
				got := rpc2026(t, c.URL(1), "tasks/get", id, `"taskId":"`+id+`"`)
				if msg, _ := got["statusMessage"].(string); got["status"] != "failed" || !strings.Contains(msg, "shut down") {
					t.Errorf("task after SIGTERM: %v, want failed, saying the server shut down", got)
				}
			}
		})
	}
}

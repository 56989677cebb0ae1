package e2e

import (
	"encoding/json"
	"io"
	"net/http"
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
	if err := json.Unmarshal(b, &m); err != nil || m.Error != nil {
		t.Fatalf("%s: %d %s", method, resp.StatusCode, b)
	}
	return m.Result
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

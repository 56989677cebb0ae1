package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/testenv"
)

// taskCall sends a 2026-era request declaring the tasks extension to f
// (as alice, the fixtures' IAM caller) and returns its result.
func taskCall(t *testing.T, f *lambdatest.Function, method, name, params string) map[string]any {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + `,"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`
	ev := lambdatest.Edit(t, fixture(t, "mcp-tools-call"), lambdatest.WithBody(body), func(ev map[string]any) {
		h := ev["headers"].(map[string]any)
		delete(h, "mcp-session-id")
		h["mcp-protocol-version"], h["mcp-method"], h["mcp-name"] = "2026-07-28", method, name
	})
	_, hr := f.Call(t, ev, &lambdatest.InvokeOptions{Timeout: 30 * time.Second})
	msgs := lambdatest.Messages(t, hr)
	if hr.StatusCode != http.StatusOK || len(msgs) != 1 || msgs[0].Error != nil {
		t.Fatalf("%s: %d %s", method, hr.StatusCode, hr.Body)
	}
	var res map[string]any
	if err := json.Unmarshal(msgs[0].Result, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestLambdaTasks runs the MCP function as two sandboxes on one store: a
// task created by an invocation of the first runs in an invocation of its
// own (the function invokes itself asynchronously, through a fake Invoke
// API, and Lambda starts it in the second sandbox), and its result is
// read by another invocation. Work that outlasts its invocation's
// timeout fails, saying so, within the invocation.
func TestLambdaTasks(t *testing.T) {
	bin := testenv.BuildBinary(t, "./functions/mcp", "conformance")
	env := []string{
		"MCPUSH_LAMBDA_MODE=buffered", "MCPUSH_STORE=sqlite:" + filepath.Join(t.TempDir(), "mcpush.db"),
		"MCPUSH_FIXTURES=conformance", "MCPUSH_STATE_KEYS=lambda-tasks-test-key-0123456789abcdef",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
	}
	worker := lambdatest.StartFunction(t, bin, env...)
	api := lambdatest.NewInvokeAPI(t, &lambdatest.InvokeOptions{Timeout: 5 * time.Second}, worker.API)
	front := lambdatest.StartFunction(t, bin, append(env, "AWS_ENDPOINT_URL_LAMBDA="+api.URL())...)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run := func(n int) *lambdatest.Response {
		t.Helper()
		select {
		case <-api.Added():
		case <-ctx.Done():
			t.Fatal("the function did not invoke itself for the task")
		}
		invs := api.Invocations()
		if len(invs) != n {
			t.Fatalf("%d task invocations, want %d", len(invs), n)
		}
		r, err := invs[n-1].Wait(ctx)
		if err != nil {
			t.Fatalf("task invocation: %v", err)
		}
		return r
	}

	created := taskCall(t, front, "tools/call", "slow_compute", `"name":"slow_compute","arguments":{"seconds":1,"label":"lambda"}`)
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" {
		t.Fatalf("tools/call: %v, want a CreateTaskResult", created)
	}
	var payload struct {
		Task struct{ Principal, ID string } `json:"mcpushTask"`
	}
	if r := run(1); r.TimedOut {
		t.Fatalf("task invocation %s timed out", r.RequestID)
	}
	if err := json.Unmarshal(api.Payloads()[0], &payload); err != nil || payload.Task.ID != id || payload.Task.Principal != alice {
		t.Errorf("task invocation payload %+v (%v), want task %s of %s", payload, err, id, alice)
	}
	got := taskCall(t, worker, "tasks/get", id, `"taskId":"`+id+`"`)
	res, _ := got["result"].(map[string]any)
	if got["status"] != "completed" || res == nil || !strings.Contains(string(mustJSON(t, res)), "Computed lambda") {
		t.Fatalf("tasks/get on the other sandbox: %v, want completed with the result", got)
	}

	// Longer than the invocation's timeout (5s): failed before it ends.
	created = taskCall(t, front, "tools/call", "slow_compute", `"name":"slow_compute","arguments":{"seconds":60,"label":"long"}`)
	id, _ = created["taskId"].(string)
	if r := run(2); r.TimedOut {
		t.Fatalf("task invocation %s timed out instead of failing the task", r.RequestID)
	}
	got = taskCall(t, front, "tasks/get", id, `"taskId":"`+id+`"`)
	if msg, _ := got["statusMessage"].(string); got["status"] != "failed" || !strings.Contains(msg, "function timeout") {
		t.Fatalf("task longer than the invocation: %v, want failed naming the function timeout", got)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

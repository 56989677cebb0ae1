package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/internal/testutil"
)

// TestLambdaManagedInstances runs the MCP function as Lambda Managed
// Instances do: AWS_LAMBDA_MAX_CONCURRENCY=8, so that aws-lambda-go runs
// eight runtime loops in one process. Six 2026-07-28 listen streams are
// held at once by one process (each invocation starts while the others
// run), an event ingested meanwhile reaches each of them exactly once,
// and each is held to its deadline (not ended early for the client to
// poll), ending with the listen result.
func TestLambdaManagedInstances(t *testing.T) {
	mcpBin := testenv.BuildBinary(t, "./functions/mcp")
	ingestBin := testenv.BuildBinary(t, "./functions/sns-ingest")
	store := "MCPUSH_STORE=sqlite:" + filepath.Join(t.TempDir(), "mcpush.db")
	ingest := lambdatest.StartFunction(t, ingestBin, store)
	mcpf := lambdatest.StartFunction(t, mcpBin, store, "MCPUSH_AUTH=none", "AWS_LAMBDA_MAX_CONCURRENCY=8")

	const (
		streams = 6
		timeout = 10 * time.Second // each listen invocation's deadline
	)
	listen := func(id int) []byte {
		return lambdatest.Edit(t, fixture(t, "mcp-tools-call"), lambdatest.All(lambdatest.WithCaller(""),
			lambdatest.WithBody(testutil.RPC(id, "subscriptions/listen", map[string]any{
				"notifications": map[string]any{"resourceSubscriptions": []string{"events://orders"}},
				"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
					"io.modelcontextprotocol/clientCapabilities": map[string]any{}},
			})),
			func(ev map[string]any) {
				h := ev["headers"].(map[string]any)
				delete(h, "mcp-session-id")
				h["mcp-protocol-version"] = "2026-07-28"
				h["mcp-method"] = "subscriptions/listen"
			}))
	}
	var invs []*lambdatest.Invocation
	for i := range streams {
		invs = append(invs, mcpf.API.Invoke(listen(i+1), &lambdatest.InvokeOptions{Streaming: true, Timeout: timeout}))
	}
	started := time.Now()
	for i, inv := range invs {
		select {
		case <-inv.Started():
		case <-time.After(5 * time.Second):
			t.Fatalf("listen invocation %d did not start while the others run: the process takes one invocation at a time", i)
		}
	}
	time.Sleep(time.Second) // every stream acknowledged and idle
	if r := ingest.Invoke(t, fixture(t, "sns-event"), &lambdatest.InvokeOptions{Timeout: 30 * time.Second}); r.Err != nil {
		t.Fatalf("ingest: %v", r.Err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, inv := range invs {
		r, err := inv.Wait(ctx)
		if err != nil {
			t.Fatalf("listen %d: %v", i, err)
		}
		hr, err := r.HTTP()
		if err != nil {
			t.Fatalf("listen %d: %v", i, err)
		}
		body := string(hr.Body)
		if n := strings.Count(body, "notifications/resources/updated"); n != 1 {
			t.Errorf("listen %d got %d resources/updated of the one event, want exactly 1: %s", i, n, body)
		}
		if !strings.Contains(body, `"resultType":"complete"`) {
			t.Errorf("listen %d did not end with the listen result: %s", i, body)
		}
		if held := r.FinishedAt.Sub(started); held < timeout-4*time.Second {
			t.Errorf("listen %d ended %v after it started, want it held to its deadline (%v, less the 2 s margin)", i, held.Round(time.Millisecond), timeout)
		}
	}
}

package mcp_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

const (
	// progressSteps is how many steps the benchmark's tool reports.
	progressSteps = 1000
	// progressStepWork is the busy work of one step.
	progressStepWork = time.Millisecond
)

// busy spins for d: a fixed amount of wall-clock work that, unlike a
// sleep, has no timer slack.
func busy(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

type stepsIn struct {
	Steps int `json:"steps,omitempty" jsonschema:"how many steps; default 1000"`
}

type stepsOut struct {
	Steps int `json:"steps"`
}

// BenchmarkProgressOverhead measures what progress notifications cost a
// tool: a tool of 1000 steps, each 1 ms of busy work followed by
// ServerSession.NotifyProgress, called over loopback HTTP on a server
// with its SQLite store, with a progressToken (about one notification
// per ProgressInterval, 100 ms, each logged in the store and written to
// the SSE response) and without one (NotifyProgress returns at once).
// The two calls alternate in every iteration, in alternating order, so
// that load affects both alike. It reports each call's time, the
// progress notifications received per call, and the overhead: how much
// longer the call with a token takes, in % (target < 5%).
func BenchmarkProgressOverhead(b *testing.B) {
	if testing.Short() {
		b.Skip("skipping: each iteration takes 2 seconds")
	}
	store, err := sqlitestore.New(filepath.Join(b.TempDir(), "progress.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpush", Version: "1"}, store, &mcp.ServerOptions{DynamicRegistries: true}) // as shipped
	mcp.AddTool(srv, &mcp.Tool{Name: "steps"}, func(ctx context.Context, req *mcp.CallToolRequest, in stepsIn) (*mcp.CallToolResult, stepsOut, error) {
		steps := in.Steps
		if steps <= 0 {
			steps = progressSteps
		}
		for i := range steps {
			busy(progressStepWork)
			req.Session.NotifyProgress(ctx, float64(i+1), float64(steps), "")
		}
		return nil, stepsOut{Steps: steps}, nil
	})
	h := mcp.NewStreamableHandler(srv, nil)
	ts := httptest.NewServer(h)
	b.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
	c := &rawClient{url: ts.URL, hc: ts.Client()}
	c.connect(b)

	const (
		withToken    = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"steps","arguments":{},"_meta":{"progressToken":"steps"}}}`
		withoutToken = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"steps","arguments":{}}}`
	)
	call := func(body string) (time.Duration, int) {
		start := time.Now()
		out := c.post(b, body)
		d := time.Since(start)
		if !bytes.Contains(out, []byte(`"structuredContent":{"steps":`)) {
			b.Fatalf("tools/call answered %.300s", out)
		}
		return d, bytes.Count(out, []byte(`"notifications/progress"`))
	}
	// Warm up both paths (connections, the first appends, SSE) with a
	// short run of each.
	call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"steps","arguments":{"steps":150},"_meta":{"progressToken":"warm"}}}`)
	call(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"steps","arguments":{"steps":150}}}`)

	var with, without time.Duration
	notes, i := 0, 0
	for b.Loop() {
		if i%2 == 0 {
			d, n := call(withToken)
			with, notes = with+d, notes+n
			d, n = call(withoutToken)
			without = without + d
			if n != 0 {
				b.Fatalf("%d progress notifications without a progressToken", n)
			}
		} else {
			d, n := call(withoutToken)
			without = without + d
			if n != 0 {
				b.Fatalf("%d progress notifications without a progressToken", n)
			}
			d, n = call(withToken)
			with, notes = with+d, notes+n
		}
		i++
	}
	n := float64(b.N)
	overhead := 100 * (float64(with) - float64(without)) / float64(without)
	b.ReportMetric(float64(with.Milliseconds())/n, "with-token-ms/call")
	b.ReportMetric(float64(without.Milliseconds())/n, "without-ms/call")
	b.ReportMetric(float64(notes)/n, "progress/call")
	b.ReportMetric(overhead, "overhead-%")
	b.Logf("%d iterations: %.1f ms with a progressToken (%.1f notifications), %.1f ms without: overhead %.2f%% (target < 5%%)",
		b.N, float64(with.Microseconds())/1000/n, float64(notes)/n, float64(without.Microseconds())/1000/n, overhead)
}

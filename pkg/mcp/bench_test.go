package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// rawClient speaks Streamable HTTP with a bare HTTP client, the same way
// to every server, so the servers are what the benchmark compares.
type rawClient struct {
	url, session string
	hc           *http.Client
}

func (c *rawClient) post(tb testing.TB, body string) []byte {
	resp, b := testutil.PostRead(tb, c.hc, c.url, c.session, body, "Mcp-Protocol-Version", "2025-11-25")
	if resp.StatusCode >= 300 {
		tb.Fatalf("POST %s: %d %s", body, resp.StatusCode, b)
	}
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		c.session = s
	}
	return b
}

func (c *rawClient) connect(tb testing.TB) {
	c.post(tb, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	c.post(tb, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

const benchCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`

func newSDKServer(tb testing.TB, jsonResponse bool) *rawClient {
	s := sdk.NewServer(&sdk.Implementation{Name: "sdk", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo"}, func(ctx context.Context, req *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, echoOut, error) {
		return nil, echoOut{Echo: in.Text, Length: len(in.Text)}, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{JSONResponse: jsonResponse}))
	tb.Cleanup(ts.Close)
	c := &rawClient{url: ts.URL, hc: ts.Client()}
	c.connect(tb)
	return c
}

func newMcpushServer(tb testing.TB) *rawClient {
	store, err := sqlitestore.New(filepath.Join(tb.TempDir(), "bench.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpush", Version: "1"}, store, &mcp.ServerOptions{DynamicRegistries: true}) // as shipped
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
		return nil, echoOut{Echo: in.Text, Length: len(in.Text)}, nil
	})
	h := mcp.NewStreamableHandler(srv, nil)
	ts := httptest.NewServer(h)
	tb.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
	c := &rawClient{url: ts.URL, hc: ts.Client()}
	c.connect(tb)
	return c
}

// BenchmarkToolsCall times a tools/call round trip over loopback HTTP:
// mcpush with its durable SQLite store against the Go SDK's in-memory
// StreamableHTTPHandler (SSE responses, its default, and JSON responses),
// interleaved in one run so machine load affects all alike. It reports
// each figure and mcpush's ratio to each SDK variant (target <= 1.5).
func BenchmarkToolsCall(b *testing.B) {
	ours := newMcpushServer(b)
	sdkSSE := newSDKServer(b, false)
	sdkJSON := newSDKServer(b, true)
	for _, c := range []*rawClient{ours, sdkSSE, sdkJSON} { // warm up
		for range 50 {
			c.post(b, benchCall)
		}
	}
	var tOurs, tSSE, tJSON time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		ours.post(b, benchCall)
		t1 := time.Now()
		sdkSSE.post(b, benchCall)
		t2 := time.Now()
		sdkJSON.post(b, benchCall)
		t3 := time.Now()
		tOurs += t1.Sub(t0)
		tSSE += t2.Sub(t1)
		tJSON += t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tOurs.Microseconds())/n, "mcpush-µs/call")
	b.ReportMetric(float64(tSSE.Microseconds())/n, "sdk-sse-µs/call")
	b.ReportMetric(float64(tJSON.Microseconds())/n, "sdk-json-µs/call")
	b.ReportMetric(float64(tOurs)/float64(tSSE), "ratio-vs-sdk-sse")
	b.ReportMetric(float64(tOurs)/float64(tJSON), "ratio-vs-sdk-json")
}

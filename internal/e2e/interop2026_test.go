package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// interopTopic2026 is the topic the 2026 interop tests publish events on.
const interopTopic2026 = "interop2026"

// requireInteropTS2026 returns Node 22 and test/node/interop/client2026.mjs,
// which drives @modelcontextprotocol/client 2.x.
func requireInteropTS2026(t *testing.T) (node, script string) {
	t.Helper()
	node = testenv.Node22(t)
	pkg := filepath.Join(testenv.NodeDir(t), "node_modules", "@modelcontextprotocol", "client", "package.json")
	_, err := os.Stat(pkg)
	testenv.RequireComponent(t, "@modelcontextprotocol/client (TypeScript SDK 2.x)", err)
	script = filepath.Join(testenv.RepoRoot(t), "test", "node", "interop", "client2026.mjs")
	if _, err := os.Stat(script); err != nil {
		t.Fatal(err)
	}
	return node, script
}

// waitToolsCallBackends returns the backends of the tools/call requests
// the proxy logged since mark, waiting up to 5s for n of them: the proxy
// logs a request after its response was copied, so the client may have
// its answer a moment before the line is written.
func waitToolsCallBackends(p *Proxy, mark, n int) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := toolsCallBackends(p.LinesSince(mark))
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// toolsCallBackends returns the backends the proxy sent each tools/call
// to, in order, from its access log lines.
func toolsCallBackends(lines []string) []string {
	re := regexp.MustCompile(`POST /mcp tools/call #\S+ -> (\d+):`)
	var out []string
	for _, l := range lines {
		if m := re.FindStringSubmatch(l); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// TestInteropTypeScriptClient2026 runs @modelcontextprotocol/client 2.x,
// pinned to protocol version 2026-07-28, against three processes on one
// SQLite file behind the round-robin proxy: discover (at connect), list,
// a call with progress, a listen stream that receives tools/list_changed
// for a registry change and resources/updated for an event, both
// published through sns-ingest, each exactly once, and a multi
// round-trip elicitation whose retry lands on another process than its
// first attempt.
func TestInteropTypeScriptClient2026(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping interop tests in -short mode")
	}
	node, script := requireInteropTS2026(t)
	e := startInterop(t)
	rec := newInteropRecorder()
	ts := startInteropTS(t, node, script, e.url, rec)
	t.Logf("@modelcontextprotocol/client %s on Node %s", ts.sdkVersion, ts.nodeVersion)

	e.step(t, "discover", func(t *testing.T) {
		var res struct {
			ServerInfo struct {
				Name string `json:"name"`
			} `json:"serverInfo"`
			Capabilities map[string]map[string]any `json:"capabilities"`
		}
		ts.do(t, "connect", nil, &res)
		if res.ServerInfo.Name != "mcpush" {
			t.Errorf("serverInfo %+v, want mcpush", res.ServerInfo)
		}
		interopRequireCaps(t, res.Capabilities)
	})
	e.step(t, "list", func(t *testing.T) {
		var res struct {
			Tools []string `json:"tools"`
		}
		ts.do(t, "listTools", nil, &res)
		for _, want := range append(slices.Clone(interopBuiltinTools), "test_input_required_result_elicitation", "test_tool_with_progress") {
			if !slices.Contains(res.Tools, want) {
				t.Errorf("tools/list lacks %s: %v", want, res.Tools)
			}
		}
	})
	e.step(t, "progress", func(t *testing.T) {
		var res interopToolResult
		id, done := ts.start("callTool", map[string]any{"name": "test_tool_with_progress", "progress": true})
		ts.wait(t, "callTool test_tool_with_progress", done, &res)
		p := interopProgress(rec.all(), id)
		if len(p) == 0 || res.IsError {
			t.Fatalf("progress %v, result %+v; want progress notifications and a result", p, res)
		}
		interopRequireIncreasing(t, "progress", p)
	})
	e.step(t, "listen", func(t *testing.T) {
		uri := "events://" + interopTopic2026
		var res struct {
			HonoredFilter struct {
				ToolsListChanged      bool     `json:"toolsListChanged"`
				ResourceSubscriptions []string `json:"resourceSubscriptions"`
			} `json:"honoredFilter"`
		}
		ts.do(t, "listen", map[string]any{"filter": map[string]any{"toolsListChanged": true, "resourceSubscriptions": []string{uri}}}, &res)
		if !res.HonoredFilter.ToolsListChanged || !slices.Equal(res.HonoredFilter.ResourceSubscriptions, []string{uri}) {
			t.Fatalf("honored filter %+v, want toolsListChanged and %s", res.HonoredFilter, uri)
		}
		e.publishRegistry(t, "tools", "put", map[string]any{"name": "events_recent", "description": interopToolDescription})
		rec.waitFor(t, "tools/list_changed", func(obs []interopObs) bool {
			return interopCount(obs, "notifications/tools/list_changed") >= 1
		})
		e.publishEvent(t, interopTopic2026, 1)
		obs := rec.waitFor(t, "resources/updated", func(obs []interopObs) bool {
			return interopCount(obs, "notifications/resources/updated") >= 1
		})
		if n := interopCount(obs, "notifications/tools/list_changed"); n != 1 {
			t.Errorf("%d tools/list_changed for one change, want 1", n)
		}
		for _, o := range obs {
			if o.Method == "notifications/resources/updated" && !strings.Contains(string(o.Params), uri) {
				t.Errorf("resources/updated %s, want uri %s", o.Params, uri)
			}
		}
	})
	e.step(t, "mrtr", func(t *testing.T) {
		mark := e.p.Mark()
		var res interopToolResult
		ts.do(t, "callTool", map[string]any{"name": "test_input_required_result_elicitation"}, &res)
		if len(res.Content) != 1 || res.Content[0].Text != "Hello, Ada!" {
			t.Fatalf("result %+v, want Hello, Ada!", res)
		}
		asked := 0
		for _, o := range rec.all() {
			if o.Kind == "request" && o.Method == "elicitation/create" {
				asked++
			}
		}
		backends := waitToolsCallBackends(e.p, mark, 2)
		if asked != 1 || len(backends) != 2 || backends[0] == backends[1] {
			t.Errorf("elicitations %d, tools/call backends %v; want one elicitation and the retry on another process", asked, backends)
		}
	})
	e.step(t, "close", func(t *testing.T) {
		ts.do(t, "closeListen", nil, nil)
		obs := rec.waitFor(t, "the listen stream to close", func(obs []interopObs) bool {
			return interopCount(obs, "mcpush/listen-closed") == 1
		})
		for _, o := range obs {
			if o.Method == "mcpush/listen-closed" {
				var how struct {
					How string `json:"how"`
				}
				json.Unmarshal(o.Params, &how)
				if how.How != "local" {
					t.Errorf("listen closed %q, want local", how.How)
				}
			}
		}
		if errs := interopErrors(rec.all()); len(errs) > 0 {
			t.Errorf("client errors: %v", errs)
		}
	})
}

// TestInteropGoSDK2026 runs the Go SDK client in its 2026 mode
// (ClientSessionOptions.ProtocolVersion 2026-07-28: server/discover, no
// session) against three processes behind the round-robin proxy: discover,
// list, a call with progress, its listen streams (tools/list_changed, opened
// at connect for its ToolListChangedHandler, and resources/updated, opened
// by Subscribe) fed by sns-ingest, each change once, and a multi round-trip
// elicitation whose retry lands on another process.
func TestInteropGoSDK2026(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping interop tests in -short mode")
	}
	e := startInterop(t)
	rec := newInteropRecorder()
	const topic = interopTopic2026 + "-go"
	uri := "events://" + topic
	note := func(method string) func(params any) {
		return func(params any) {
			data, _ := json.Marshal(params)
			rec.add(interopObs{Kind: "notification", Method: method, Params: data})
		}
	}
	client := gosdk.NewClient(&gosdk.Implementation{Name: "interop-go-2026", Version: "1.0.0"}, &gosdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *gosdk.ElicitRequest) (*gosdk.ElicitResult, error) {
			data, _ := json.Marshal(req.Params)
			rec.add(interopObs{Kind: "request", Method: "elicitation/create", Params: data})
			return &gosdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		ToolListChangedHandler: func(_ context.Context, req *gosdk.ToolListChangedRequest) {
			note("notifications/tools/list_changed")(req.Params)
		},
		ResourceUpdatedHandler: func(_ context.Context, req *gosdk.ResourceUpdatedNotificationRequest) {
			note("notifications/resources/updated")(req.Params)
		},
		ProgressNotificationHandler: func(_ context.Context, req *gosdk.ProgressNotificationClientRequest) {
			rec.add(interopObs{Kind: "progress", Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message})
		},
	})
	ctx := t.Context()
	var cs *gosdk.ClientSession
	t.Cleanup(func() {
		if cs != nil {
			cs.Close()
		}
	})
	e.step(t, "discover", func(t *testing.T) {
		var err error
		cs, err = client.Connect(ctx, &gosdk.StreamableClientTransport{Endpoint: e.url}, &gosdk.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatal(err)
		}
		res := cs.InitializeResult()
		if res.ProtocolVersion != "2026-07-28" || res.ServerInfo == nil || res.ServerInfo.Name != "mcpush" || cs.ID() != "" {
			t.Fatalf("connected at %q to %+v with session %q; want 2026-07-28, mcpush, no session", res.ProtocolVersion, res.ServerInfo, cs.ID())
		}
	})
	e.step(t, "list", func(t *testing.T) {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		for _, want := range append(slices.Clone(interopBuiltinTools), "test_input_required_result_elicitation") {
			if !slices.Contains(names, want) {
				t.Errorf("tools/list lacks %s: %v", want, names)
			}
		}
	})
	e.step(t, "progress", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &gosdk.CallToolParams{Name: "test_tool_with_progress", Meta: gosdk.Meta{"progressToken": "p1"}})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
		var p []float64
		for _, o := range rec.all() {
			if o.Kind == "progress" {
				p = append(p, o.Progress)
			}
		}
		if len(p) == 0 {
			t.Fatal("no progress notification")
		}
		interopRequireIncreasing(t, "progress", p)
	})
	e.step(t, "listen", func(t *testing.T) {
		if err := cs.Subscribe(ctx, &gosdk.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
		e.publishRegistry(t, "tools", "put", map[string]any{"name": "events_recent", "description": interopToolDescription + " (Go SDK 2026)"})
		rec.waitFor(t, "tools/list_changed", func(obs []interopObs) bool {
			return interopCount(obs, "notifications/tools/list_changed") >= 1
		})
		e.publishEvent(t, topic, 1)
		obs := rec.waitFor(t, "resources/updated", func(obs []interopObs) bool {
			return interopCount(obs, "notifications/resources/updated") >= 1
		})
		if n := interopCount(obs, "notifications/tools/list_changed"); n != 1 {
			t.Errorf("%d tools/list_changed for one change, want 1", n)
		}
		for _, o := range obs {
			if o.Method == "notifications/resources/updated" && !strings.Contains(string(o.Params), uri) {
				t.Errorf("resources/updated %s, want uri %s", o.Params, uri)
			}
		}
	})
	e.step(t, "mrtr", func(t *testing.T) {
		mark := e.p.Mark()
		res, err := cs.CallTool(ctx, &gosdk.CallToolParams{Name: "test_input_required_result_elicitation"})
		if err != nil {
			t.Fatal(err)
		}
		text := ""
		if len(res.Content) == 1 {
			if tc, ok := res.Content[0].(*gosdk.TextContent); ok {
				text = tc.Text
			}
		}
		backends := waitToolsCallBackends(e.p, mark, 2)
		if text != "Hello, Ada!" || len(backends) != 2 || backends[0] == backends[1] {
			t.Errorf("result %q, tools/call backends %v; want Hello, Ada! with the retry on another process", text, backends)
		}
	})
}

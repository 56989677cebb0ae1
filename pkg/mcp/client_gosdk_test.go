//lint:file-ignore SA1019 the test exercises sampling, roots and logging, deprecated in 2026-07-28 but still served by both eras

package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/mcp"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// methodCounter counts the JSON-RPC requests a client sends, by method,
// and can hold the requests of one method until released.
type methodCounter struct {
	mu     sync.Mutex
	counts map[string]int
	hold   string
	gate   chan struct{}
}

func (m *methodCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.GetBody != nil {
		body, err := req.GetBody()
		if err == nil {
			var msg struct {
				Method string `json:"method"`
			}
			json.NewDecoder(body).Decode(&msg)
			m.mu.Lock()
			if m.counts == nil {
				m.counts = map[string]int{}
			}
			m.counts[msg.Method]++
			gate := m.gate
			if msg.Method != m.hold {
				gate = nil
			}
			m.mu.Unlock()
			if gate != nil {
				<-gate
			}
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

func (m *methodCounter) count(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[method]
}

// TestClientGoSDKServer runs the client against the official Go SDK's
// server (the reference implementation, a test-only dependency) over
// Streamable HTTP: tools with progress, server-to-client requests
// (sampling, elicitation, roots) answered by the client's handlers,
// resources with subscription, prompts, logging, and a burst of 50
// tools/list_changed that coalesces into at most two re-lists.
// goSDKServer is the Go SDK's reference server with tools that report
// progress ("steps"), ask for sampling, elicitation and roots as
// server-to-client requests ("ask", 2025 era) or as multi round-trip
// input requests ("mrtr", both eras: the SDK turns them into requests for
// 2025 clients), a resource with subscriptions, and a prompt.
type goSDKServer struct {
	srv        *gosdk.Server
	url        string
	subscribed *atomic.Int32
}

// stateless serves the 2026-07-28 era as well (the SDK serves it only
// statelessly).
func newGoSDKServer(t *testing.T, stateless bool) *goSDKServer {
	t.Helper()
	var subscribed atomic.Int32
	srv := gosdk.NewServer(&gosdk.Implementation{Name: "gosdk-ref", Version: "1"}, &gosdk.ServerOptions{
		SubscribeHandler:   func(context.Context, *gosdk.SubscribeRequest) error { subscribed.Add(1); return nil },
		UnsubscribeHandler: func(context.Context, *gosdk.UnsubscribeRequest) error { subscribed.Add(-1); return nil },
	})
	gosdk.AddTool(srv, &gosdk.Tool{Name: "steps", Description: "reports progress"}, func(ctx context.Context, req *gosdk.CallToolRequest, in struct {
		N int `json:"n"`
	}) (*gosdk.CallToolResult, struct {
		Done int `json:"done"`
	}, error) {
		for i := 1; i <= in.N; i++ {
			req.Session.NotifyProgress(ctx, &gosdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: float64(in.N), Message: fmt.Sprint("step ", i)})
		}
		req.Session.Log(ctx, &gosdk.LoggingMessageParams{Level: "info", Logger: "steps", Data: "done"})
		return nil, struct {
			Done int `json:"done"`
		}{in.N}, nil
	})
	gosdk.AddTool(srv, &gosdk.Tool{Name: "ask"}, func(ctx context.Context, req *gosdk.CallToolRequest, _ struct{}) (*gosdk.CallToolResult, any, error) {
		sm, err := req.Session.CreateMessage(ctx, &gosdk.CreateMessageParams{MaxTokens: 5, Messages: []*gosdk.SamplingMessage{{Role: "user", Content: &gosdk.TextContent{Text: "hi"}}}})
		if err != nil {
			return nil, nil, err
		}
		el, err := req.Session.Elicit(ctx, &gosdk.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
		if err != nil {
			return nil, nil, err
		}
		roots, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, nil, err
		}
		text := fmt.Sprintf("%s|%s %v|%s", sm.Content.(*gosdk.TextContent).Text, el.Action, el.Content["name"], roots.Roots[0].URI)
		return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: text}}}, nil, nil
	})
	srv.AddTool(&gosdk.Tool{Name: "mrtr", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *gosdk.CallToolRequest) (*gosdk.CallToolResult, error) {
		if len(req.Params.InputResponses) == 0 {
			return &gosdk.CallToolResult{RequestState: "state-1", InputRequests: gosdk.InputRequestMap{
				"s": &gosdk.CreateMessageParams{MaxTokens: 5, Messages: []*gosdk.SamplingMessage{{Role: "user", Content: &gosdk.TextContent{Text: "hi"}}}},
				"e": &gosdk.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}},
				"r": &gosdk.ListRootsParams{},
			}}, nil
		}
		b, err := json.Marshal(req.Params.InputResponses)
		if err != nil {
			return nil, err
		}
		return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: "state=" + req.Params.RequestState + " " + string(b)}}}, nil
	})
	srv.AddResource(&gosdk.Resource{URI: "test://r", Name: "r", MIMEType: "text/plain"}, func(context.Context, *gosdk.ReadResourceRequest) (*gosdk.ReadResourceResult, error) {
		return &gosdk.ReadResourceResult{Contents: []*gosdk.ResourceContents{{URI: "test://r", MIMEType: "text/plain", Text: "hello"}}}, nil
	})
	srv.AddPrompt(&gosdk.Prompt{Name: "greet", Arguments: []*gosdk.PromptArgument{{Name: "who"}}}, func(_ context.Context, req *gosdk.GetPromptRequest) (*gosdk.GetPromptResult, error) {
		return &gosdk.GetPromptResult{Messages: []*gosdk.PromptMessage{{Role: "user", Content: &gosdk.TextContent{Text: "hello " + req.Params.Arguments["who"]}}}}, nil
	})
	ts := httptest.NewServer(gosdk.NewStreamableHTTPHandler(func(*http.Request) *gosdk.Server { return srv }, &gosdk.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(ts.Close)

	return &goSDKServer{srv: srv, url: ts.URL, subscribed: &subscribed}
}

func TestClientGoSDKServer(t *testing.T) {
	for _, tc := range []struct {
		mode mcp.ClientMode
		want string // the protocol version
	}{
		{mcp.ClientMode2025, mcp.LatestProtocolVersion},
		{mcp.ClientMode2026, "2026-07-28"},
		{mcp.ClientModeAuto, "2026-07-28"},
	} {
		t.Run(fmt.Sprintf("mode=%q", tc.mode), func(t *testing.T) { testGoSDK(t, tc.mode, tc.want) })
	}
}

func testGoSDK(t *testing.T, mode mcp.ClientMode, wantVersion string) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	g := newGoSDKServer(t, wantVersion == "2026-07-28")
	srv, subscribed := g.srv, g.subscribed
	era2026 := wantVersion == "2026-07-28"
	rt := &methodCounter{}
	var mu sync.Mutex
	var notes []string
	var relisted [][]*mcp.Tool
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpush-client", Version: "1"}, &mcp.ClientOptions{
		HTTPClient: &http.Client{Transport: rt},
		Logger:     slog.New(slog.DiscardHandler),
		Mode:       mode,
		CreateMessageHandler: func(ctx context.Context, cs *mcp.ClientSession, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: json.RawMessage(`{"type":"text","text":"sampled ` + p.Messages[0].Content.(*mcp.TextContent).Text + `"}`)}, nil
		},
		ElicitationHandler: func(ctx context.Context, cs *mcp.ClientSession, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
		},
		RootsHandler: func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ListRootsResult, error) {
			return &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///work", Name: "work"}}}, nil
		},
		ToolsChangedHandler: func(ctx context.Context, cs *mcp.ClientSession, tools []*mcp.Tool) {
			mu.Lock()
			relisted = append(relisted, tools)
			mu.Unlock()
		},
	})
	client.AddNotificationHandler("", func(ctx context.Context, cs *mcp.ClientSession, method string, params json.RawMessage) {
		mu.Lock()
		notes = append(notes, method)
		mu.Unlock()
	})
	cs, err := client.Connect(ctx, g.url)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if got := cs.InitializeResult(); got.ServerInfo == nil || got.ServerInfo.Name != "gosdk-ref" || got.ProtocolVersion != wantVersion {
		t.Errorf("initialize/discover: %+v, want version %s", got, wantVersion)
	}
	if got := rt.count("initialize"); got != 0 && era2026 || got != 1 && !era2026 {
		t.Errorf("%d initialize requests", got)
	}
	if err := cs.SetLoggingLevel(ctx, "info"); err != nil {
		t.Fatal(err)
	}

	var progress []string
	res, err := cs.CallTool(ctx, "steps", map[string]int{"n": 3}, func(p *mcp.ProgressParams) {
		progress = append(progress, fmt.Sprintf("%g/%g %s", p.Progress, p.Total, p.Message))
	})
	if err != nil || res.IsError {
		t.Fatalf("steps: %v %+v", err, res)
	}
	if diff := cmp.Diff([]string{"1/3 step 1", "2/3 step 2", "3/3 step 3"}, progress); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	if got := string(res.StructuredContent.(json.RawMessage)); got != `{"done":3}` {
		t.Errorf("structured content %s", got)
	}

	if !era2026 {
		res, err = cs.CallTool(ctx, "ask", nil, nil)
		if err != nil || res.IsError {
			t.Fatalf("ask: %v %+v", err, res)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != "sampled hi|accept ada|file:///work" {
			t.Errorf("ask = %q: the server did not get the client's answers", got)
		}
	}
	// Multi round-trip input requests: answered by the same handlers (in
	// the 2025 era the SDK turns them into server-to-client requests).
	before := rt.count("tools/call")
	res, err = cs.CallTool(ctx, "mrtr", nil, nil)
	if err != nil || res.IsError {
		t.Fatalf("mrtr: %v %+v", err, res)
	}
	got := res.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{"state=state-1", `"sampled hi"`, `"action":"accept"`, `"name":"ada"`, `"uri":"file:///work"`} {
		if !strings.Contains(got, want) {
			t.Errorf("mrtr = %q, lacks %s", got, want)
		}
	}
	if n := rt.count("tools/call") - before; era2026 && n != 2 || !era2026 && n != 1 {
		t.Errorf("mrtr took %d tools/call requests", n)
	}

	rr, err := cs.ReadResource(ctx, "test://r")
	if err != nil || rr.Contents[0].Text != "hello" {
		t.Errorf("read: %v %+v", err, rr)
	}
	if err := cs.Subscribe(ctx, "test://r"); err != nil || subscribed.Load() != 1 {
		t.Errorf("subscribe: %v (%d subscriptions)", err, subscribed.Load())
	}
	if err := srv.ResourceUpdated(ctx, &gosdk.ResourceUpdatedNotificationParams{URI: "test://r"}); err != nil {
		t.Fatal(err)
	}
	// Before unsubscribing: in the 2026 era the notification travels on
	// the listen stream that the unsubscription replaces.
	waitFor(t, "notifications/resources/updated", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(strings.Join(notes, " "), "notifications/resources/updated")
	})
	if err := cs.Unsubscribe(ctx, "test://r"); err != nil {
		t.Errorf("unsubscribe: %v", err)
	}
	// In the 2026 era a subscription lives as long as its listen stream,
	// which the server sees end a little later.
	waitFor(t, "no subscription", func() bool { return subscribed.Load() == 0 })
	gp, err := cs.GetPrompt(ctx, "greet", map[string]string{"who": "bob"})
	if err != nil || gp.Messages[0].Content.(*mcp.TextContent).Text != "hello bob" {
		t.Errorf("prompt: %v %+v", err, gp)
	}

	tools, err := cs.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A burst of list_changed while the first re-list is held: the Go SDK
	// debounces for 10ms, so adding tools 20ms apart sends one each.
	const burst = 50
	rt.mu.Lock()
	rt.hold, rt.gate = "tools/list", make(chan struct{})
	rt.mu.Unlock()
	before = rt.count("tools/list")
	countChanged := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, m := range notes {
			if m == "notifications/tools/list_changed" {
				n++
			}
		}
		return n
	}
	for i := range burst {
		srv.AddTool(&gosdk.Tool{Name: fmt.Sprint("extra", i), InputSchema: map[string]any{"type": "object"}}, func(context.Context, *gosdk.CallToolRequest) (*gosdk.CallToolResult, error) {
			return &gosdk.CallToolResult{}, nil
		})
		waitFor(t, fmt.Sprint("list_changed ", i+1), func() bool { return countChanged() == i+1 })
	}
	close(rt.gate)
	waitFor(t, "a re-list with every tool", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(relisted) > 0 && len(relisted[len(relisted)-1]) == len(tools)+burst
	})
	time.Sleep(200 * time.Millisecond)
	if n := rt.count("tools/list") - before; n < 1 || n > 2 {
		t.Errorf("%d re-lists after %d tools/list_changed, want 1 or 2", n, burst)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

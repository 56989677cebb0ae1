//lint:file-ignore SA1019 logging, deprecated from protocol version 2026-07-28, is part of the 2025-11-25 sessions tested here

package e2e

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestInteropGoSDK runs the official Go SDK client
// (github.com/modelcontextprotocol/go-sdk/mcp: Client +
// StreamableClientTransport) against three processes on one SQLite file
// behind the round-robin proxy: the same flows as
// TestInteropTypeScriptSDK, observed through the client's own handlers
// (ClientOptions.ProgressNotificationHandler, LoggingMessageHandler,
// ResourceUpdatedHandler, ToolListChangedHandler, PromptListChangedHandler).
//
// The client is pinned to 2025-11-25 (ClientSessionOptions.ProtocolVersion):
// its default, 2026-07-28, would put it in the 2026 era instead (see
// TestInteropGoSDK2026).
func TestInteropGoSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping interop tests in -short mode")
	}
	e := startInterop(t)
	rec := newInteropRecorder()
	rt := newInteropRoundTripper(rec)
	client := gosdk.NewClient(&gosdk.Implementation{Name: "interop-go", Version: "1.0.0"}, interopClientOptions(rec))
	ctx := t.Context()

	var (
		cs     *gosdk.ClientSession
		stream interopStream
	)
	t.Cleanup(func() {
		if cs != nil {
			cs.Close() // again after the close step: a no-op
		}
	})
	e.step(t, "initialize", func(t *testing.T) {
		// The gate holds the client's GET stream until the test knows
		// which process will serve it. Connect opens the stream before it
		// returns, so it runs meanwhile.
		rt.setGate(false)
		type connected struct {
			cs  *gosdk.ClientSession
			err error
		}
		done := make(chan connected, 1)
		go func() {
			cs, err := client.Connect(ctx, &gosdk.StreamableClientTransport{
				Endpoint:   e.url,
				HTTPClient: &http.Client{Transport: rt},
			}, &gosdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			done <- connected{cs, err}
		}()
		stream = e.releaseGET(t, rec, rt, 0)
		t.Logf("the client's GET stream is on process %d", stream.backend)
		select {
		case c := <-done:
			if c.err != nil {
				t.Fatalf("Connect: %v", c.err)
			}
			cs = c.cs
		case <-time.After(interopWait):
			t.Fatal("Connect did not return")
		}
		res := cs.InitializeResult()
		if res.ServerInfo == nil || res.ServerInfo.Name != "mcpush" || res.ProtocolVersion != interopProtocol || cs.ID() == "" {
			t.Fatalf("initialize result %+v, session %q; want mcpush, %s and a session", res, cs.ID(), interopProtocol)
		}
		caps := res.Capabilities
		if caps.Tools == nil || !caps.Tools.ListChanged || caps.Prompts == nil || !caps.Prompts.ListChanged ||
			caps.Resources == nil || !caps.Resources.ListChanged || !caps.Resources.Subscribe || caps.Logging == nil {
			t.Errorf("server capabilities %+v: want tools, prompts and resources listChanged, resources subscribe, logging", caps)
		}
		var handshake []string
		for _, o := range interopHTTP(rec.all(), 0) {
			handshake = append(handshake, interopStatus(o))
		}
		t.Logf("handshake: %q", handshake)

		var info struct {
			SessionID       string `json:"sessionId"`
			ProtocolVersion string `json:"protocolVersion"`
			ClientName      string `json:"clientName"`
		}
		interopCall(t, cs, &gosdk.CallToolParams{Name: "session_info"}).structured(t, &info)
		if info.SessionID != cs.ID() || info.ClientName != "interop-go" || info.ProtocolVersion != interopProtocol {
			t.Errorf("session_info = %+v; want session %s, client interop-go, %s", info, cs.ID(), interopProtocol)
		}
	})

	e.step(t, "list", func(t *testing.T) {
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
			if slices.Contains(interopBuiltinTools, tool.Name) && tool.OutputSchema == nil {
				t.Errorf("built-in tool %s has no outputSchema", tool.Name)
			}
		}
		interopRequireNames(t, "tools", names, append(slices.Clone(interopBuiltinTools), "test_tool_with_progress", "test_tool_with_logging"))

		resources, err := cs.ListResources(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		names = nil
		for _, r := range resources.Resources {
			names = append(names, r.URI)
		}
		interopRequireNames(t, "resources", names, []string{"test://static-text"})

		templates, err := cs.ListResourceTemplates(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		names = nil
		for _, r := range templates.ResourceTemplates {
			names = append(names, r.URITemplate)
		}
		interopRequireNames(t, "resource templates", names, []string{"events://{topic}"})
		interopRequireNames(t, "prompts", interopGoPromptNames(t, cs), []string{"test_simple_prompt"})
	})

	e.step(t, "progress", func(t *testing.T) {
		params := &gosdk.CallToolParams{Name: "test_tool_with_progress"}
		params.SetProgressToken(1)
		interopCall(t, cs, params)
		// The client runs notification handlers in arrival order, but
		// may return the call's result before they ran.
		obs := rec.waitFor(t, "progress 100 of test_tool_with_progress", func(obs []interopObs) bool {
			return slices.Contains(interopProgress(obs, 1), 100)
		})
		p := interopProgress(obs, 1)
		if len(p) < 2 || p[len(p)-1] != 100 {
			t.Errorf("test_tool_with_progress: progress %v; want at least two values ending with 100", p)
		}
		interopRequireIncreasing(t, "test_tool_with_progress", p)

		// events_wait reports progress while it waits; the event published
		// meanwhile ends the wait.
		params = &gosdk.CallToolParams{Name: "events_wait", Arguments: map[string]any{"topic": "waits", "timeoutSeconds": 15}}
		params.SetProgressToken(2)
		done := make(chan *interopToolResult, 1)
		go func() {
			res, err := cs.CallTool(ctx, params)
			done <- interopGoResult(res, err)
		}()
		rec.waitFor(t, "progress from events_wait", func(obs []interopObs) bool {
			return len(interopProgress(obs, 2)) > 0
		})
		e.publishEvent(t, "waits", 1)
		select {
		case res := <-done:
			interopRequireWait(t, res)
		case <-time.After(interopWait):
			t.Fatal("events_wait did not return")
		}
		interopRequireIncreasing(t, "events_wait", interopProgress(rec.all(), 2))
	})

	e.step(t, "logging", func(t *testing.T) {
		mark := len(rec.all())
		if err := cs.SetLoggingLevel(ctx, &gosdk.SetLoggingLevelParams{Level: "warning"}); err != nil {
			t.Fatal(err)
		}
		interopCall(t, cs, &gosdk.CallToolParams{Name: "test_tool_with_logging"})
		if err := cs.SetLoggingLevel(ctx, &gosdk.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
		interopCall(t, cs, &gosdk.CallToolParams{Name: "test_tool_with_logging"})
		// Handlers run in arrival order: once the second call's last
		// message was handled, anything the first call sent had been.
		obs := rec.waitFor(t, "the log messages of test_tool_with_logging", func(obs []interopObs) bool {
			return slices.Contains(interopToolLogs(obs[mark:]), "info: Tool execution completed")
		})
		interopRequireToolLogs(t, interopToolLogs(obs[mark:]))
	})

	events := 0
	e.step(t, "subscribe", func(t *testing.T) {
		if err := cs.Subscribe(ctx, &gosdk.SubscribeParams{URI: "events://orders"}); err != nil {
			t.Fatal(err)
		}
		for events < 3 {
			events++
			e.publishEvent(t, "orders", events)
		}
		interopWaitEvents(t, rec, "orders", events)
		read, err := cs.ReadResource(ctx, &gosdk.ReadResourceParams{URI: "events://orders"})
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(read)
		if err != nil {
			t.Fatal(err)
		}
		interopRequireTopicRead(t, "orders", events, data)
	})

	e.step(t, "list_changed", func(t *testing.T) {
		e.listChanged(t, rec, func(t *testing.T, change string) {
			switch change {
			case "tools put events_recent":
				tools, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				i := slices.IndexFunc(tools.Tools, func(x *gosdk.Tool) bool { return x.Name == "events_recent" })
				if i < 0 || tools.Tools[i].Description != interopToolDescription {
					t.Errorf("after the tools change, tools/list has events_recent at %d (%v); want it described %q", i, tools.Tools, interopToolDescription)
				}
			case "prompts put p1":
				interopRequireNames(t, "prompts", interopGoPromptNames(t, cs), []string{"p1"})
				got, err := cs.GetPrompt(ctx, &gosdk.GetPromptParams{Name: "p1", Arguments: map[string]string{"x": "there"}})
				if err != nil {
					t.Fatal(err)
				}
				if len(got.Messages) != 1 {
					t.Fatalf("prompts/get p1 = %d messages, want 1", len(got.Messages))
				}
				if text, ok := got.Messages[0].Content.(*gosdk.TextContent); !ok || text.Text != "hi there" {
					t.Errorf("prompts/get p1 = %#v; want hi there", got.Messages[0].Content)
				}
			case "prompts delete p1":
				if names := interopGoPromptNames(t, cs); slices.Contains(names, "p1") {
					t.Errorf("after deleting p1, prompts/list has %v", names)
				}
			}
		})
	})

	e.step(t, "resume", func(t *testing.T) {
		events, stream = e.resume(t, rec, rt, stream, "orders", events)
		interopRequireListChanged(t, rec.all(), 1, 3)
		// The session goes on.
		interopRequireSubscribed(t, interopCall(t, cs, &gosdk.CallToolParams{Name: "session_info"}))
	})

	e.step(t, "sampling", func(t *testing.T) {
		mark := len(rec.all())
		res := interopCall(t, cs, &gosdk.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": interopSamplingPrompt}})
		interopRequireSampling(t, rec, mark, res)
	})

	e.step(t, "reconnect", func(t *testing.T) {
		mark := len(rec.all())
		res := interopCall(t, cs, &gosdk.CallToolParams{Name: "test_reconnection"})
		interopRequireReconnected(t, rec, mark, res)
	})

	e.step(t, "close", func(t *testing.T) {
		mark := len(rec.all())
		id := cs.ID()
		if err := cs.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		exchanges := interopHTTP(rec.all(), mark)
		if del := slices.IndexFunc(exchanges, func(o interopObs) bool { return o.Method == http.MethodDelete }); del < 0 || exchanges[del].Status/100 != 2 {
			t.Errorf("no successful DELETE among %v", exchanges)
		}
		e.requireSessionGone(t, id)
	})
	interopRequireListChanged(t, rec.all(), 1, 3)
	interopWaitEvents(t, rec, "orders", events)
	if errs := interopErrors(rec.all()); len(errs) > 0 {
		t.Errorf("the Go SDK client logged warnings or errors:\n\t%s", strings.Join(errs, "\n\t"))
	}
	t.Logf("the client observed %d notifications and HTTP exchanges; total %v", len(rec.all()), time.Since(e.start).Round(time.Millisecond))
}

// interopClientOptions records every notification the Go SDK client's
// handlers see.
func interopClientOptions(rec *interopRecorder) *gosdk.ClientOptions {
	return &gosdk.ClientOptions{
		// sampling/createMessage from a tool: answer with the prompt echoed.
		CreateMessageHandler: func(_ context.Context, req *gosdk.CreateMessageRequest) (*gosdk.CreateMessageResult, error) {
			data, _ := json.Marshal(req.Params)
			rec.add(interopObs{Kind: "request", Method: "sampling/createMessage", Params: data})
			var prompt []string
			for _, m := range req.Params.Messages {
				if text, ok := m.Content.(*gosdk.TextContent); ok {
					prompt = append(prompt, text.Text)
				}
			}
			return &gosdk.CreateMessageResult{
				Role:       "assistant",
				Content:    &gosdk.TextContent{Text: "interop says " + strings.Join(prompt, " ")},
				Model:      "interop-model",
				StopReason: "endTurn",
			}, nil
		},
		Logger: slog.New(slog.NewTextHandler(interopLogWriter{rec}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		ProgressNotificationHandler: func(_ context.Context, req *gosdk.ProgressNotificationClientRequest) {
			call := 0
			if tok, ok := req.Params.ProgressToken.(float64); ok {
				call = int(tok)
			}
			rec.add(interopObs{Kind: "progress", Call: call, Progress: req.Params.Progress,
				Total: req.Params.Total, Message: req.Params.Message})
		},
		LoggingMessageHandler: func(_ context.Context, req *gosdk.LoggingMessageRequest) {
			rec.addNotification("notifications/message", req.Params)
		},
		ResourceUpdatedHandler: func(_ context.Context, req *gosdk.ResourceUpdatedNotificationRequest) {
			rec.addNotification("notifications/resources/updated", req.Params)
		},
		ToolListChangedHandler: func(_ context.Context, req *gosdk.ToolListChangedRequest) {
			rec.addNotification("notifications/tools/list_changed", req.Params)
		},
		PromptListChangedHandler: func(_ context.Context, req *gosdk.PromptListChangedRequest) {
			rec.addNotification("notifications/prompts/list_changed", req.Params)
		},
		ResourceListChangedHandler: func(_ context.Context, req *gosdk.ResourceListChangedRequest) {
			rec.addNotification("notifications/resources/list_changed", req.Params)
		},
	}
}

// interopLogWriter records each line the Go SDK client logs as an error
// observation.
type interopLogWriter struct{ rec *interopRecorder }

func (w interopLogWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		w.rec.add(interopObs{Kind: "error", Message: line})
	}
	return len(p), nil
}

// interopCall calls a tool, failing t on an error.
func interopCall(t *testing.T, cs *gosdk.ClientSession, params *gosdk.CallToolParams) *interopToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), interopWait)
	defer cancel()
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("tools/call %s: %v", params.Name, err)
	}
	return interopGoResult(res, nil)
}

// interopGoResult converts a Go SDK tool result to its JSON form; an
// error becomes an isError result that says so.
func interopGoResult(res *gosdk.CallToolResult, err error) *interopToolResult {
	var out interopToolResult
	if err != nil {
		out.IsError = true
		out.StructuredContent, _ = json.Marshal(err.Error())
		return &out
	}
	data, err := json.Marshal(res)
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	if err != nil {
		out.IsError = true
	}
	return &out
}

// interopGoPromptNames lists the prompts' names.
func interopGoPromptNames(t *testing.T, cs *gosdk.ClientSession) []string {
	t.Helper()
	prompts, err := cs.ListPrompts(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range prompts.Prompts {
		names = append(names, p.Name)
	}
	return names
}

// interopRoundTripper is the Go SDK client's HTTP transport: it records
// every exchange and holds back GET requests while its gate is closed. It
// is safe for concurrent use.
type interopRoundTripper struct {
	base http.RoundTripper
	rec  *interopRecorder

	mu   sync.Mutex
	gate chan struct{} // closed while the gate is open
}

func newInteropRoundTripper(rec *interopRecorder) *interopRoundTripper {
	open := make(chan struct{})
	close(open)
	return &interopRoundTripper{
		base: http.DefaultTransport.(*http.Transport).Clone(),
		rec:  rec,
		gate: open,
	}
}

// setGate implements interopGate.
func (rt *interopRoundTripper) setGate(open bool) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	select {
	case <-rt.gate: // open
		if !open {
			rt.gate = make(chan struct{})
		}
	default:
		if open {
			close(rt.gate)
		}
	}
	return nil
}

func (rt *interopRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	o := interopObs{Kind: "http", Method: req.Method, LastEventID: req.Header.Get("Last-Event-ID")}
	if req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			var msg struct {
				Method string          `json:"method"`
				ID     json.RawMessage `json:"id"`
			}
			if json.NewDecoder(body).Decode(&msg) == nil {
				o.RPC = msg.Method
				if o.RPC == "" {
					o.RPC = "response"
				}
			}
			body.Close()
		}
	}
	if req.Method == http.MethodGet {
		rt.mu.Lock()
		gate := rt.gate
		rt.mu.Unlock()
		select {
		case <-gate:
		default:
			held := o
			held.Gated = true
			rt.rec.add(held)
			select {
			case <-gate:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
	}
	resp, err := rt.base.RoundTrip(req)
	if err != nil {
		o.Error = err.Error()
	} else {
		o.Status = resp.StatusCode
	}
	rt.rec.add(o)
	return resp, err
}

var _ interopGate = (*interopRoundTripper)(nil)

// interopStatus describes an HTTP exchange for logs.
func interopStatus(o interopObs) string {
	var b strings.Builder
	b.WriteString(o.Method)
	if o.RPC != "" {
		b.WriteString(" " + o.RPC)
	}
	switch {
	case o.Gated:
		b.WriteString(": held at the gate")
	case o.Error != "":
		b.WriteString(": " + o.Error)
	default:
		b.WriteString(": " + http.StatusText(o.Status))
	}
	return b.String()
}

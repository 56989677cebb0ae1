package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// TestClientAgainstServer joins the client and mcpush's server over real
// HTTP (two server "processes" on one SQLite file): initialize, list, a
// call with structured content, a call whose tool asks for sampling and
// reports progress, a tool error, and a JSON-RPC error.
func TestClientAgainstServer(t *testing.T) {
	c := newCluster(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	logs := &testutil.LockedBuffer{}
	client := mcp.NewClient(&mcp.Implementation{Name: "client-test", Version: "1"}, &mcp.ClientOptions{
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		CreateMessageHandler: func(ctx context.Context, cs *mcp.ClientSession, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			text := p.Messages[0].Content.(*mcp.TextContent).Text
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: json.RawMessage(`{"type":"text","text":"` + strings.ToUpper(text) + `"}`)}, nil
		},
	})
	cs, err := client.Connect(ctx, c.urls[0])
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if got := cs.InitializeResult().ServerInfo.Name; got != "test" {
		t.Errorf("server name %q, want test", got)
	}
	if cs.ID() == "" {
		t.Error("no session id")
	}

	tools, err := cs.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"ask", "block", "echo", "panic"}, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}

	res, err := cs.CallTool(ctx, "echo", map[string]any{"text": "hello"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Echo   string `json:"echo"`
		Length int    `json:"length"`
	}
	if err := json.Unmarshal(res.StructuredContent.(json.RawMessage), &out); err != nil || out.Echo != "hello" || out.Length != 5 {
		t.Errorf("echo structured content %s (%v)", res.StructuredContent, err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, "hello") {
		t.Errorf("echo content %#v", res.Content)
	}

	var progress []float64
	res, err = cs.CallTool(ctx, "ask", nil, func(p *mcp.ProgressParams) { progress = append(progress, p.Progress) })
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, "HI") {
		t.Errorf("ask result %q: the sampling answer did not reach the tool", got)
	}
	if diff := cmp.Diff([]float64{1}, progress); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}

	res, err = cs.CallTool(ctx, "echo", map[string]any{"text": 5}, nil)
	if err != nil || !res.IsError {
		t.Errorf("echo with a bad argument: %v, %+v; want an isError result", err, res)
	}
	var rpcErr *mcp.Error
	if _, err := cs.CallTool(ctx, "nope", nil, nil); !errors.As(err, &rpcErr) {
		t.Errorf("unknown tool: %v, want a JSON-RPC error", err)
	}
	if err := cs.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := cs.ListTools(ctx); !errors.Is(err, mcp.ErrClientClosed) {
		t.Errorf("after Close: %v, want ErrClientClosed", err)
	}
}

// TestClientSessionNotFound: a deleted session gets ErrSessionNotFound;
// with Reconnect the client starts a new session and the call succeeds.
func TestClientSessionNotFound(t *testing.T) {
	c := newCluster(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, reconnect := range []bool{false, true} {
		client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
			Reconnect: reconnect, NoStandaloneStream: true, Logger: slog.New(slog.DiscardHandler),
		})
		cs, err := client.Connect(ctx, c.urls[0])
		if err != nil {
			t.Fatal(err)
		}
		old := cs.ID()
		deleteSession(t, c.urls[0], old)
		_, err = cs.ListTools(ctx)
		switch {
		case !reconnect && !errors.Is(err, mcp.ErrSessionNotFound):
			t.Errorf("after DELETE: %v, want ErrSessionNotFound", err)
		case reconnect && err != nil:
			t.Errorf("after DELETE with Reconnect: %v", err)
		case reconnect && cs.ID() == old:
			t.Errorf("with Reconnect the session id stayed %s", old)
		}
		cs.Close(ctx)
	}
}

func deleteSession(t *testing.T, url, id string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
}

// TestClientAutoMode: ClientModeAuto against mcpush's server ends in the
// era the server speaks: the 2026 era if it answers server/discover with
// 2026-07-28, otherwise (an error answer) the 2025 era by initialize.
// Either way the session works.
func TestClientAutoMode(t *testing.T) {
	c := newCluster(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	want := mcp.LatestProtocolVersion
	req, _ := http.NewRequest(http.MethodPost, c.urls[0], strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Result struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && slices.Contains(body.Result.SupportedVersions, "2026-07-28") {
		want = "2026-07-28"
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "auto", Version: "1"}, &mcp.ClientOptions{Mode: mcp.ClientModeAuto, Logger: slog.New(slog.DiscardHandler)})
	cs, err := client.Connect(ctx, c.urls[0])
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if got := cs.InitializeResult().ProtocolVersion; got != want {
		t.Errorf("auto mode chose %s, want %s (server/discover answered %d %v)", got, want, resp.StatusCode, body.Result.SupportedVersions)
	}
	res, err := cs.CallTool(ctx, "echo", map[string]any{"text": "auto"}, nil)
	if err != nil || res.IsError {
		t.Errorf("echo: %v %+v", err, res)
	}
}

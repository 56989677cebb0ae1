package mcp_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

const v2026 = mcp.ProtocolVersion2026

// proc2026 is one "process" of a 2026-era test deployment: its own
// Server, store handle and HTTP server on a shared SQLite file.
type proc2026 struct {
	url   string
	store mcp.Store
	h     *mcp.StreamableHandler
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newProc2026 starts a process on dbPath with the given requestState
// keys and clock (nil: real time). Its tools: "ask" asks for a name
// (elicitation) with signed state and greets; "echo" echoes.
func newProc2026(t *testing.T, dbPath string, keys []string, now func() time.Time) *proc2026 {
	t.Helper()
	store, err := sqlitestore.New(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	so := &mcp.ServerOptions{PollInterval: 20 * time.Millisecond, RegistryRefresh: 20 * time.Millisecond, DynamicRegistries: true, Now: now}
	for _, k := range keys {
		so.StateKeys = append(so.StateKeys, []byte(k))
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, store, so)
	srv.AddTool(&mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ask := map[string]*mcp.InputRequest{"name": {Method: "elicitation/create", Params: &mcp.ElicitParams{Message: "Name?", RequestedSchema: map[string]any{"type": "object"}}}}
		if string(req.State) != "asked" {
			return nil, &mcp.InputRequired{Requests: ask, State: []byte("asked")}
		}
		var r mcp.ElicitResult
		if err := json.Unmarshal(req.InputResponses["name"], &r); err != nil {
			return nil, &mcp.InputRequired{Requests: ask, State: []byte("asked")}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("hello %v", r.Content["name"])}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "quiz"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var answers []any
		for _, q := range []string{"first?", "second?"} {
			r, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: q, RequestedSchema: map[string]any{"type": "object"}})
			if err != nil {
				return nil, fmt.Errorf("asking %s: %w", q, err)
			}
			answers = append(answers, r.Content["a"])
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(answers)}}}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "typed-ask"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		r, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object"}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(r.Content["a"])}}}, nil, nil
	})
	srv.AddTool(&mcp.Tool{Name: "hoard"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// A state too large to come back in a retry.
		ask := map[string]*mcp.InputRequest{"name": {Method: "elicitation/create", Params: &mcp.ElicitParams{Message: "Name?", RequestedSchema: map[string]any{"type": "object"}}}}
		return nil, &mcp.InputRequired{Requests: ask, State: bytes.Repeat([]byte("s"), 70<<10)}
	})
	srv.AddTool(&mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		req.Session.Log(ctx, "info", "", "echoing")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, KeepAlive: time.Hour})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); ts.Close(); store.Close() })
	return &proc2026{url: ts.URL, store: store, h: h}
}

// meta2026 is a 2026-era _meta with the given capabilities.
func meta2026(caps string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v2026 + `","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
}

// headers2026 are the headers a well-behaved 2026 client sends.
func headers2026(method, name string) []string {
	h := []string{"Mcp-Protocol-Version", v2026, "Mcp-Method", method}
	if name != "" {
		h = append(h, "Mcp-Name", name)
	}
	return h
}

// rpcReply is a decoded JSON-RPC response.
type rpcReply struct {
	ID     json.RawMessage `json:"id"`
	Result map[string]any  `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func call2026(t *testing.T, url, body string, hdr ...string) (int, *rpcReply) {
	t.Helper()
	return call2026With(t, nil, url, body, hdr...)
}

// call2026With is call2026 through client (nil: the default).
func call2026With(t *testing.T, client *http.Client, url, body string, hdr ...string) (int, *rpcReply) {
	t.Helper()
	resp, b := testutil.PostRead(t, client, url, "", body, hdr...)
	var r rpcReply
	text := string(b)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The response is the last data line.
		lines := strings.Split(strings.TrimSpace(text), "\n")
		text = strings.TrimPrefix(lines[len(lines)-1], "data: ")
	}
	if text != "" {
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			t.Fatalf("response %q: %v", b, err)
		}
	}
	return resp.StatusCode, &r
}

func Test2026BadInput(t *testing.T) {
	dir := t.TempDir()
	p := newProc2026(t, filepath.Join(dir, "db"), []string{"test-key-0123456789abcdef0123456789"}, nil)
	c := &cluster{dbPath: filepath.Join(dir, "db")}
	listCall := `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{` + meta2026(`{}`) + `}}`
	echoCall := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{},` + meta2026(`{}`) + `}}`
	tests := []struct {
		name       string
		body       string
		hdr        []string
		wantStatus int
		wantCode   int
		wantIn     string // in the error message or data
	}{
		{"no version header", listCall, []string{"Mcp-Method", "tools/list"}, 400, mcp.CodeHeaderMismatch, "MCP-Protocol-Version header is required"},
		{"2025 header, 2026 _meta", listCall, []string{"Mcp-Protocol-Version", "2025-11-25", "Mcp-Method", "tools/list"}, 400, mcp.CodeHeaderMismatch, "MCP-Protocol-Version 2025-11-25 differs from _meta protocolVersion 2026-07-28"},
		{"header contradicts _meta", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			headers2026("tools/list", ""), 400, mcp.CodeHeaderMismatch, "differs from _meta"},
		{"unknown version", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			[]string{"Mcp-Protocol-Version", "2099-01-01", "Mcp-Method", "tools/list"}, 400, mcp.CodeUnsupportedProtocolVersion, `"supported":["2026-07-28","2025-11-25"`},
		{"no _meta", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`, headers2026("tools/list", ""), 400, mcp.CodeInvalidParams, "clientCapabilities"},
		{"unknown logLevel", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"}}}`,
			headers2026("tools/list", ""), 400, mcp.CodeInvalidParams, "unknown logLevel loud"},
		{"no Mcp-Method", listCall, []string{"Mcp-Protocol-Version", v2026}, 400, mcp.CodeHeaderMismatch, "Mcp-Method header is required"},
		{"Mcp-Method contradicts body", listCall, headers2026("prompts/list", ""), 400, mcp.CodeHeaderMismatch, "differs from the body's method"},
		{"no Mcp-Name", echoCall, headers2026("tools/call", ""), 400, mcp.CodeHeaderMismatch, "needs the Mcp-Name header"},
		{"Mcp-Name contradicts body", echoCall, headers2026("tools/call", "ask"), 400, mcp.CodeHeaderMismatch, "Mcp-Name differs"},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"nope/nope","params":{` + meta2026(`{}`) + `}}`, headers2026("nope/nope", ""), 404, mcp.CodeMethodNotFound, "nope/nope"},
		{"removed method", `{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{"uri":"x://y",` + meta2026(`{}`) + `}}`, headers2026("resources/subscribe", ""), 404, mcp.CodeMethodNotFound, "removed"},
		{"batch", `[` + listCall + `]`, headers2026("tools/list", ""), 400, mcp.CodeInvalidRequest, "batches"},
		{"listen filter names an unknown type", `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"everything":true},` + meta2026(`{}`) + `}}`,
			headers2026("subscriptions/listen", ""), 200, mcp.CodeInvalidParams, `unknown field "everything"`},
		{"listen without a filter", `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{` + meta2026(`{}`) + `}}`,
			headers2026("subscriptions/listen", ""), 200, mcp.CodeInvalidParams, "needs a notifications object"},
		{"listen to too many resources", `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":[` + strings.Repeat(`"a://b",`, mcp.MaxListenSubscriptions) + `"a://c"]},` + meta2026(`{}`) + `}}`,
			headers2026("subscriptions/listen", ""), 200, mcp.CodeInvalidParams, "at most"},
		{"forged requestState", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask","requestState":"eyJ2IjoxfQ.AAAA","inputResponses":{"name":{"action":"accept","content":{"name":"x"}}},` + meta2026(`{"elicitation":{}}`) + `}}`,
			headers2026("tools/call", "ask"), 200, mcp.CodeInvalidParams, "signature does not verify"},
		{"malformed requestState", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask","requestState":"garbage",` + meta2026(`{"elicitation":{}}`) + `}}`,
			headers2026("tools/call", "ask"), 200, mcp.CodeInvalidParams, "malformed"},
		{"inputResponses not an object", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask","inputResponses":{"name":5},` + meta2026(`{"elicitation":{}}`) + `}}`,
			headers2026("tools/call", "ask"), 200, mcp.CodeInvalidParams, "must be an object"},
		{"oversized clientCapabilities on a listen", `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + meta2026(`{"x":"`+strings.Repeat("a", 70<<10)+`"}`) + `}}`,
			headers2026("subscriptions/listen", ""), 400, mcp.CodeInvalidParams, "limit 65536"},
		{"input request for an undeclared capability", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask",` + meta2026(`{}`) + `}}`,
			headers2026("tools/call", "ask"), 400, mcp.CodeMissingRequiredClientCapability, `"requiredCapabilities":{"elicitation":{}}`},
	}
	before := c.rowCount(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, r := call2026(t, p.url, tt.body, tt.hdr...)
			if status != tt.wantStatus || r.Error == nil || r.Error.Code != tt.wantCode {
				t.Fatalf("got HTTP %d, reply %+v; want HTTP %d with code %d", status, r, tt.wantStatus, tt.wantCode)
			}
			if msg := r.Error.Message + " " + string(r.Error.Data); !strings.Contains(msg, tt.wantIn) {
				t.Errorf("error %q lacks %q", msg, tt.wantIn)
			}
			if tt.body[0] == '{' && string(r.ID) != "7" && string(r.ID) != "8" {
				t.Errorf("error id %s, want the request's", r.ID)
			}
		})
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(m, p.url, nil)
		req.Header.Set("Mcp-Protocol-Version", v2026)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s in the 2026 era: HTTP %d, want 405", m, resp.StatusCode)
		}
	}
	if after := c.rowCount(t); after != before {
		t.Errorf("bad input changed the store: %d rows before, %d after", before, after)
	}
}

func Test2026Results(t *testing.T) {
	p := newProc2026(t, filepath.Join(t.TempDir(), "db"), nil, nil)
	status, r := call2026(t, p.url, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta2026(`{}`)+`}}`, headers2026("server/discover", "")...)
	if status != 200 || r.Error != nil {
		t.Fatalf("discover: HTTP %d %+v", status, r)
	}
	want := map[string]any{"resultType": "complete", "ttlMs": float64(0), "cacheScope": "private",
		"supportedVersions": []any{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"},
		"_meta":             map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "test", "version": "1"}}}
	got := map[string]any{}
	for k := range want {
		got[k] = r.Result[k]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("discover result (-want +got):\n%s", diff)
	}
	status, r = call2026(t, p.url, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+meta2026(`{}`)+`}}`, headers2026("tools/list", "")...)
	if status != 200 || r.Result["resultType"] != "complete" || r.Result["ttlMs"] != float64(0) || r.Result["cacheScope"] != "private" {
		t.Errorf("tools/list: HTTP %d %+v, want resultType, ttlMs and cacheScope", status, r)
	}
	// No notifications/message without a logLevel, and some with one.
	for _, tt := range []struct {
		meta    string
		wantLog bool
	}{
		{meta2026(`{}`), false},
		{`"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v2026 + `","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"debug"}`, true},
	} {
		_, b := testutil.PostRead(t, nil, p.url, "", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{},`+tt.meta+`}}`, headers2026("tools/call", "echo")...)
		if got := strings.Contains(string(b), "notifications/message"); got != tt.wantLog {
			t.Errorf("meta %s: log sent %v, want %v:\n%s", tt.meta, got, tt.wantLog, b)
		}
	}
	status, r = call2026(t, p.url, `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"nope://x",`+meta2026(`{}`)+`}}`, headers2026("resources/read", "nope://x")...)
	if status != 200 || r.Error == nil || r.Error.Code != mcp.CodeInvalidParams || !strings.Contains(string(r.Error.Data), "nope://x") {
		t.Errorf("unknown resource: HTTP %d %+v, want -32602 naming the uri", status, r)
	}
}

// mrtrAsk is the first attempt of the "ask" tool.
const mrtrAsk = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{},` + `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`

func mrtrRetry(state string) string {
	return `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{},"requestState":` + fmt.Sprintf("%q", state) +
		`,"inputResponses":{"name":{"action":"accept","content":{"name":"Ada"}}},` + meta2026(`{"elicitation":{}}`) + `}}`
}

// askState runs the first attempt on url and returns its requestState.
func askState(t *testing.T, url string) string {
	t.Helper()
	status, r := call2026(t, url, mrtrAsk, headers2026("tools/call", "ask")...)
	state, _ := r.Result["requestState"].(string)
	if status != 200 || r.Result["resultType"] != "input_required" || state == "" || r.Result["inputRequests"] == nil {
		t.Fatalf("first attempt: HTTP %d %+v, want input_required with inputRequests and requestState", status, r)
	}
	return state
}

func TestMRTRAcrossProcessesAndKeyRotation(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	const oldKey, newKey = "old-key-0123456789abcdef0123456789", "new-key-0123456789abcdef0123456789"
	clock := &fakeClock{now: time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)}
	a := newProc2026(t, db, []string{oldKey}, clock.Now)         // before rotation
	b := newProc2026(t, db, []string{newKey, oldKey}, clock.Now) // during: new signs, old verifies
	c := newProc2026(t, db, []string{newKey}, clock.Now)         // after: old retired

	greet := func(url, state string) (int, *rpcReply) {
		return call2026(t, url, mrtrRetry(state), headers2026("tools/call", "ask")...)
	}
	// Issued by one process, completed by another.
	state := askState(t, a.url)
	if status, r := greet(b.url, state); status != 200 || r.Error != nil || !strings.Contains(fmt.Sprint(r.Result["content"]), "hello Ada") {
		t.Fatalf("retry on another process: HTTP %d %+v, want the greeting", status, r)
	}
	// A state signed with the retired key is rejected.
	if _, r := greet(c.url, state); r.Error == nil || r.Error.Code != mcp.CodeInvalidParams || !strings.Contains(r.Error.Message, "signature") {
		t.Errorf("retired key: %+v, want invalid params (signature)", r)
	}
	// Tampered: one changed byte of the payload.
	payload, sig, _ := strings.Cut(askState(t, b.url), ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	tampered := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"m":"tools/call"`, `"m":"tools/calm"`, 1))) + "." + sig
	if _, r := greet(c.url, tampered); r.Error == nil || r.Error.Code != mcp.CodeInvalidParams {
		t.Errorf("tampered state: %+v, want invalid params", r)
	}
	// Expired: valid until StateTTL (10 minutes by default).
	state = askState(t, c.url)
	clock.Add(11 * time.Minute)
	if _, r := greet(c.url, state); r.Error == nil || !strings.Contains(r.Error.Message, "expired") {
		t.Errorf("expired state: %+v, want an expiry error", r)
	}
	// Bound to its request: not valid for another tool.
	state = askState(t, c.url)
	body := strings.Replace(mrtrRetry(state), `"name":"ask"`, `"name":"echo"`, 1)
	if _, r := call2026(t, c.url, body, headers2026("tools/call", "echo")...); r.Error == nil || !strings.Contains(r.Error.Message, "another request") {
		t.Errorf("state of another tool: %+v, want a mismatch error", r)
	}
}

// listenStream opens subscriptions/listen on url and returns its
// decoded messages as they arrive.
func listenStream(t *testing.T, ctx context.Context, url, filter string) <-chan map[string]any {
	t.Helper()
	return listenStreamID(t, ctx, url, "L1", filter)
}

// listenStreamID is listenStream with the listen request's id.
func listenStreamID(t *testing.T, ctx context.Context, url, id, filter string) <-chan map[string]any {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"` + id + `","method":"subscriptions/listen","params":{"notifications":` + filter + `,` + meta2026(`{}`) + `}}`
	return streamMessages(t, postListen(t, ctx, url, body))
}

// postListen posts the subscriptions/listen request body to url with the
// 2026 headers and any extra header pairs (name, value, ...).
func postListen(t *testing.T, ctx context.Context, url, body string, header ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for h := append(headers2026("subscriptions/listen", ""), header...); len(h) > 1; h = h[2:] {
		req.Header.Set(h[0], h[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// streamMessages sends the JSON messages of resp's SSE body on the
// returned channel, closed when the body ends.
func streamMessages(t *testing.T, resp *http.Response) <-chan map[string]any {
	out := make(chan map[string]any, 100)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		readEvents(t, resp.Body, func(ev sseEvent) bool {
			var m map[string]any
			if json.Unmarshal([]byte(ev.data), &m) == nil {
				out <- m
			}
			return false
		})
	}()
	return out
}

func next(t *testing.T, ch <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("listen stream ended early")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message on the listen stream within 10s")
	}
	return nil
}

func TestListenAcrossProcesses(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	a := newProc2026(t, db, nil, nil)
	b := newProc2026(t, db, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tools := listenStream(t, ctx, a.url, `{"toolsListChanged":true,"resourceSubscriptions":["events://orders"]}`)
	prompts := listenStream(t, ctx, a.url, `{"promptsListChanged":true}`)
	for _, ch := range []<-chan map[string]any{tools, prompts} {
		if m := next(t, ch); m["method"] != "notifications/subscriptions/acknowledged" {
			t.Fatalf("first message %v, want the acknowledgement", m)
		}
	}
	// A tools registry change written by another process (as sns-ingest
	// would): one tools/list_changed on the tools stream, tagged; nothing
	// on the prompts stream.
	item := json.RawMessage(`{"name":"echo","description":"changed"}`)
	if _, _, err := b.store.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, map[string]json.RawMessage{"echo": item}, "m1"); err != nil {
		t.Fatal(err)
	}
	m := next(t, tools)
	meta, _ := m["params"].(map[string]any)["_meta"].(map[string]any)
	if m["method"] != "notifications/tools/list_changed" || meta["io.modelcontextprotocol/subscriptionId"] != "L1" {
		t.Fatalf("got %v, want tools/list_changed tagged with subscription L1", m)
	}
	// The same content again is no change; a prompts change is one.
	b.store.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, map[string]json.RawMessage{"echo": item}, "m2")
	b.store.ApplyRegistry(ctx, notify.RegistryPrompts, notify.OpPut, map[string]json.RawMessage{"p": json.RawMessage(`{"name":"p"}`)}, "m3")
	if m := next(t, prompts); m["method"] != "notifications/prompts/list_changed" {
		t.Fatalf("prompts stream got %v, want prompts/list_changed", m)
	}
	// Shutdown ends both with the empty listen result, and nothing else
	// came on the tools stream meanwhile.
	go a.h.Close()
	if m := next(t, tools); m["id"] != "L1" || m["result"].(map[string]any)["resultType"] != "complete" {
		t.Fatalf("tools stream got %v, want the empty listen result", m)
	}
}

// deadlineServer serves MCP on the store at dbPath with every request under
// a deadline 1.5 s after it arrives (a Lambda invocation's) and a
// StreamMargin of 1 s. It returns the URL and the store.
func deadlineServer(t *testing.T, dbPath string) (string, mcp.Store) {
	t.Helper()
	store, err := sqlitestore.New(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, &mcp.ServerOptions{DynamicRegistries: true, PollInterval: 20 * time.Millisecond})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{StreamMargin: time.Second})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 1500*time.Millisecond)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(func() { h.Close(); ts.Close(); store.Close() })
	return ts.URL, store
}

// TestListenEndsBeforeDeadline checks that a listen stream served under a
// request deadline (a Lambda invocation's) ends with the empty listen
// result StreamMargin before it: a stream cut off by the deadline would
// end without one.
func TestListenEndsBeforeDeadline(t *testing.T) {
	url, _ := deadlineServer(t, filepath.Join(t.TempDir(), "db"))
	msgs := listenStream(t, t.Context(), url, `{"toolsListChanged":true}`)
	if m := next(t, msgs); m["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v, want the acknowledgement", m)
	}
	m := next(t, msgs)
	res, _ := m["result"].(map[string]any)
	meta, _ := res["_meta"].(map[string]any)
	if m["id"] != "L1" || res["resultType"] != "complete" || meta["io.modelcontextprotocol/subscriptionId"] != "L1" {
		t.Fatalf("got %v, want the empty listen result for L1", m)
	}
	if _, open := <-msgs; open {
		t.Error("the stream went on after the listen result")
	}
}

// TestListenCancelledAcrossProcesses checks that notifications/cancelled
// for a listen request ends its stream, without a response, on the
// process that serves it when another process receives the cancellation,
// and that it ends no stream of another id.
func TestListenCancelledAcrossProcesses(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	a := newProc2026(t, db, nil, nil)
	b := newProc2026(t, db, nil, nil)
	ctx := t.Context()
	cancelled := listenStreamID(t, ctx, a.url, "C1", `{"toolsListChanged":true}`)
	other := listenStreamID(t, ctx, a.url, "C2", `{"toolsListChanged":true}`)
	for _, ch := range []<-chan map[string]any{cancelled, other} {
		if m := next(t, ch); m["method"] != "notifications/subscriptions/acknowledged" {
			t.Fatalf("first message %v, want the acknowledgement", m)
		}
	}
	resp, _ := testutil.PostRead(t, nil, b.url, "", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"C1",`+meta2026(`{}`)+`}}`,
		headers2026("notifications/cancelled", "")...)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: HTTP %d, want 202", resp.StatusCode)
	}
	select {
	case m, open := <-cancelled:
		if open {
			t.Fatalf("cancelled stream got %v, want its end without a response", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled listen stream is still open after 10s")
	}
	// The other stream still gets a change.
	b.store.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, map[string]json.RawMessage{"echo": json.RawMessage(`{"name":"echo","description":"x"}`)}, "c1")
	if m := next(t, other); m["method"] != "notifications/tools/list_changed" {
		t.Fatalf("other stream got %v, want tools/list_changed", m)
	}
}

// TestElicitBecomesMRTR checks that a handler written for sessions (two
// Elicit calls) works unchanged in the 2026 era: each Elicit becomes an
// input_required round, the first answer travels in the signed state, and
// every round lands on another process.
func TestElicitBecomesMRTR(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	const key = "shared-key-0123456789abcdef0123456789"
	procs := []*proc2026{newProc2026(t, db, []string{key}, nil), newProc2026(t, db, []string{key}, nil), newProc2026(t, db, []string{key}, nil)}
	caps := `{"elicitation":{}}`
	body := func(id int, extra string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"quiz","arguments":{},%s%s}}`, id, extra, meta2026(caps))
	}
	round := func(p *proc2026, b string) *rpcReply {
		t.Helper()
		status, r := call2026(t, p.url, b, headers2026("tools/call", "quiz")...)
		if status != 200 || r.Error != nil {
			t.Fatalf("HTTP %d %+v", status, r)
		}
		return r
	}
	asks := func(r *rpcReply) (string, string) {
		t.Helper()
		reqs, _ := r.Result["inputRequests"].(map[string]any)
		state, _ := r.Result["requestState"].(string)
		if r.Result["resultType"] != "input_required" || len(reqs) != 1 || state == "" {
			t.Fatalf("result %+v, want input_required with one input request and a state", r.Result)
		}
		for k, v := range reqs {
			if v.(map[string]any)["method"] != "elicitation/create" {
				t.Fatalf("input request %v, want elicitation/create", v)
			}
			return k, state
		}
		return "", ""
	}
	k1, s1 := asks(round(procs[0], body(1, "")))
	k2, s2 := asks(round(procs[1], body(2, fmt.Sprintf(`"requestState":%q,"inputResponses":{%q:{"action":"accept","content":{"a":"x"}}},`, s1, k1))))
	if k2 == k1 {
		t.Fatalf("second question has the first's key %q", k1)
	}
	r := round(procs[2], body(3, fmt.Sprintf(`"requestState":%q,"inputResponses":{%q:{"action":"accept","content":{"a":"y"}}},`, s2, k2)))
	if r.Result["resultType"] != "complete" || !strings.Contains(fmt.Sprint(r.Result["content"]), "[x y]") {
		t.Fatalf("last round %+v, want the complete result with both answers", r.Result)
	}
}

// TestTypedToolAsks checks that a typed tool's Elicit in the 2026 era
// becomes an input_required result, not a tool error.
func TestTypedToolAsks(t *testing.T) {
	p := newProc2026(t, filepath.Join(t.TempDir(), "db"), nil, nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"typed-ask","arguments":{},` + meta2026(`{"elicitation":{}}`) + `}}`
	status, r := call2026(t, p.url, body, headers2026("tools/call", "typed-ask")...)
	if status != 200 || r.Result["resultType"] != "input_required" || r.Result["inputRequests"] == nil {
		t.Fatalf("HTTP %d %+v, want input_required", status, r)
	}
}

// TestListenBackingSession checks the life of a listen stream's backing
// session: the stream extends its expiry while it runs, and a stream whose
// backing session is gone (expired, deleted) ends with the empty listen
// result instead of polling a missing session for ever.
func TestListenBackingSession(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	a := newProc2026(t, db, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := listenStream(t, ctx, a.url, `{"toolsListChanged":true}`)
	if m := next(t, ch); m["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v, want the acknowledgement", m)
	}
	sqlDB, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	var id string
	if err := sqlDB.QueryRow(`SELECT id FROM sessions WHERE id LIKE 'listen-%'`).Scan(&id); err != nil {
		t.Fatalf("the listen stream's backing session: %v", err)
	}
	if err := a.store.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if m := next(t, ch); m["id"] != "L1" || m["result"].(map[string]any)["resultType"] != "complete" {
		t.Fatalf("after its backing session went, the stream got %v, want the empty listen result", m)
	}
}

// TestStateTooLarge: a handler whose requestState could not come back in a
// retry gets an error at once, never an input_required result that the
// retry would fail on.
func TestStateTooLarge(t *testing.T) {
	p := newProc2026(t, filepath.Join(t.TempDir(), "db"), []string{"test-key-0123456789abcdef0123456789"}, nil)
	body := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"hoard","arguments":{},` + meta2026(`{"elicitation":{}}`) + `}}`
	_, r := call2026(t, p.url, body, headers2026("tools/call", "hoard")...)
	if r.Error == nil {
		t.Fatalf("reply %+v, want an error: the requestState would be over the bound a retry may send", r)
	}
}

// TestClientListenRefused: in the 2026 era a Subscribe whose listen
// filter the server refuses (a URI over its bound) returns that error,
// rather than waiting for an acknowledgement that never comes, and the
// earlier listen stream with the earlier subscriptions goes on.
func TestClientListenRefused(t *testing.T) {
	p := newProc2026(t, filepath.Join(t.TempDir(), "db"), nil, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "refused", Version: "1"}, &mcp.ClientOptions{
		Mode:   mcp.ClientMode2026,
		Logger: slog.New(slog.DiscardHandler),
	})
	cs, err := client.Connect(ctx, p.url)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	if err := cs.Subscribe(ctx, "events://fine"); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	err = cs.Subscribe(ctx, "events://"+strings.Repeat("x", 4096))
	var rpcErr *mcp.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeInvalidParams {
		t.Fatalf("Subscribe to an over-long URI: %v, want the server's -32602", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Subscribe waited for the test's deadline")
	}
}

// parkedListen opens a listen stream with id and filter at url (a
// deadlineServer) and waits for the server to end it at the deadline,
// which parks it.
func parkedListen(t *testing.T, ctx context.Context, url, id, filter string) {
	t.Helper()
	ch := listenStreamID(t, ctx, url, id, filter)
	if m := next(t, ch); m["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v, want the acknowledgement", m)
	}
	if m := next(t, ch); m["id"] != id || m["result"] == nil {
		t.Fatalf("got %v, want the empty listen result at the deadline", m)
	}
}

// TestListenAdoptsParked: a listen stream that the server ends at the
// request's deadline is parked, and the client's next listen with the same
// filter, on another process, adopts it: a change made between the two
// streams reaches the new one (tagged with its id), where a fresh stream
// would have missed it. A listen with another filter adopts nothing. A
// stream adopted and parked again is adopted again.
func TestListenAdoptsParked(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	url, store := deadlineServer(t, db)
	b := newProc2026(t, db, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const filter = `{"toolsListChanged":true}`

	parkedListen(t, ctx, url, "L1", filter)
	// Between the streams: a tools change, and a listen with another
	// filter, which must not take the parked stream.
	item := json.RawMessage(`{"name":"echo","description":"changed between streams"}`)
	if _, _, err := b.store.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, map[string]json.RawMessage{"echo": item}, "gap"); err != nil {
		t.Fatal(err)
	}
	other := listenStreamID(t, ctx, b.url, "P1", `{"promptsListChanged":true}`)
	if m := next(t, other); m["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v, want the acknowledgement", m)
	}
	second := listenStreamID(t, ctx, b.url, "L2", filter)
	if m := next(t, second); m["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v, want the acknowledgement", m)
	}
	m := next(t, second)
	meta, _ := m["params"].(map[string]any)["_meta"].(map[string]any)
	if m["method"] != "notifications/tools/list_changed" || meta["io.modelcontextprotocol/subscriptionId"] != "L2" {
		t.Fatalf("the adopting stream got %v, want the tools/list_changed from between the streams, tagged L2", m)
	}
	select {
	case m := <-other:
		t.Errorf("the stream with another filter got %v", m)
	case <-time.After(200 * time.Millisecond):
	}
	// Two streams open, two backing sessions: the parked one was taken
	// over, not copied.
	sqlDB, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	var n int
	if err := sqlDB.QueryRow(`SELECT count(*) FROM sessions WHERE id LIKE 'listen-%' AND expires_at > ?`, time.Now().UnixNano()).Scan(&n); err != nil || n != 2 {
		t.Errorf("%d live backing sessions (%v), want 2", n, err)
	}

	// Parked again (the process shuts down) and adopted again.
	closed := make(chan struct{})
	go func() { b.h.Close(); close(closed) }()
	if m := next(t, second); m["id"] != "L2" || m["result"] == nil {
		t.Fatalf("got %v, want the empty listen result on shutdown", m)
	}
	item = json.RawMessage(`{"name":"echo","description":"changed again"}`)
	if _, _, err := store.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, map[string]json.RawMessage{"echo": item}, "gap2"); err != nil {
		t.Fatal(err)
	}
	third := listenStreamID(t, ctx, url, "L3", filter)
	if m := next(t, third); m["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v, want the acknowledgement", m)
	}
	if m := next(t, third); m["method"] != "notifications/tools/list_changed" {
		t.Fatalf("the stream adopting a second time got %v, want the tools/list_changed from between the streams", m)
	}

	// Cancellations of the adopted stream, sent to another process: one
	// naming a request that is not a listen stream, and one naming the
	// ended stream that it was adopted from, write nothing and end
	// nothing; one naming its own request ends it.
	c := newProc2026(t, db, nil, nil)
	cancelReq := func(id string) {
		t.Helper()
		resp, _ := testutil.PostRead(t, nil, c.url, "", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"`+id+`",`+meta2026(`{}`)+`}}`,
			headers2026("notifications/cancelled", "")...)
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("notifications/cancelled %s: HTTP %d, want 202", id, resp.StatusCode)
		}
	}
	// The shutdown's own store writes (its liveness record) are done
	// before the rows are counted.
	<-closed
	before := storeRows(t, sqlDB)
	cancelReq("not-a-listen")
	cancelReq("L2")
	if after := storeRows(t, sqlDB); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("store rows %v after cancelling other requests, %v before", after, before)
	}
	item = json.RawMessage(`{"name":"echo","description":"after the stale cancellations"}`)
	if _, _, err := store.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, map[string]json.RawMessage{"echo": item}, "gap3"); err != nil {
		t.Fatal(err)
	}
	if m := next(t, third); m["method"] != "notifications/tools/list_changed" {
		t.Fatalf("after cancellations of other requests the adopted stream got %v, want tools/list_changed", m)
	}
	cancelReq("L3")
	select {
	case m, open := <-third:
		if open {
			t.Fatalf("the cancelled adopted stream got %v, want its end without a response", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled adopted stream is still open after 10s")
	}
}

// TestListenAdoptRace: two listens with the filter of one parked stream,
// at once on two processes: one adopts it (and gets the change made while
// it was parked), the other opens a fresh stream (and does not); the
// parked stream is not shared.
func TestListenAdoptRace(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	url, store := deadlineServer(t, db)
	a := newProc2026(t, db, nil, nil)
	b := newProc2026(t, db, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const filter = `{"toolsListChanged":true}`
	parkedListen(t, ctx, url, "L1", filter)
	item := json.RawMessage(`{"name":"echo","description":"changed while parked"}`)
	if _, _, err := store.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, map[string]json.RawMessage{"echo": item}, "parked"); err != nil {
		t.Fatal(err)
	}
	streams := make([]<-chan map[string]any, 2)
	var wg sync.WaitGroup
	for i, u := range []string{a.url, b.url} {
		wg.Go(func() { streams[i] = listenStreamID(t, ctx, u, fmt.Sprintf("R%d", i), filter) })
	}
	wg.Wait()
	got := 0
	for i, ch := range streams {
		if m := next(t, ch); m["method"] != "notifications/subscriptions/acknowledged" {
			t.Fatalf("stream %d: first message %v, want the acknowledgement", i, m)
		}
		select {
		case m := <-ch:
			if m["method"] != "notifications/tools/list_changed" {
				t.Fatalf("stream %d got %v", i, m)
			}
			got++
		case <-time.After(2 * time.Second):
		}
	}
	if got != 1 {
		t.Errorf("%d of the two streams got the change made while the stream was parked, want 1 (the adopter)", got)
	}
}

// TestClientListenNotAcknowledged: in the 2026 era a Subscribe whose
// listen the server acknowledges without the URI (a server without the
// resources capability drops every resource subscription) returns
// mcp.ErrNotAcknowledged instead of succeeding with no updates ever to
// come, and the session forgets the URI: its next listen (here reopened
// by SetLoggingLevel) no longer asks for it. A server with the resource
// acknowledges the same kind of Subscribe.
func TestClientListenNotAcknowledged(t *testing.T) {
	st, err := sqlitestore.New(filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var listens []string // the bodies of the listen requests, in order
	connect := func(srv *mcp.Server) *mcp.ClientSession {
		h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Mcp-Method") == "subscriptions/listen" {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				listens = append(listens, string(b))
				mu.Unlock()
				r.Body = io.NopCloser(bytes.NewReader(b))
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(func() { ts.Close(); h.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "unacked", Version: "1"}, &mcp.ClientOptions{
			Mode: mcp.ClientMode2026, Logger: slog.New(slog.DiscardHandler)}).Connect(ctx, ts.URL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close(context.Background()) })
		return cs
	}
	lastListen := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(listens) == 0 {
			return ""
		}
		return listens[len(listens)-1]
	}

	// Tools only: no resources capability.
	bare := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, st, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	bare.AddTool(&mcp.Tool{Name: "noop"}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	const nowhere = "file:///nowhere.txt"
	cs := connect(bare)
	if err := cs.Subscribe(ctx, nowhere); !errors.Is(err, mcp.ErrNotAcknowledged) {
		t.Fatalf("Subscribe on a server without resources: %v, want mcp.ErrNotAcknowledged", err)
	}
	if !strings.Contains(lastListen(), nowhere) {
		t.Fatalf("the Subscribe's listen %q does not ask for %s", lastListen(), nowhere)
	}
	if err := cs.SetLoggingLevel(ctx, "info"); err != nil {
		t.Fatal(err)
	}
	if l := lastListen(); !strings.Contains(l, `"info"`) || strings.Contains(l, nowhere) {
		t.Errorf("the next listen %q asks for %s again (or is not the one SetLoggingLevel opened)", l, nowhere)
	}

	// A server with the resource acknowledges it.
	served := mcp.NewServer(&mcp.Implementation{Name: "served", Version: "1"}, st, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	served.AddResource(&mcp.Resource{URI: "file:///here.txt", Name: "here"}, func(context.Context, *mcp.ServerRequest[*mcp.ReadResourceParams]) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	if err := connect(served).Subscribe(ctx, "file:///here.txt"); err != nil {
		t.Fatalf("Subscribe to a served resource: %v", err)
	}
}

// TestClientListenAckWithoutGrant: what a 2026-era Subscribe makes of an
// acknowledgement of another server's making (everything else is served by
// a real mcpush server): one with no notifications object says nothing of
// what it grants and is taken at its word (nil); one whose notifications
// grant no resource subscription is mcp.ErrNotAcknowledged.
func TestClientListenAckWithoutGrant(t *testing.T) {
	st, err := sqlitestore.New(filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "acks", Version: "1"}, st, &mcp.ServerOptions{DynamicRegistries: true, Logger: slog.New(slog.DiscardHandler)})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
	defer h.Close()
	for _, tc := range []struct {
		name, notifications string // "": no notifications member
		want                error
	}{
		{"no notifications object", "", nil},
		{"grants none", `,"notifications":{"toolsListChanged":true}`, mcp.ErrNotAcknowledged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Mcp-Method") != "subscriptions/listen" {
					h.ServeHTTP(w, r)
					return
				}
				var m struct {
					ID json.RawMessage `json:"id"`
				}
				_ = json.NewDecoder(r.Body).Decode(&m)
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":%s}%s}}\n\n", m.ID, tc.notifications)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}))
			t.Cleanup(ts.Close)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "acks", Version: "1"}, &mcp.ClientOptions{
				Mode: mcp.ClientMode2026, Logger: slog.New(slog.DiscardHandler)}).Connect(ctx, ts.URL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close(context.Background()) })
			err = cs.Subscribe(ctx, "file:///x.txt")
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Subscribe: %v, want %v", err, tc.want)
			}
		})
	}
}

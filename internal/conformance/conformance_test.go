package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// newServers serves the fixtures the way functions/mcp does with
// MCPUSH_FIXTURES=conformance: n Servers, each with its own handle on one
// real SQLite store file, as n processes would be. It returns their
// endpoint URLs.
func newServers(t *testing.T, n int) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	var urls []string
	for range n {
		store, err := sqlitestore.New(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		srv := mcp.NewServer(&mcp.Implementation{Name: "mcpush-conformance-test", Version: "test"}, store, &mcp.ServerOptions{
			Logger:            slog.New(slog.DiscardHandler),
			CompletionHandler: Complete,
		})
		Register(srv, store)
		h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
		mux := http.NewServeMux()
		mux.Handle("/mcp", h)
		ts := httptest.NewServer(mux)
		t.Cleanup(ts.Close)
		t.Cleanup(h.Close) // runs first: ends open streams so ts.Close need not wait
		urls = append(urls, ts.URL+"/mcp")
	}
	return urls
}

// forEachClusterSize runs f as a subtest on one server and on two that
// share a store, where the client's HTTP requests alternate between them:
// stateful fixtures (server-to-client requests, streams resumed, progress)
// must work whichever process serves each request.
func forEachClusterSize(t *testing.T, f func(t *testing.T, n int)) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("servers=%d", n), func(t *testing.T) { f(t, n) })
	}
}

// newServer serves the fixtures from one Server.
func newServer(t *testing.T) []string {
	t.Helper()
	return newServers(t, 1)
}

// message is a JSON-RPC message as the client sees it.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *mcp.Error      `json:"error,omitempty"`
}

// httpClient bounds every exchange, so that a response that never comes
// fails the test instead of hanging it.
var httpClient = &http.Client{Timeout: 20 * time.Second}

// maxReconnects is how often one request's stream may be resumed.
const maxReconnects = 3

// client is a raw Streamable HTTP client: it speaks JSON-RPC over POST,
// reads JSON or SSE responses, answers server-to-client requests with
// answer, and resumes a closed stream with GET and Last-Event-ID.
type client struct {
	t         *testing.T
	urls      []string // HTTP requests go to each in turn
	sent      int
	sessionID string
	nextID    int
	// answer returns the result of a server-to-client request.
	answer func(method string, params json.RawMessage) any
	// reconnects counts streams resumed with Last-Event-ID.
	reconnects int
}

// connect initializes a session with the given client capabilities.
func connect(t *testing.T, urls []string, caps map[string]any) *client {
	t.Helper()
	c := &client{t: t, urls: urls}
	resp := c.post(map[string]any{
		"jsonrpc": "2.0", "id": 0, "method": "initialize",
		"params": map[string]any{
			"protocolVersion": "2025-11-25",
			"capabilities":    caps,
			"clientInfo":      map[string]any{"name": "conformance-test", "version": "1"},
		},
	})
	msgs := c.read(resp, json.RawMessage("0"), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: HTTP %d", resp.StatusCode)
	}
	var res struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	c.decode(msgs[len(msgs)-1], &res)
	for _, want := range []string{"tools", "resources", "prompts", "logging", "completions"} {
		if res.Capabilities[want] == nil {
			t.Errorf("initialize: capability %q not declared", want)
		}
	}
	c.sessionID = resp.Header.Get("Mcp-Session-Id")
	if c.sessionID == "" {
		t.Fatal("initialize: no Mcp-Session-Id header")
	}
	resp = c.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d, want 202", resp.StatusCode)
	}
	return c
}

func (c *client) send(method string, body any) *http.Response {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.nextURL(), r)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", c.sessionID)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// nextURL is the server the next HTTP request goes to: round robin.
func (c *client) nextURL() string {
	u := c.urls[c.sent%len(c.urls)]
	c.sent++
	return u
}

func (c *client) post(body any) *http.Response {
	c.t.Helper()
	return c.send(http.MethodPost, body)
}

// request sends a request and returns every message received up to and
// including its response, which is last.
func (c *client) request(method string, params any) []*message {
	c.t.Helper()
	c.nextID++
	id, _ := json.Marshal(c.nextID)
	resp := c.post(map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": method, "params": params})
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.t.Fatalf("%s: HTTP %d: %s", method, resp.StatusCode, b)
	}
	return c.read(resp, id, nil)
}

// call sends a request and decodes its result into result, failing the
// test on a JSON-RPC error. It returns the messages sent before the
// response.
func (c *client) call(method string, params, result any) []*message {
	c.t.Helper()
	msgs := c.request(method, params)
	resp := msgs[len(msgs)-1]
	if resp.Error != nil {
		c.t.Fatalf("%s: %v", method, resp.Error)
	}
	c.decode(resp, result)
	return msgs[:len(msgs)-1]
}

func (c *client) decode(m *message, v any) {
	c.t.Helper()
	if err := json.Unmarshal(m.Result, v); err != nil {
		c.t.Fatalf("decoding result %s: %v", m.Result, err)
	}
}

// read reads resp (JSON, or SSE resumed as often as the server closes it)
// until the response with id, answering server requests on the way.
func (c *client) read(resp *http.Response, id json.RawMessage, msgs []*message) []*message {
	c.t.Helper()
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m message
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			c.t.Fatalf("decoding JSON response: %v", err)
		}
		return append(msgs, &m)
	}
	var lastID, data string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id:"):
			lastID = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		case line == "" && strings.TrimSpace(data) != "":
			var m message
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				c.t.Fatalf("decoding SSE event %q: %v", data, err)
			}
			data = ""
			msgs = append(msgs, &m)
			switch {
			case m.Method != "" && m.ID != nil:
				c.reply(&m)
			case m.Method == "" && bytes.Equal(m.ID, id):
				return msgs
			}
		case line == "":
			data = ""
		}
	}
	if err := sc.Err(); err != nil {
		c.t.Fatalf("reading the SSE stream of request %s: %v", id, err)
	}
	if lastID == "" {
		c.t.Fatalf("SSE stream ended without the response to request %s and without an event id to resume from", id)
	}
	if c.reconnects == maxReconnects {
		c.t.Fatalf("SSE stream of request %s closed %d times without its response", id, c.reconnects+1)
	}
	// The server closed the stream before the response (SEP-1699):
	// resume it.
	c.reconnects++
	req, err := http.NewRequest(http.MethodGet, c.nextURL(), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.sessionID)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", lastID)
	next, err := httpClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if next.StatusCode != http.StatusOK {
		c.t.Fatalf("resuming after %s: HTTP %d", lastID, next.StatusCode)
	}
	return c.read(next, id, msgs)
}

// reply answers a server-to-client request.
func (c *client) reply(m *message) {
	c.t.Helper()
	out := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	if c.answer == nil {
		out["error"] = map[string]any{"code": mcp.CodeMethodNotFound, "message": "no handler for " + m.Method}
	} else {
		out["result"] = c.answer(m.Method, m.Params)
	}
	resp := c.post(out)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("answering %s: HTTP %d, want 202", m.Method, resp.StatusCode)
	}
}

func jsonRaw(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonValue turns v into generic JSON values (maps, slices, float64...),
// for comparisons.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal(jsonRaw(t, v), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

var fixtureTools = []string{
	"confirm_delete",
	"failing_job",
	"greet",
	"json_schema_2020_12_tool",
	"multi_input",
	"protocol_error_job",
	"slow_compute",
	"test_audio_content",
	"test_custom_headers",
	"test_elicitation",
	"test_elicitation_sep1034_defaults",
	"test_elicitation_sep1330_enums",
	"test_embedded_resource",
	"test_error_handling",
	"test_image_content",
	"test_input_required_result_capabilities",
	"test_input_required_result_elicitation",
	"test_input_required_result_list_roots",
	"test_input_required_result_multi_round",
	"test_input_required_result_multiple_inputs",
	"test_input_required_result_request_state",
	"test_input_required_result_sampling",
	"test_input_required_result_tampered_state",
	"test_logging_tool",
	"test_missing_capability",
	"test_multiple_content_types",
	"test_reconnection",
	"test_sampling",
	"test_simple_text",
	"test_streaming_elicitation",
	"test_tool_with_logging",
	"test_tool_with_progress",
	"test_tool_with_task",
	"test_trigger_prompt_change",
	"test_trigger_tool_change",
}

// taskTools are the fixtures that run as tasks, with their task support.
var taskTools = map[string]string{
	"slow_compute": "optional", "protocol_error_job": "optional", "confirm_delete": "optional", "multi_input": "optional",
	"failing_job": "required", "test_tool_with_task": "required",
}

func TestToolsList(t *testing.T) {
	c := connect(t, newServer(t), nil)
	var res struct {
		Tools []struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			InputSchema map[string]any `json:"inputSchema"`
			Execution   *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	c.call("tools/list", nil, &res)
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("tool %s: no description", tool.Name)
		}
		if tool.InputSchema["type"] != "object" {
			t.Errorf("tool %s: inputSchema type is %v, want object", tool.Name, tool.InputSchema["type"])
		}
		var schema jsonschema.Schema
		if err := json.Unmarshal(jsonRaw(t, tool.InputSchema), &schema); err != nil {
			t.Errorf("tool %s: inputSchema is not a JSON Schema: %v", tool.Name, err)
		} else if _, err := schema.Resolve(nil); err != nil {
			t.Errorf("tool %s: inputSchema does not resolve: %v", tool.Name, err)
		}
		support := ""
		if tool.Execution != nil {
			support = tool.Execution.TaskSupport
		}
		if want := taskTools[tool.Name]; support != want {
			t.Errorf("tool %s: execution.taskSupport %q, want %q", tool.Name, support, want)
		}
		switch tool.Name {
		case "greet", "slow_compute", "confirm_delete", "test_custom_headers":
			// Arguments of their own, checked by the scenarios.
		case "json_schema_2020_12_tool":
			if diff := cmp.Diff(jsonValue(t, json2020Schema()), jsonValue(t, tool.InputSchema)); diff != "" {
				t.Errorf("json_schema_2020_12_tool inputSchema mismatch (-want +got):\n%s", diff)
			}
		case "test_sampling", "test_elicitation":
			arg := map[string]string{"test_sampling": "prompt", "test_elicitation": "message"}[tool.Name]
			props, _ := tool.InputSchema["properties"].(map[string]any)
			if p, _ := props[arg].(map[string]any); p["type"] != "string" || p["description"] == "" {
				t.Errorf("tool %s: property %s is %v, want a described string", tool.Name, arg, props[arg])
			}
			if diff := cmp.Diff([]any{arg}, tool.InputSchema["required"]); diff != "" {
				t.Errorf("tool %s: required mismatch (-want +got):\n%s", tool.Name, diff)
			}
		default:
			if diff := cmp.Diff(map[string]any{"type": "object", "properties": map[string]any{}}, tool.InputSchema); diff != "" {
				t.Errorf("tool %s: inputSchema mismatch (-want +got):\n%s", tool.Name, diff)
			}
		}
	}
	sort.Strings(names)
	if diff := cmp.Diff(fixtureTools, names); diff != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", diff)
	}
}

func TestToolsCall(t *testing.T) {
	c := connect(t, newServer(t), nil)
	image := map[string]any{"type": "image", "data": testImageBase64, "mimeType": "image/png"}
	tests := []struct {
		name string
		args any
		want string // the result as JSON
	}{
		{"test_simple_text", nil, `{"content":[{"type":"text","text":"This is a simple text response for testing."}]}`},
		{"test_image_content", map[string]any{}, `{"content":[` + jsonText(image) + `]}`},
		{"test_audio_content", map[string]any{}, `{"content":[{"type":"audio","data":"` + testAudioBase64 + `","mimeType":"audio/wav"}]}`},
		{"test_embedded_resource", map[string]any{}, `{"content":[{"type":"resource","resource":{"uri":"test://embedded-resource","mimeType":"text/plain","text":"This is an embedded resource content."}}]}`},
		{"test_multiple_content_types", map[string]any{}, `{"content":[
			{"type":"text","text":"Multiple content types test:"},
			` + jsonText(image) + `,
			{"type":"resource","resource":{"uri":"test://mixed-content-resource","mimeType":"application/json","text":"{\"test\":\"data\",\"value\":123}"}}]}`},
		{"test_error_handling", map[string]any{}, `{"isError":true,"content":[{"type":"text","text":"This tool intentionally returns an error for testing"}]}`},
		{"json_schema_2020_12_tool", map[string]any{"name": "Ada", "address": map[string]any{"city": "London", "zip": "N1"}, "email": "a@b"},
			`{"content":[{"type":"text","text":"JSON Schema 2020-12 tool called with: {\"name\":\"Ada\",\"address\":{\"city\":\"London\"}}"}]}`},
		{"json_schema_2020_12_tool", nil, `{"content":[{"type":"text","text":"JSON Schema 2020-12 tool called with: {}"}]}`},
		// Without a progress token the tool just runs; its text is the
		// token, 0 when there is none.
		{"test_tool_with_progress", map[string]any{}, `{"content":[{"type":"text","text":"0"}]}`},
	}
	for _, tt := range tests {
		params := map[string]any{"name": tt.name}
		if tt.args != nil {
			params["arguments"] = tt.args
		}
		var got any
		c.call("tools/call", params, &got)
		var want any
		if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
			t.Fatalf("%s: bad want: %v", tt.name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("tools/call %s %v mismatch (-want +got):\n%s", tt.name, tt.args, diff)
		}
	}
}

// A session without the sampling or elicitation capability gets a text
// saying so, as from the reference server, not an error.
func TestToolsCallUnsupportedByClient(t *testing.T) {
	c := connect(t, newServer(t), nil)
	tests := []struct {
		tool, arg, wantPrefix string
	}{
		{"test_sampling", "prompt", "Sampling not supported or error: "},
		{"test_elicitation", "message", "Elicitation not supported or error: "},
		{"test_elicitation_sep1034_defaults", "", "Elicitation not supported or error: "},
		{"test_elicitation_sep1330_enums", "", "Elicitation not supported or error: "},
	}
	for _, tt := range tests {
		params := map[string]any{"name": tt.tool}
		if tt.arg != "" {
			params["arguments"] = map[string]any{tt.arg: "hi"}
		}
		var res struct {
			IsError bool              `json:"isError"`
			Content []mcp.TextContent `json:"content"`
		}
		c.call("tools/call", params, &res)
		if res.IsError || len(res.Content) != 1 || !strings.HasPrefix(res.Content[0].Text, tt.wantPrefix) {
			t.Errorf("%s: got %+v, want one text starting %q", tt.tool, res, tt.wantPrefix)
		}
	}
}

func TestToolsCallInvalidArguments(t *testing.T) {
	c := connect(t, newServer(t), map[string]any{"sampling": map[string]any{}})
	for _, args := range []any{map[string]any{}, map[string]any{"prompt": 3}} {
		var res struct {
			IsError bool `json:"isError"`
		}
		c.call("tools/call", map[string]any{"name": "test_sampling", "arguments": args}, &res)
		if !res.IsError {
			t.Errorf("test_sampling %v: isError not set", args)
		}
	}
}

func notificationsOf(t *testing.T, msgs []*message, method string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range msgs {
		if m.Method == method {
			var p map[string]any
			if err := json.Unmarshal(m.Params, &p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

func TestToolWithLogging(t *testing.T) {
	forEachClusterSize(t, func(t *testing.T, n int) {
		c := connect(t, newServers(t, n), nil)
		c.call("logging/setLevel", map[string]any{"level": "debug"}, new(any))
		var res any
		msgs := c.call("tools/call", map[string]any{"name": "test_tool_with_logging", "arguments": map[string]any{}}, &res)
		want := []map[string]any{
			{"level": "info", "data": "Tool execution started"},
			{"level": "info", "data": "Tool processing data"},
			{"level": "info", "data": "Tool execution completed"},
		}
		if diff := cmp.Diff(want, notificationsOf(t, msgs, "notifications/message")); diff != "" {
			t.Errorf("log notifications mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(jsonValue(t, text("Tool with logging executed successfully")), res); diff != "" {
			t.Errorf("result mismatch (-want +got):\n%s", diff)
		}

		// A level above info silences them.
		c.call("logging/setLevel", map[string]any{"level": "warning"}, new(any))
		msgs = c.call("tools/call", map[string]any{"name": "test_tool_with_logging"}, &res)
		if got := notificationsOf(t, msgs, "notifications/message"); len(got) != 0 {
			t.Errorf("at level warning got log notifications %v", got)
		}
	})
}

func TestToolWithProgress(t *testing.T) {
	forEachClusterSize(t, func(t *testing.T, n int) {
		c := connect(t, newServers(t, n), nil)
		for _, token := range []any{"progress-test-1", 7} {
			var res any
			msgs := c.call("tools/call", map[string]any{
				"name":      "test_tool_with_progress",
				"arguments": map[string]any{},
				"_meta":     map[string]any{"progressToken": token},
			}, &res)
			tok := jsonValue(t, token)
			want := []map[string]any{
				{"progressToken": tok, "progress": 0.0, "total": 100.0, "message": "Completed step 0 of 100"},
				{"progressToken": tok, "progress": 50.0, "total": 100.0, "message": "Completed step 50 of 100"},
				{"progressToken": tok, "progress": 100.0, "total": 100.0, "message": "Completed step 100 of 100"},
			}
			// The suite asks for at least three, in increasing order.
			if diff := cmp.Diff(want, notificationsOf(t, msgs, "notifications/progress")); diff != "" {
				t.Errorf("token %v: progress notifications mismatch (-want +got):\n%s", token, diff)
			}
			if diff := cmp.Diff(jsonValue(t, text(progressTokenText(tok))), res); diff != "" {
				t.Errorf("token %v: result mismatch (-want +got):\n%s", token, diff)
			}
		}
	})
}

func TestSamplingAndElicitation(t *testing.T) {
	forEachClusterSize(t, func(t *testing.T, n int) {
		c := connect(t, newServers(t, n), map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}})
		var asked []*message
		c.answer = func(method string, params json.RawMessage) any {
			asked = append(asked, &message{Method: method, Params: params})
			switch method {
			case "sampling/createMessage":
				return map[string]any{
					"role":       "assistant",
					"content":    map[string]any{"type": "text", "text": "This is a test response from the client"},
					"model":      "test-model",
					"stopReason": "endTurn",
				}
			case "elicitation/create":
				return map[string]any{"action": "accept", "content": map[string]any{"username": "testuser", "email": "test@example.com"}}
			}
			return nil
		}
		tests := []struct {
			tool       string
			args       map[string]any
			wantMethod string
			wantParams string // the server's request params as JSON
			wantText   string
		}{
			{
				"test_sampling", map[string]any{"prompt": "Test prompt for sampling"},
				"sampling/createMessage",
				`{"messages":[{"role":"user","content":{"type":"text","text":"Test prompt for sampling"}}],"maxTokens":100}`,
				"LLM response: This is a test response from the client",
			},
			{
				"test_elicitation", map[string]any{"message": "Please provide your information"},
				"elicitation/create",
				`{"message":"Please provide your information","requestedSchema":{"type":"object","properties":{"response":{"type":"string","description":"User's response"}},"required":["response"]}}`,
				`User response: action=accept, content={"email":"test@example.com","username":"testuser"}`,
			},
			{
				"test_elicitation_sep1034_defaults", nil,
				"elicitation/create",
				`{"message":"Please review and update the form fields with defaults","requestedSchema":{"type":"object","properties":{
					"name":{"type":"string","description":"User name","default":"John Doe"},
					"age":{"type":"integer","description":"User age","default":30},
					"score":{"type":"number","description":"User score","default":95.5},
					"status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},
					"verified":{"type":"boolean","description":"Verification status","default":true}},"required":[]}}`,
				`Elicitation completed: action=accept, content={"email":"test@example.com","username":"testuser"}`,
			},
			{
				"test_elicitation_sep1330_enums", nil,
				"elicitation/create",
				`{"message":"Please select options from the enum fields","requestedSchema":{"type":"object","properties":{
					"untitledSingle":{"type":"string","description":"Select one option","enum":["option1","option2","option3"]},
					"titledSingle":{"type":"string","description":"Select one option with titles","oneOf":[
						{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},
					"legacyEnum":{"type":"string","description":"Select one option (legacy)","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},
					"untitledMulti":{"type":"array","description":"Select multiple options","minItems":1,"maxItems":3,"items":{"type":"string","enum":["option1","option2","option3"]}},
					"titledMulti":{"type":"array","description":"Select multiple options with titles","minItems":1,"maxItems":3,"items":{"anyOf":[
						{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}},
					"required":[]}}`,
				`Elicitation completed: action=accept, content={"email":"test@example.com","username":"testuser"}`,
			},
		}
		for _, tt := range tests {
			asked = nil
			params := map[string]any{"name": tt.tool}
			if tt.args != nil {
				params["arguments"] = tt.args
			}
			var res any
			c.call("tools/call", params, &res)
			if diff := cmp.Diff(jsonValue(t, text(tt.wantText)), res); diff != "" {
				t.Errorf("%s: result mismatch (-want +got):\n%s", tt.tool, diff)
			}
			if len(asked) != 1 || asked[0].Method != tt.wantMethod {
				t.Errorf("%s: server asked %v, want one %s", tt.tool, asked, tt.wantMethod)
				continue
			}
			var want, got any
			if err := json.Unmarshal([]byte(tt.wantParams), &want); err != nil {
				t.Fatalf("%s: bad wantParams: %v", tt.tool, err)
			}
			if err := json.Unmarshal(asked[0].Params, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: %s params mismatch (-want +got):\n%s", tt.tool, tt.wantMethod, diff)
			}
		}
	})
}

// TestReconnection checks SEP-1699 polling: test_reconnection closes its
// SSE stream mid-call, and the client gets the result by resuming the
// stream with Last-Event-ID (from the other server, when there are two).
func TestReconnection(t *testing.T) {
	forEachClusterSize(t, func(t *testing.T, n int) {
		c := connect(t, newServers(t, n), nil)
		var res any
		c.call("tools/call", map[string]any{"name": "test_reconnection", "arguments": map[string]any{}}, &res)
		if c.reconnects != 1 {
			t.Errorf("client resumed the stream %d times, want 1", c.reconnects)
		}
		want := text("Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.")
		if diff := cmp.Diff(jsonValue(t, want), res); diff != "" {
			t.Errorf("result mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestResources(t *testing.T) {
	c := connect(t, newServer(t), nil)
	var list struct {
		Resources []map[string]any `json:"resources"`
	}
	c.call("resources/list", nil, &list)
	wantList := []map[string]any{
		{"uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource", "description": "A static binary resource (image) for testing", "mimeType": "image/png"},
		{"uri": "test://static-text", "name": "static-text", "title": "Static Text Resource", "description": "A static text resource for testing", "mimeType": "text/plain"},
		{"uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource", "description": "A resource that auto-updates every 3 seconds", "mimeType": "text/plain"},
	}
	if diff := cmp.Diff(wantList, list.Resources); diff != "" {
		t.Errorf("resources/list mismatch (-want +got):\n%s", diff)
	}
	var templates struct {
		ResourceTemplates []map[string]any `json:"resourceTemplates"`
	}
	c.call("resources/templates/list", nil, &templates)
	wantTemplates := []map[string]any{
		{"uriTemplate": "test://template/{id}/data", "name": "template", "title": "Resource Template", "description": "A resource template with parameter substitution", "mimeType": "application/json"},
	}
	if diff := cmp.Diff(wantTemplates, templates.ResourceTemplates); diff != "" {
		t.Errorf("resources/templates/list mismatch (-want +got):\n%s", diff)
	}

	tests := []struct {
		uri  string
		want map[string]any
	}{
		{"test://static-text", map[string]any{"uri": "test://static-text", "mimeType": "text/plain", "text": "This is the content of the static text resource."}},
		{"test://static-binary", map[string]any{"uri": "test://static-binary", "mimeType": "image/png", "blob": testImageBase64}},
		{"test://watched-resource", map[string]any{"uri": "test://watched-resource", "mimeType": "text/plain", "text": "Watched resource content"}},
		{"test://template/123/data", map[string]any{"uri": "test://template/123/data", "mimeType": "application/json", "text": `{"id":"123","templateTest":true,"data":"Data for ID: 123"}`}},
		{"test://template/a&b/data", map[string]any{"uri": "test://template/a&b/data", "mimeType": "application/json", "text": `{"id":"a&b","templateTest":true,"data":"Data for ID: a&b"}`}},
	}
	for _, tt := range tests {
		var res struct {
			Contents []map[string]any `json:"contents"`
		}
		c.call("resources/read", map[string]any{"uri": tt.uri}, &res)
		if diff := cmp.Diff([]map[string]any{tt.want}, res.Contents); diff != "" {
			t.Errorf("resources/read %s mismatch (-want +got):\n%s", tt.uri, diff)
		}
	}

	// Subscriptions to the watched resource are accepted.
	for _, method := range []string{"resources/subscribe", "resources/unsubscribe"} {
		var res map[string]any
		c.call(method, map[string]any{"uri": "test://watched-resource"}, &res)
		if len(res) != 0 {
			t.Errorf("%s: got %v, want {}", method, res)
		}
	}

	for _, uri := range []string{"test://nothing", "test://template/1/2/data"} {
		msgs := c.request("resources/read", map[string]any{"uri": uri})
		if e := msgs[len(msgs)-1].Error; e == nil || e.Code != mcp.CodeResourceNotFound {
			t.Errorf("resources/read %s: error %v, want code %d", uri, e, mcp.CodeResourceNotFound)
		}
	}
}

func TestPrompts(t *testing.T) {
	c := connect(t, newServer(t), nil)
	var list struct {
		Prompts []map[string]any `json:"prompts"`
	}
	c.call("prompts/list", nil, &list)
	wantList := []map[string]any{
		{"name": "test_input_required_result_prompt", "description": "A prompt that asks for context with an input_required result"},
		{"name": "test_prompt_with_arguments", "title": "Prompt With Arguments", "description": "A prompt with required arguments", "arguments": []any{
			map[string]any{"name": "arg1", "description": "First test argument", "required": true},
			map[string]any{"name": "arg2", "description": "Second test argument", "required": true},
		}},
		{"name": "test_prompt_with_embedded_resource", "title": "Prompt With Embedded Resource", "description": "A prompt that includes an embedded resource", "arguments": []any{
			map[string]any{"name": "resourceUri", "description": "URI of the resource to embed", "required": true},
		}},
		{"name": "test_prompt_with_image", "title": "Prompt With Image", "description": "A prompt that includes image content"},
		{"name": "test_simple_prompt", "title": "Simple Test Prompt", "description": "A simple prompt without arguments"},
	}
	if diff := cmp.Diff(wantList, list.Prompts); diff != "" {
		t.Errorf("prompts/list mismatch (-want +got):\n%s", diff)
	}

	tests := []struct {
		name string
		args map[string]string
		want string // messages as JSON
	}{
		{"test_simple_prompt", nil, `[{"role":"user","content":{"type":"text","text":"This is a simple prompt for testing."}}]`},
		{"test_prompt_with_arguments", map[string]string{"arg1": "hello", "arg2": "world"},
			`[{"role":"user","content":{"type":"text","text":"Prompt with arguments: arg1='hello', arg2='world'"}}]`},
		{"test_prompt_with_embedded_resource", map[string]string{"resourceUri": "test://example-resource"},
			`[{"role":"user","content":{"type":"resource","resource":{"uri":"test://example-resource","mimeType":"text/plain","text":"Embedded resource content for testing."}}},
			  {"role":"user","content":{"type":"text","text":"Please process the embedded resource above."}}]`},
		{"test_prompt_with_image", nil,
			`[{"role":"user","content":{"type":"image","data":"` + testImageBase64 + `","mimeType":"image/png"}},
			  {"role":"user","content":{"type":"text","text":"Please analyze the image above."}}]`},
	}
	for _, tt := range tests {
		params := map[string]any{"name": tt.name}
		if tt.args != nil {
			params["arguments"] = tt.args
		}
		var res struct {
			Messages any `json:"messages"`
		}
		c.call("prompts/get", params, &res)
		var want any
		if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
			t.Fatalf("%s: bad want: %v", tt.name, err)
		}
		if diff := cmp.Diff(want, res.Messages); diff != "" {
			t.Errorf("prompts/get %s mismatch (-want +got):\n%s", tt.name, diff)
		}
	}

	msgs := c.request("prompts/get", map[string]any{"name": "test_prompt_with_arguments", "arguments": map[string]string{"arg1": "x"}})
	if e := msgs[len(msgs)-1].Error; e == nil || e.Code != mcp.CodeInvalidParams {
		t.Errorf("prompts/get without arg2: error %v, want code %d", e, mcp.CodeInvalidParams)
	}
}

func TestComplete(t *testing.T) {
	c := connect(t, newServer(t), nil)
	tests := []struct {
		ref      map[string]any
		arg      string
		value    string
		want     []string
		wantCode int // a JSON-RPC error code, or 0
	}{
		// The suite's request.
		{map[string]any{"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "arg1", "test", []string{}, 0},
		{map[string]any{"type": "ref/prompt", "name": "test_prompt_with_embedded_resource"}, "resourceUri", "test://static", []string{"test://static-text", "test://static-binary"}, 0},
		{map[string]any{"type": "ref/prompt", "name": "test_prompt_with_embedded_resource"}, "resourceUri", "", resourceURIs, 0},
		{map[string]any{"type": "ref/prompt", "name": "test_prompt_with_embedded_resource"}, "resourceUri", "file:", []string{}, 0},
		{map[string]any{"type": "ref/resource", "uri": "test://template/{id}/data"}, "id", "1", []string{}, 0},
		{map[string]any{"type": "ref/prompt", "name": "no_such_prompt"}, "arg1", "", nil, mcp.CodeInvalidParams},
		{map[string]any{"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "arg3", "", nil, mcp.CodeInvalidParams},
		{map[string]any{"type": "ref/resource", "uri": "test://static-text"}, "id", "", nil, mcp.CodeInvalidParams},
		{map[string]any{"type": "ref/tool", "name": "test_simple_text"}, "x", "", nil, mcp.CodeInvalidParams},
	}
	for _, tt := range tests {
		msgs := c.request("completion/complete", map[string]any{
			"ref":      tt.ref,
			"argument": map[string]any{"name": tt.arg, "value": tt.value},
		})
		resp := msgs[len(msgs)-1]
		if tt.wantCode != 0 {
			if resp.Error == nil || resp.Error.Code != tt.wantCode {
				t.Errorf("complete %v %s=%q: error %v, want code %d", tt.ref, tt.arg, tt.value, resp.Error, tt.wantCode)
			}
			continue
		}
		if resp.Error != nil {
			t.Errorf("complete %v %s=%q: %v", tt.ref, tt.arg, tt.value, resp.Error)
			continue
		}
		var res struct {
			Completion struct {
				Values []string `json:"values"`
			} `json:"completion"`
		}
		c.decode(resp, &res)
		if diff := cmp.Diff(tt.want, res.Completion.Values); diff != "" {
			t.Errorf("complete %v %s=%q mismatch (-want +got):\n%s", tt.ref, tt.arg, tt.value, diff)
		}
	}
}

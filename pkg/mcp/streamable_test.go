package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	_ "modernc.org/sqlite"
)

// cluster is n independent servers ("processes": no shared memory) on one
// SQLite file, each behind its own HTTP server.
type cluster struct {
	dbPath string
	urls   []string
}

type echoIn struct {
	Text string `json:"text" jsonschema:"what to echo"`
}
type echoOut struct {
	Echo   string `json:"echo"`
	Length int    `json:"length"`
}

func newCluster(t *testing.T, n int, opts ...func(*mcp.ServerOptions)) *cluster {
	t.Helper()
	c := &cluster{dbPath: filepath.Join(t.TempDir(), "mcpush.db")}
	for range n {
		store, err := sqlitestore.New(c.dbPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		so := &mcp.ServerOptions{PollInterval: 20 * time.Millisecond}
		for _, o := range opts {
			o(so)
		}
		srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, store, so)
		mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "echoes"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Echo: in.Text, Length: len(in.Text)}, nil
		})
		mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			req.Session.NotifyProgress(ctx, 1, 2, "asking")
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "model said " + string(res.Content)}}}, nil, nil
		})
		srv.AddTool(&mcp.Tool{Name: "block"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select { // until cancelled, which must come within 10s
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(10 * time.Second):
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not cancelled"}}}, nil
			}
		})
		srv.AddTool(&mcp.Tool{Name: "panic"}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { panic("boom") })
		h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, MaxBodyBytes: 1 << 16, RetryInterval: 50 * time.Millisecond})
		ts := httptest.NewServer(h)
		t.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
		c.urls = append(c.urls, ts.URL)
	}
	return c
}

// rowCount sums the rows of every table: a stand-in for "stored state".
func (c *cluster) rowCount(t *testing.T) int {
	t.Helper()
	db, err := sql.Open("sqlite", c.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type='table'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	total := 0
	for _, tb := range tables {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM "` + tb + `"`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

func post(t *testing.T, url, session string, body string, hdr ...string) *http.Response {
	t.Helper()
	return testutil.Post(t, nil, url, session, body, hdr...)
}

func initialize(t *testing.T, url string, version string) string {
	t.Helper()
	resp := post(t, url, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{"sampling":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("initialize: %d %s", resp.StatusCode, b)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if len(id) < 22 {
		t.Fatalf("session id %q is shorter than 128 bits", id)
	}
	r2 := post(t, url, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	r2.Body.Close()
	if r2.StatusCode != 202 {
		t.Fatalf("initialized notification: %d", r2.StatusCode)
	}
	return id
}

type sseEvent struct{ id, data string }

// readEvents reads SSE events until the stream ends or stop says so.
func readEvents(t *testing.T, r io.Reader, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	var evs []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.id != "" || cur.data != "" {
				evs = append(evs, cur)
				if stop != nil && stop(cur) {
					return evs
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			cur.data += line[6:]
		}
	}
	return evs
}

func TestCallAcrossProcesses(t *testing.T) {
	c := newCluster(t, 3)
	sid := initialize(t, c.urls[0], "2025-11-25")
	resp := post(t, c.urls[1], sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	defer resp.Body.Close()
	var got struct {
		Result struct {
			StructuredContent echoOut `json:"structuredContent"`
			Content           []struct{ Text string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Result.StructuredContent != (echoOut{"hello", 5}) || len(got.Result.Content) != 1 {
		t.Errorf("tools/call result = %+v", got.Result)
	}

	// Invalid arguments are a tool error the model can read.
	resp2 := post(t, c.urls[2], sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":3}}}`)
	b, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if !bytes.Contains(b, []byte(`"isError":true`)) || !bytes.Contains(b, []byte("invalid arguments")) {
		t.Errorf("invalid arguments gave %s", b)
	}
}

// TestSamplingAcrossProcesses: the tool runs on process 0; the client's
// answer to its sampling request reaches process 1; the stream is then
// resumed on process 2 with Last-Event-ID.
func TestSamplingAcrossProcesses(t *testing.T) {
	c := newCluster(t, 3)
	sid := initialize(t, c.urls[0], "2025-11-25")
	resp := post(t, c.urls[0], sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask","arguments":{},"_meta":{"progressToken":"p1"}}}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q, want SSE", ct)
	}
	var samplingID json.RawMessage
	evs := readEvents(t, resp.Body, func(e sseEvent) bool {
		var m mcp.Message
		json.Unmarshal([]byte(e.data), &m)
		if m.Method == "sampling/createMessage" {
			samplingID = m.ID
			return true
		}
		return false
	})
	resp.Body.Close() // the client goes away; the tool keeps running
	if samplingID == nil {
		t.Fatalf("no sampling request in %v", evs)
	}
	if evs[0].data != "" || evs[0].id == "" {
		t.Errorf("first event %+v is not a priming event", evs[0])
	}
	last := evs[len(evs)-1].id
	answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"42"},"model":"m"}}`, samplingID)
	r := post(t, c.urls[1], sid, answer)
	r.Body.Close()
	if r.StatusCode != 202 {
		t.Fatalf("posting the sampling answer: %d", r.StatusCode)
	}
	req, _ := http.NewRequest("GET", c.urls[2], nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Last-Event-ID", last)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Body.Close()
	rest := readEvents(t, g.Body, nil) // ends after the response
	var final string
	for _, e := range rest {
		if e.id == last && e.data != "" { // a priming event repeats the position, with no data
			t.Errorf("event %s replayed again", last)
		}
		final = e.data
	}
	if !strings.Contains(final, `"id":7`) || !strings.Contains(final, `model said`) || !strings.Contains(final, "42") {
		t.Errorf("resumed stream ended with %q, want the tool's response", final)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	c := newCluster(t, 1)
	sid := initialize(t, c.urls[0], "2025-11-25")
	before := c.rowCount(t)
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 1<<17) + `"}}`
	tests := []struct {
		name    string
		session string
		body    string
		hdr     []string
		status  int
		code    int
	}{
		{"malformed JSON", sid, `{"jsonrpc":`, nil, 400, mcp.CodeParseError},
		{"malformed initialize", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":`, nil, 400, mcp.CodeParseError},
		{"wrong jsonrpc version", sid, `{"jsonrpc":"1.0","id":1,"method":"ping"}`, nil, 400, mcp.CodeInvalidRequest},
		{"oversized body", sid, big, nil, 413, mcp.CodeInvalidRequest},
		{"oversized initialize", "", big, nil, 413, mcp.CodeInvalidRequest},
		{"unknown session", "nope", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil, 404, mcp.CodeInvalidRequest},
		{"missing session", "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil, 400, mcp.CodeInvalidRequest},
		{"unsupported protocol header", sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{"Mcp-Protocol-Version", "1999-01-01"}, 400, mcp.CodeInvalidRequest},
		{"foreign origin", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`, []string{"Origin", "http://evil.example.com"}, 403, mcp.CodeInvalidRequest},
		{"foreign host", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`, []string{"Host", "evil.example.com"}, 403, mcp.CodeInvalidRequest},
		{"wrong content type", sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{"Content-Type", "text/plain"}, 415, mcp.CodeInvalidRequest},
		{"wrong accept", sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{"Accept", "application/json"}, 406, mcp.CodeInvalidRequest},
		{"batch in 2025-11-25", sid, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, nil, 400, mcp.CodeInvalidRequest},
		{"bad log level", sid, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"loud"}}`, nil, 200, mcp.CodeInvalidParams},
		{"unknown method", sid, `{"jsonrpc":"2.0","id":1,"method":"nope/nope"}`, nil, 200, mcp.CodeMethodNotFound},
		{"unknown tool", sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}`, nil, 200, mcp.CodeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", c.urls[0], strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tt.session != "" {
				req.Header.Set("Mcp-Session-Id", tt.session)
			}
			for i := 0; i+1 < len(tt.hdr); i += 2 {
				if tt.hdr[i] == "Host" {
					req.Host = tt.hdr[i+1]
				}
				req.Header.Set(tt.hdr[i], tt.hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var m mcp.Message
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
				t.Fatalf("status %d, body is not a JSON-RPC message: %v", resp.StatusCode, err)
			}
			if resp.StatusCode != tt.status || m.Error == nil || m.Error.Code != tt.code || m.Error.Message == "" {
				t.Errorf("got status %d error %+v; want status %d code %d", resp.StatusCode, m.Error, tt.status, tt.code)
			}
		})
	}
	if after := c.rowCount(t); after != before {
		t.Errorf("bad input changed stored state: %d rows before, %d after", before, after)
	}
}

func TestBatchIn20250326(t *testing.T) {
	c := newCluster(t, 1)
	sid := initialize(t, c.urls[0], "2025-03-26")
	resp := post(t, c.urls[0], sid, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`)
	defer resp.Body.Close()
	var out []mcp.Message
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || string(out[0].ID) != "1" || string(out[1].ID) != "2" || out[1].Error != nil {
		t.Errorf("batch responses = %+v", out)
	}
}

func TestDeleteSession(t *testing.T) {
	c := newCluster(t, 2)
	sid := initialize(t, c.urls[0], "2025-06-18")
	req, _ := http.NewRequest("DELETE", c.urls[1], nil)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	r := post(t, c.urls[0], sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	r.Body.Close()
	if r.StatusCode != 404 {
		t.Errorf("request on a deleted session: %d, want 404", r.StatusCode)
	}
}

// TestGetStreamTakeover: a second GET stream of a session (on another
// process) takes over, and the first one ends: every message goes out on
// exactly one stream.
func TestGetStreamTakeover(t *testing.T) {
	c := newCluster(t, 2)
	sid := initialize(t, c.urls[0], "2025-11-25")
	open := func(url string) *http.Response {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := open(c.urls[0])
	defer first.Body.Close()
	second := open(c.urls[1])
	defer second.Body.Close()
	done := make(chan []sseEvent)
	go func() { done <- readEvents(t, first.Body, nil) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the first GET stream did not end after a second one took over")
	}
}

func TestToolPanicIsInternalError(t *testing.T) {
	c := newCluster(t, 1, func(o *mcp.ServerOptions) {})
	sid := initialize(t, c.urls[0], "2025-11-25")
	r := post(t, c.urls[0], sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"panic","arguments":{}}}`)
	defer r.Body.Close()
	var m mcp.Message
	json.NewDecoder(r.Body).Decode(&m)
	if m.Error == nil || m.Error.Code != mcp.CodeInternalError || !strings.Contains(m.Error.Message, "panicked") {
		t.Fatalf("a panicking tool gave %+v, want an internal error", m)
	}
	// The process still serves.
	r2 := post(t, c.urls[0], sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	r2.Body.Close()
	if r2.StatusCode != 200 {
		t.Fatalf("ping after a panic: %d", r2.StatusCode)
	}
}

// Package testutil holds the small helpers that tests across the module
// share: a buffer safe for concurrent writers (a child process's output),
// a settable clock, a raw MCP POST, an SSE parser and a task queue that a
// test drains by hand ([Queue]). It is for tests only and depends on
// nothing in the module.
package testutil

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// LockedBuffer is a bytes.Buffer safe for concurrent use: the Stdout and
// Stderr of a child process, or a logger's writer, read by the test.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Clock is a settable clock for the Now options of the stores and the
// server. The zero value starts at the zero time; safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock set to t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set sets the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Post sends one raw MCP POST of body to url with client (nil:
// http.DefaultClient): JSON, accepting JSON or SSE, with the session id
// when set, and extra header name/value pairs. A transport error fails
// the test; the caller closes the body.
func Post(tb testing.TB, client *http.Client, url, session, body string, header ...string) *http.Response {
	tb.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	return resp
}

// PostRead is Post that reads and closes the body.
func PostRead(tb testing.TB, client *http.Client, url, session, body string, header ...string) (*http.Response, []byte) {
	tb.Helper()
	resp := Post(tb, client, url, session, body, header...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("POST %s: reading the body: %v", body, err)
	}
	return resp, b
}

// RPC returns a JSON-RPC request.
func RPC(id int, method string, params any) string {
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// SSEEvent is one Server-Sent Event.
type SSEEvent struct {
	ID, Data string
	Retry    string
}

// ParseSSE splits a whole SSE body into events.
func ParseSSE(body []byte) []SSEEvent {
	var out []SSEEvent
	for _, block := range strings.Split(string(body), "\n\n") {
		if strings.TrimSpace(block) == "" {
			continue
		}
		var ev SSEEvent
		for _, line := range strings.Split(block, "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "id":
				ev.ID = v
			case "data":
				ev.Data += v
			case "retry":
				ev.Retry = v
			}
		}
		out = append(out, ev)
	}
	return out
}

// Message is a JSON-RPC message as tests look at it.
type Message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Messages returns the JSON-RPC messages of a response body of
// contentType: the JSON body, or the data of its SSE events.
func Messages(tb testing.TB, contentType string, body []byte) []Message {
	tb.Helper()
	if strings.HasPrefix(contentType, "application/json") {
		var m Message
		if err := json.Unmarshal(body, &m); err != nil {
			tb.Fatalf("body %q: %v", body, err)
		}
		return []Message{m}
	}
	var out []Message
	for _, ev := range ParseSSE(body) {
		if ev.Data == "" {
			continue
		}
		var m Message
		if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
			tb.Fatalf("event %q: %v", ev.Data, err)
		}
		out = append(out, m)
	}
	return out
}

// Package hostile is an MCP server for the client's hardening tests: a
// real HTTP server on loopback that speaks both protocol eras well enough
// to be connected to (initialize and the GET stream of 2025-11-25;
// server/discover and subscriptions/listen of 2026-07-28; the tools
// mcpush watch calls) and then misbehaves as its Behavior says: floods
// notifications, pages endlessly, ends every stream at once with
// "retry: 1", sends what is not JSON-RPC, stalls, or redirects elsewhere.
// It counts the requests it gets and records their headers, so that tests
// can check what a client did.
//
// It is written by hand from the specification, apart from pkg/mcp, so
// that the client is judged by something that does not share its code.
package hostile

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Behavior is how the server misbehaves.
type Behavior string

// Behaviors.
const (
	// Normal answers properly; its streams stay open and silent but for a
	// keep-alive comment every second.
	Normal Behavior = "normal"
	// Flood: the GET stream (2025) and the listen stream (2026) carry
	// notifications/message events of the topic Options.Topic, sequence
	// 1, 2, 3, ..., each with a payload of Options.FloodBytes, as fast
	// as the client reads them.
	Flood Behavior = "flood"
	// RequestFlood: a tools/list or tools/call is answered by an SSE
	// stream of notifications that never carries the response.
	RequestFlood Behavior = "request-flood"
	// Pages: tools/list answers pages of about Options.PageBytes of tools
	// each, every one with a nextCursor, without end.
	Pages Behavior = "pages"
	// BigCursor: tools/list answers one tool and a nextCursor of
	// Options.PageBytes.
	BigCursor Behavior = "big-cursor"
	// Retry: every stream (GET, listen, the SSE answer of tools/call and
	// its resumptions) sends an event with a new id and "retry: 1" and
	// ends at once.
	Retry Behavior = "retry"
	// Garbage: tools/list and tools/call are answered by an SSE stream
	// whose events are not JSON; so are the GET and listen streams.
	Garbage Behavior = "garbage"
	// Stall: the GET and listen streams (and the SSE answer of
	// tools/call) send their first event, then nothing at all, no
	// keep-alive, until the client leaves; a GET that resumes a
	// tools/call stream (Last-Event-ID r...) gets the response.
	Stall Behavior = "stall"
	// Redirect: a request to any path but /mcp is answered 307 to
	// Options.RedirectTo (default: this server's /mcp), where the server
	// answers as Normal.
	Redirect Behavior = "redirect"
)

// Options configure a Server.
type Options struct {
	// Topic is the topic of flooded events and of topics_list. Default
	// "t".
	Topic string
	// FloodBytes is the payload size of a flooded event. Default 64 KiB.
	FloodBytes int
	// PageBytes is the size of a page (Pages) or a cursor (BigCursor).
	// Default 1 MiB.
	PageBytes int
	// RedirectTo is where Redirect sends requests; default: this
	// server's /mcp.
	RedirectTo string
}

// Server is a running hostile server. Its methods are safe for
// concurrent use.
type Server struct {
	// URL is the MCP endpoint.
	URL string

	behavior Behavior
	opts     Options
	ts       *httptest.Server
	seq      atomic.Int64 // event ids

	mu      sync.Mutex
	counts  map[string]int
	headers []http.Header
	stalled json.RawMessage // the id of the stalled tools/call
}

// Start starts a server on a free loopback port, closed when the test
// ends. nil opts means defaults.
func Start(t testing.TB, b Behavior, opts *Options) *Server {
	t.Helper()
	s := &Server{behavior: b, counts: map[string]int{}}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Topic == "" {
		s.opts.Topic = "t"
	}
	if s.opts.FloodBytes <= 0 {
		s.opts.FloodBytes = 64 << 10
	}
	if s.opts.PageBytes <= 0 {
		s.opts.PageBytes = 1 << 20
	}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ts.Listener = l
	s.URL = "http://" + l.Addr().String() + "/mcp" // before the server reads it
	s.ts.Start()
	t.Cleanup(s.Close)
	return s
}

// Close stops the server and cuts its streams.
func (s *Server) Close() {
	s.ts.CloseClientConnections()
	s.ts.Close()
}

// Count returns how many requests of kind the server got: "GET", "GET
// resume" (a GET with Last-Event-ID), "DELETE", or "POST " and the
// JSON-RPC method ("POST subscriptions/listen").
func (s *Server) Count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[kind]
}

// Requests returns how many requests the server got in all.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.headers)
}

// Headers returns the headers of every request so far, in order.
func (s *Server) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]http.Header, len(s.headers))
	for i, h := range s.headers {
		out[i] = h.Clone()
	}
	return out
}

func (s *Server) count(kind string, h http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[kind]++
	s.headers = append(s.headers, h.Clone())
}

type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		kind := "GET"
		if r.Header.Get("Last-Event-ID") != "" {
			kind = "GET resume"
		}
		s.count(kind, r.Header)
	case http.MethodDelete:
		s.count("DELETE", r.Header)
	case http.MethodPost:
	default:
		s.count(r.Method, r.Header)
	}
	if s.behavior == Redirect && r.URL.Path != "/mcp" {
		if r.Method == http.MethodPost {
			s.count("POST", r.Header)
		}
		to := s.opts.RedirectTo
		if to == "" {
			to = s.URL
		}
		http.Redirect(w, r, to, http.StatusTemporaryRedirect)
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.serveGET(w, r)
		return
	case http.MethodDelete:
		return
	case http.MethodPost:
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	var req request
	if err != nil || json.Unmarshal(body, &req) != nil {
		s.count("POST", r.Header)
		http.Error(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`, http.StatusBadRequest)
		return
	}
	s.count("POST "+req.Method, r.Header)
	if req.ID == nil {
		w.WriteHeader(http.StatusAccepted) // a notification or a response
		return
	}
	switch req.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "hostile-1")
		s.result(w, req.ID, map[string]any{
			"protocolVersion": "2025-11-25",
			"capabilities":    capabilities,
			"serverInfo":      map[string]string{"name": "hostile", "version": "1"},
		})
	case "server/discover":
		s.result(w, req.ID, map[string]any{
			"supportedVersions": []string{"2026-07-28", "2025-11-25"},
			"capabilities":      capabilities,
			"serverInfo":        map[string]string{"name": "hostile", "version": "1"},
			"resultType":        "complete",
		})
	case "subscriptions/listen":
		s.serveListen(w, r, req)
	case "tools/list":
		s.serveList(w, r, req)
	case "tools/call":
		s.serveCall(w, r, req)
	default: // ping, logging/setLevel, resources/subscribe, ...
		s.result(w, req.ID, map[string]any{})
	}
}

var capabilities = map[string]any{
	"tools":     map[string]any{"listChanged": true},
	"resources": map[string]any{"subscribe": true, "listChanged": true},
	"logging":   map[string]any{},
}

func (s *Server) result(w http.ResponseWriter, id json.RawMessage, result any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func resultEvent(id json.RawMessage, result any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	return b
}

// sse is an event stream being written.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	s := &sse{w: w, f: f}
	s.flush()
	return s
}

func (e *sse) flush() {
	if e.f != nil {
		e.f.Flush()
	}
}

// write writes raw SSE text and flushes; false once the client is gone.
func (e *sse) write(text string) bool {
	if _, err := io.WriteString(e.w, text); err != nil {
		return false
	}
	e.flush()
	return true
}

func (s *Server) nextID(prefix string) string {
	return prefix + strconv.FormatInt(s.seq.Add(1), 10)
}

// misbehave runs the behavior of a long-lived stream (GET or listen)
// after its opening.
func (s *Server) misbehave(r *http.Request, e *sse) {
	switch s.behavior {
	case Flood:
		s.flood(r, e)
	case Retry:
		e.write("id: " + s.nextID("g") + "\nretry: 1\ndata: \n\n")
	case Garbage:
		for i := 0; i < 100 && e.write("id: "+s.nextID("g")+"\ndata: this is not JSON-RPC\n\n"); i++ {
		}
	case Stall:
		<-r.Context().Done()
	default:
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
				if !e.write(": keepalive\n\n") {
					return
				}
			}
		}
	}
}

func (s *Server) serveGET(w http.ResponseWriter, r *http.Request) {
	e := startSSE(w)
	if last := r.Header.Get("Last-Event-ID"); strings.HasPrefix(last, "r") && s.behavior == Stall {
		// The resumption of a stalled tools/call: its response.
		s.mu.Lock()
		id := s.stalled
		s.mu.Unlock()
		e.write("id: " + s.nextID("r") + "\ndata: " + string(resultEvent(id, callResult())) + "\n\n")
		return
	}
	if s.behavior != Retry {
		e.write("id: " + s.nextID("g") + "\ndata: \n\n")
	}
	s.misbehave(r, e)
}

func (s *Server) serveListen(w http.ResponseWriter, r *http.Request, req request) {
	e := startSSE(w)
	retry := ""
	if s.behavior == Retry {
		retry = "retry: 1\n"
	}
	// The acknowledgement grants what the listen asked for, as a server
	// that means to deliver it does (the misbehaviour comes after it).
	var p struct {
		Notifications json.RawMessage `json:"notifications"`
	}
	_ = json.Unmarshal(req.Params, &p)
	if len(p.Notifications) == 0 {
		p.Notifications = json.RawMessage("{}")
	}
	ack, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
		"params": map[string]any{"notifications": p.Notifications, "_meta": map[string]any{"io.modelcontextprotocol/subscriptionId": req.ID}}})
	if !e.write(retry + "data: " + string(ack) + "\n\n") {
		return
	}
	if s.behavior == Retry {
		return
	}
	s.misbehave(r, e)
}

// flood writes notifications/message events until the client leaves.
func (s *Server) flood(r *http.Request, e *sse) {
	pad := strings.Repeat("x", s.opts.FloodBytes)
	for n := int64(1); r.Context().Err() == nil; n++ {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{
			"level": "info", "logger": "events/" + s.opts.Topic,
			"data": map[string]any{
				"topic": s.opts.Topic, "sequence": n, "messageId": fmt.Sprint("m", n),
				"receivedAt": "2026-11-24T00:00:00Z", "payload": map[string]string{"pad": pad},
			},
		}})
		if !e.write("data: " + string(b) + "\n\n") {
			return
		}
	}
}

func (s *Server) serveList(w http.ResponseWriter, r *http.Request, req request) {
	switch s.behavior {
	case Pages:
		var p struct {
			Cursor string `json:"cursor"`
		}
		json.Unmarshal(req.Params, &p)
		n, _ := strconv.Atoi(strings.TrimPrefix(p.Cursor, "page-"))
		desc := strings.Repeat("d", 1000)
		var tools []map[string]any
		for size := 0; size < s.opts.PageBytes; size += len(desc) + 64 {
			tools = append(tools, map[string]any{"name": fmt.Sprintf("tool-%d-%d", n, len(tools)), "description": desc, "inputSchema": map[string]string{"type": "object"}})
		}
		s.result(w, req.ID, map[string]any{"tools": tools, "nextCursor": fmt.Sprintf("page-%d", n+1)})
	case BigCursor:
		s.result(w, req.ID, map[string]any{"tools": []any{map[string]any{"name": "a", "inputSchema": map[string]string{"type": "object"}}}, "nextCursor": strings.Repeat("c", s.opts.PageBytes)})
	case Garbage, RequestFlood:
		s.misbehaveRequest(w, r)
	default:
		s.result(w, req.ID, map[string]any{"tools": []any{map[string]any{"name": "events_recent", "inputSchema": map[string]string{"type": "object"}}}})
	}
}

// misbehaveRequest answers a request with a stream that never carries
// its response.
func (s *Server) misbehaveRequest(w http.ResponseWriter, r *http.Request) {
	e := startSSE(w)
	switch s.behavior {
	case Garbage:
		for i := 0; i < 1000 && e.write("id: "+s.nextID("r")+"\ndata: {this is not JSON-RPC\n\n"); i++ {
		}
		<-r.Context().Done()
	case RequestFlood:
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "logger": "flood", "data": "x"}})
		for e.write("id: "+s.nextID("r")+"\ndata: "+string(b)+"\n\n") && r.Context().Err() == nil {
		}
	}
}

func callResult() map[string]any {
	return map[string]any{"content": []any{map[string]string{"type": "text", "text": "ok"}}, "structuredContent": map[string]any{"ok": true}}
}

func (s *Server) serveCall(w http.ResponseWriter, r *http.Request, req request) {
	var p struct {
		Name string `json:"name"`
	}
	json.Unmarshal(req.Params, &p)
	switch p.Name {
	case "topics_list":
		s.result(w, req.ID, map[string]any{"content": []any{}, "structuredContent": map[string]any{
			"topics": []any{map[string]any{"name": s.opts.Topic, "lastSequence": 0}}}})
		return
	case "events_recent":
		s.result(w, req.ID, map[string]any{"content": []any{}, "structuredContent": map[string]any{"events": []any{}}})
		return
	}
	switch s.behavior {
	case Garbage, RequestFlood:
		s.misbehaveRequest(w, r)
	case Retry:
		e := startSSE(w)
		e.write("id: " + s.nextID("r") + "\nretry: 1\ndata: \n\n")
	case Stall:
		s.mu.Lock()
		s.stalled = req.ID
		s.mu.Unlock()
		e := startSSE(w)
		e.write("id: " + s.nextID("r") + "\ndata: \n\n")
		<-r.Context().Done()
	default:
		s.result(w, req.ID, callResult())
	}
}

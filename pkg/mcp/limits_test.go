package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// smallLimits are limits low enough to reach with small test bodies.
func smallLimits(o *mcp.ServerOptions) {
	o.Limits = mcp.Limits{MaxClientInfoBytes: 1024, MaxSubscriptionURIBytes: 64, MaxSubscriptions: 2}
}

type rawCall struct {
	method  string // default POST
	session string
	body    string
	hdr     [][2]string // added, so a header may repeat
}

func (rc rawCall) do(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	method := rc.method
	if method == "" {
		method = "POST"
	}
	req, _ := http.NewRequest(method, url, strings.NewReader(rc.body))
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	} else {
		req.Header.Set("Accept", "text/event-stream")
	}
	if rc.session != "" {
		req.Header.Set("Mcp-Session-Id", rc.session)
	}
	for _, h := range rc.hdr {
		if h[0] == "Accept" {
			req.Header.Del("Accept")
		}
	}
	for _, h := range rc.hdr {
		req.Header.Add(h[0], h[1])
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestHardeningBadInput sends the inputs of issue 12's findings 3, 8, 10
// and 11: each gets the promised status and JSON-RPC error, an error
// never echoes more than a bounded part of the input, and nothing is
// stored.
func TestHardeningBadInput(t *testing.T) {
	c := newCluster(t, 1, smallLimits)
	url := c.urls[0]
	sid := initialize(t, url, "2025-11-25")
	init := func(caps string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"clientInfo":{"name":"t","version":"1"}}}`
	}
	call := func(name string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":{}}}`
	}
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	big := strings.Repeat("x", 40000)
	deep := strings.Repeat("[", mcp.MaxJSONDepth+1) + strings.Repeat("]", mcp.MaxJSONDepth+1)
	tests := []struct {
		name    string
		call    rawCall
		status  int
		code    int
		message string // a part of the error message
	}{
		// Finding 10.
		{"oversized initialize", rawCall{body: init(`{"x":"` + strings.Repeat("a", 2000) + `"}`)}, 400, mcp.CodeInvalidParams, "limit 1024"},
		{"capabilities not an object", rawCall{body: init(`"x"`)}, 400, mcp.CodeInvalidParams, "capabilities must be an object"},
		{"initialize with a bogus session", rawCall{session: "bogus", body: init(`{}`)}, 400, mcp.CodeInvalidRequest, "Mcp-Session-Id"},
		{"initialize with an existing session", rawCall{session: sid, body: init(`{}`)}, 400, mcp.CodeInvalidRequest, "Mcp-Session-Id"},
		{"invalid UTF-8 in a string id", rawCall{session: sid, body: "{\"jsonrpc\":\"2.0\",\"id\":\"a\xff\",\"method\":\"ping\"}"}, 400, mcp.CodeInvalidRequest, "UTF-8"},
		{"oversized id", rawCall{session: sid, body: `{"jsonrpc":"2.0","id":"` + strings.Repeat("i", mcp.MaxIDBytes) + `","method":"ping"}`}, 400, mcp.CodeInvalidRequest, `"id"`},
		{"object requestId", rawCall{session: sid, body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"a":1}}}`}, 400, mcp.CodeInvalidParams, "requestId"},
		{"nesting too deep", rawCall{session: sid, body: deep}, 400, mcp.CodeParseError, "nested"},
		{"huge tool name", rawCall{session: sid, body: call(big)}, 200, mcp.CodeInvalidParams, "limit 256"},
		{"huge prompt name", rawCall{session: sid, body: `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"` + big + `"}}`}, 200, mcp.CodeInvalidParams, "limit 256"},
		{"unknown long tool name", rawCall{session: sid, body: call(strings.Repeat("t", mcp.MaxNameBytes))}, 200, mcp.CodeInvalidParams, "unknown tool"},
		// Finding 3.
		{"object progressToken", rawCall{session: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"progressToken":{"a":1}}}}`}, 200, mcp.CodeInvalidParams, "progressToken"},
		{"fractional progressToken", rawCall{session: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"progressToken":1.5}}}`}, 200, mcp.CodeInvalidParams, "progressToken"},
		{"oversized progressToken", rawCall{session: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"progressToken":"` + big + `"}}}`}, 200, mcp.CodeInvalidParams, "progressToken"},
		// Finding 11.
		{"file origin", rawCall{session: sid, body: ping, hdr: [][2]string{{"Origin", "file://localhost"}}}, 403, mcp.CodeInvalidRequest, "Origin"},
		{"odd scheme origin", rawCall{session: sid, body: ping, hdr: [][2]string{{"Origin", "evil://127.0.0.1"}}}, 403, mcp.CodeInvalidRequest, "Origin"},
		{"two origins", rawCall{session: sid, body: ping, hdr: [][2]string{{"Origin", "http://localhost"}, {"Origin", "http://evil.example.com"}}}, 403, mcp.CodeInvalidRequest, "Origin"},
		{"accept q=0", rawCall{session: sid, body: ping, hdr: [][2]string{{"Accept", "application/json, text/event-stream;q=0"}}}, 406, mcp.CodeInvalidRequest, "Accept"},
		{"GET accept q=0", rawCall{method: "GET", session: sid, hdr: [][2]string{{"Accept", "text/event-stream; q=0.0"}}}, 406, mcp.CodeInvalidRequest, "Accept"},
		{"cursor -1", rawCall{session: sid, body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"-1"}}`}, 200, mcp.CodeInvalidParams, "cursor"},
		// Finding 2.
		{"subscription URI too long", rawCall{session: sid, body: `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"events://` + strings.Repeat("t", 64) + `"}}`}, 200, mcp.CodeInvalidParams, "limit 64"},
		// Finding 6.
		{"resume of an unknown stream", rawCall{method: "GET", session: sid, hdr: [][2]string{{"Last-Event-ID", "fake.0"}}}, 404, mcp.CodeInvalidRequest, "Last-Event-ID"},
		{"resume past an unknown event", rawCall{method: "GET", session: sid, hdr: [][2]string{{"Last-Event-ID", "fake.7"}}}, 404, mcp.CodeInvalidRequest, "Last-Event-ID"},
	}
	before := c.rowCount(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := tt.call.do(t, url)
			var m mcp.Message
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatalf("status %d, body %.200q is not one JSON-RPC message: %v", resp.StatusCode, body, err)
			}
			if resp.StatusCode != tt.status || m.Error == nil || m.Error.Code != tt.code || !strings.Contains(m.Error.Message, tt.message) {
				t.Errorf("got status %d error %.300v; want status %d code %d with %q", resp.StatusCode, m.Error, tt.status, tt.code, tt.message)
			}
			if len(body) > 2*mcp.MaxErrorMessageBytes {
				t.Errorf("the error is %d bytes: it echoes the input", len(body))
			}
		})
	}
	if after := c.rowCount(t); after != before {
		t.Errorf("bad input changed stored state: %d rows before, %d after", before, after)
	}
}

// TestStrayMessagesStoreNothing (finding 8): a response that looks like
// an answer to a server-to-client request never sent, and cancellations
// of requests that do not run, are accepted and stored nowhere.
func TestStrayMessagesStoreNothing(t *testing.T) {
	c := newCluster(t, 2)
	sid := initialize(t, c.urls[0], "2025-11-25")
	before := c.rowCount(t)
	payload := strings.Repeat("p", 30000)
	for i, body := range []string{
		`{"jsonrpc":"2.0","id":"mcpush-never-sent","result":{"x":"` + payload + `"}}`,
		`{"jsonrpc":"2.0","id":"mcpush-never-sent-2","error":{"code":1,"message":"` + payload + `"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nobody"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":42}}`,
	} {
		resp, b := rawCall{session: sid, body: body}.do(t, c.urls[i%2])
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("message %d: status %d %s, want 202", i, resp.StatusCode, b)
		}
	}
	if after := c.rowCount(t); after != before {
		t.Errorf("stray messages were stored: %d rows before, %d after", before, after)
	}
}

// TestBatchMemberErrors (finding 10): in a 2025-03-26 batch an invalid
// member gets its own error; the others are served.
func TestBatchMemberErrors(t *testing.T) {
	c := newCluster(t, 1)
	sid := initialize(t, c.urls[0], "2025-03-26")
	resp, b := rawCall{session: sid, body: `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2},{"jsonrpc":"1.0","method":"x"},{"jsonrpc":"2.0","id":3,"method":"tools/list"}]`}.do(t, c.urls[0])
	var out []mcp.Message
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d body %s: %v", resp.StatusCode, b, err)
	}
	got := map[string]int{}
	for _, m := range out {
		code := 0
		if m.Error != nil {
			code = m.Error.Code
		}
		got[string(m.ID)] += code
	}
	want := map[string]int{"1": 0, "2": mcp.CodeInvalidRequest, "null": mcp.CodeInvalidRequest, "3": 0}
	if len(out) != 4 || len(got) != len(want) {
		t.Fatalf("responses %s, want one per member", b)
	}
	for id, code := range want {
		if got[id] != code {
			t.Errorf("member %s: error code %d, want %d (responses %s)", id, got[id], code, b)
		}
	}
}

// TestBatchAllInvalid: a batch whose members are all invalid is answered
// (one error per member in a 2025-03-26 session; without a session the
// request is refused), never a crash.
func TestBatchAllInvalid(t *testing.T) {
	c := newCluster(t, 1)
	sid := initialize(t, c.urls[0], "2025-03-26")
	for _, session := range []string{sid, ""} {
		for _, body := range []string{`[1]`, `[{"x":1},"y"]`} {
			resp, b := rawCall{session: session, body: body}.do(t, c.urls[0])
			if session == "" {
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("no session, batch %s: status %d body %s, want 400", body, resp.StatusCode, b)
				}
				continue
			}
			var out []mcp.Message
			if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != 200 {
				t.Fatalf("batch %s: status %d body %s: %v", body, resp.StatusCode, b, err)
			}
			if n := strings.Count(body, ",") + 1; len(out) != n {
				t.Errorf("batch %s: %d responses %s, want %d", body, len(out), b, n)
			}
			for _, m := range out {
				if m.Error == nil || m.Error.Code != mcp.CodeInvalidRequest {
					t.Errorf("batch %s: response %+v, want -32600", body, m)
				}
			}
		}
	}
}

// TestSubscriptionCount (finding 2): a session holds at most
// MaxSubscriptions; one more is refused and not stored, a repeat of a
// held one is fine.
func TestSubscriptionCount(t *testing.T) {
	c := newCluster(t, 1, smallLimits)
	sid := initialize(t, c.urls[0], "2025-11-25")
	sub := func(uri string) *mcp.Error {
		_, b := rawCall{session: sid, body: `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"` + uri + `"}}`}.do(t, c.urls[0])
		var m mcp.Message
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return m.Error
	}
	for _, uri := range []string{"events://a", "events://b", "events://a"} {
		if e := sub(uri); e != nil {
			t.Fatalf("subscribe %s: %v", uri, e)
		}
	}
	before := c.rowCount(t)
	if e := sub("events://c"); e == nil || e.Code != mcp.CodeInvalidParams || !strings.Contains(e.Message, "limit 2") {
		t.Errorf("a third subscription got %v, want -32602 naming the limit", e)
	}
	if after := c.rowCount(t); after != before {
		t.Errorf("a refused subscription changed stored state: %d rows before, %d after", before, after)
	}
}

// TestInFlightLimit (finding 5): a session runs at most
// MaxInFlightPerSession requests at once on a process; more get 429 with
// Retry-After. A request whose client left before it got an event id is
// cancelled, and frees its slot.
func TestInFlightLimit(t *testing.T) {
	c := newCluster(t, 1, func(o *mcp.ServerOptions) { o.Limits.MaxInFlightPerSession = 1 })
	url := c.urls[0]
	sid := initialize(t, url, "2025-11-25")
	block := `{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"block","arguments":{}}}`
	ctx, leave := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		// The blocking call may meet a ping below holding the one slot
		// and get 429: it tries again until it holds the slot (and
		// blocks) or the test leaves.
		for {
			req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(block))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			if err != nil || resp.StatusCode != http.StatusTooManyRequests {
				errc <- err
				return
			}
		}
	}()
	ping := rawCall{session: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`}
	// Generous: on a loaded 2-core machine the blocking call may take
	// seconds to reach its handler. Nothing here measures time.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, b := ping.do(t, url)
		if resp.StatusCode == http.StatusTooManyRequests {
			if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "Too Many Requests") {
				t.Errorf("429 without Retry-After or a message: %v %s", resp.Header, b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a second request while one blocks was never refused")
		}
		time.Sleep(20 * time.Millisecond)
	}
	leave() // the client goes away before the blocking call answered
	<-errc
	deadline = time.Now().Add(30 * time.Second)
	for {
		resp, _ := ping.do(t, url)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned call kept its slot: it was not cancelled")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPromptLimits (finding 1): an argument over MaxPromptArgumentBytes,
// or a rendering over MaxPromptBytes, is -32602 at once; a rendering
// within them is served.
func TestPromptLimits(t *testing.T) {
	c := newCluster(t, 1, dynamic, func(o *mcp.ServerOptions) {
		o.Limits.MaxPromptArgumentBytes = 1000
		o.Limits.MaxPromptBytes = 10000
	})
	store, err := sqlitestore.New(c.dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	item := `{"name":"many","arguments":[{"name":"a"}],"messages":[{"text":"` + strings.Repeat("{{a}}", 200) + `"}]}`
	if _, _, err := store.ApplyRegistry(t.Context(), notify.RegistryPrompts, notify.OpPut, map[string]json.RawMessage{"many": json.RawMessage(item)}, "m-many"); err != nil {
		t.Fatal(err)
	}
	sid := initialize(t, c.urls[0], "2025-11-25")
	get := func(arg string) (*mcp.Message, int) {
		_, b := rawCall{session: sid, body: `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"many","arguments":{"a":"` + arg + `"}}}`}.do(t, c.urls[0])
		var m mcp.Message
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%.200s: %v", b, err)
		}
		return &m, len(b)
	}
	tests := []struct {
		name, arg, message string
	}{
		{"argument too large", strings.Repeat("x", 1000), "limit 1000"},
		{"rendering too large", strings.Repeat("x", 60), "more than 10000 bytes"},
	}
	for _, tt := range tests {
		m, n := get(tt.arg)
		if m.Error == nil || m.Error.Code != mcp.CodeInvalidParams || !strings.Contains(m.Error.Message, tt.message) {
			t.Errorf("%s: got %.300v, want -32602 with %q", tt.name, m.Error, tt.message)
		}
		if n > 2*mcp.MaxErrorMessageBytes {
			t.Errorf("%s: the error is %d bytes", tt.name, n)
		}
	}
	if m, _ := get("yy"); m.Error != nil || !strings.Contains(string(m.Result), strings.Repeat("yy", 200)) {
		t.Errorf("a rendering within the bounds: %s %v", m.Result, m.Error)
	}
}

// TestTemplateQueryFragment (finding 11): a query or fragment is not part
// of a template variable.
func TestTemplateQueryFragment(t *testing.T) {
	for uri, want := range map[string]bool{"events://a": true, "events://a?b": false, "events://a#b": false, "events://a/b": false} {
		if got := mcp.TemplateVars("events://{topic}", uri) != nil; got != want {
			t.Errorf("events://{topic} matches %q: %v, want %v", uri, got, want)
		}
	}
}

// TestRateLimits (finding 4): the request rate and the session creations
// of one principal are bounded over all processes sharing the store,
// with 429 and Retry-After; the count is batched, so the overshoot is at
// most one batch per process. An initialize with bad params gets 400 and
// counts against neither.
func TestRateLimits(t *testing.T) {
	// Mid-minute, in the current minute: the windows end after the real
	// time too, which the store expires counters by.
	frozen := time.Now().Truncate(time.Minute).Add(30 * time.Second)
	const limit, sessions = 40, 3
	c := newCluster(t, 2, func(o *mcp.ServerOptions) {
		o.Now = func() time.Time { return frozen }
		o.Limits.MaxRequestsPerMinute = limit
		o.Limits.MaxSessionsPerHour = sessions
	})
	// Bad initialize requests are refused before they count as sessions
	// (they are requests, in the request rate): the limit still admits
	// `sessions` sessions after them.
	badRequests := 0
	for _, bad := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":[1]}}`,
	} {
		for _, url := range c.urls {
			badRequests++
			if resp, b := (rawCall{body: bad}).do(t, url); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"code":-32602`) {
				t.Errorf("a bad initialize: %d %.200s; want 400 with -32602", resp.StatusCode, b)
			}
		}
	}
	var sid string
	for i := range sessions {
		sid = initialize(t, c.urls[i%2], "2025-11-25")
	}
	resp, b := rawCall{body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`}.do(t, c.urls[1])
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "sessions per hour") {
		t.Errorf("initialize over the session limit: %d %v %s; want 429 with Retry-After", resp.StatusCode, resp.Header, b)
	}
	allowed := badRequests + 2*sessions + 1 // the bad ones, initialize and initialized per session, and the refused initialize
	refused := 0
	for i := range 2 * limit {
		resp, b := rawCall{session: sid, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`}.do(t, c.urls[i%2])
		switch resp.StatusCode {
		case http.StatusOK:
			allowed++
		case http.StatusTooManyRequests:
			refused++
			if ra := resp.Header.Get("Retry-After"); ra != "30" || !strings.Contains(string(b), "requests per minute") {
				t.Fatalf("429 with Retry-After %q and %s; want 30 (the window ends in 30s)", ra, b)
			}
		default:
			t.Fatalf("ping: %d %s", resp.StatusCode, b)
		}
	}
	const batch = limit / 20
	if refused == 0 || allowed < limit || allowed > limit+2*batch {
		t.Errorf("%d requests allowed, %d refused; want between %d and %d allowed (the limit plus a batch per process)", allowed, refused, limit, limit+2*batch)
	}
}

// TestStreamsPerSession (finding 6): a session holds at most
// MaxStreamsPerSession SSE streams on a process; one more gets 429, and
// a stream that ends frees its place.
func TestStreamsPerSession(t *testing.T) {
	c := newCluster(t, 1, func(o *mcp.ServerOptions) { o.Limits.MaxStreamsPerSession = 1 })
	sid := initialize(t, c.urls[0], "2025-11-25")
	ctx, closeFirst := context.WithCancel(t.Context())
	first := openGET(t, ctx, c.urls[0], sid)
	defer first.Body.Close()
	get := rawCall{method: "GET", session: sid}
	resp, b := get.do(t, c.urls[0])
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a second stream: %d %s, want 429 with Retry-After", resp.StatusCode, b)
	}
	closeFirst()
	deadline := time.Now().Add(5 * time.Second)
	for {
		sctx, stop := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(sctx, "GET", c.urls[0], nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		status := resp.StatusCode
		stop()
		resp.Body.Close()
		if status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the first stream ended a new one still gets %d", status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Test2026InFlightLimit (finding 5): 2026-era requests have no
// session; the process's MaxInFlight bounds them (429), and a client that
// leaves cancels its request and frees its place.
func Test2026InFlightLimit(t *testing.T) {
	c := newCluster(t, 1, func(o *mcp.ServerOptions) { o.Limits.MaxInFlight = 1 })
	url := c.urls[0]
	body := func(name string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":{},` + meta2026(`{}`) + `}}`
	}
	hdr := func(name string) [][2]string {
		var out [][2]string
		h := headers2026("tools/call", name)
		for i := 0; i+1 < len(h); i += 2 {
			out = append(out, [2]string{h[i], h[i+1]})
		}
		return out
	}
	ctx, leave := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		// The blocking call may meet the probe below holding the one
		// slot and get 429: it tries again until it holds the slot (and
		// blocks) or the test leaves.
		for {
			req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body("block")))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for _, h := range hdr("block") {
				req.Header.Set(h[0], h[1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			if err != nil || resp.StatusCode != http.StatusTooManyRequests {
				errc <- err
				return
			}
		}
	}()
	echo := rawCall{body: body("echo"), hdr: hdr("echo")}
	wait := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp, b := echo.do(t, url)
			if resp.StatusCode == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("a 2026 request kept getting %d %s, want %d", resp.StatusCode, b, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait(http.StatusTooManyRequests)
	leave()
	<-errc
	wait(http.StatusOK)
}

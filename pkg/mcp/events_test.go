package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// eventsOn serves the Events extension with a key shared by the
// cluster's processes (cursors signed by one verify on all).
func eventsOn(o *mcp.ServerOptions) {
	dynamic(o)
	o.Events = true
	o.StateKeys = [][]byte{[]byte("events-test-key-0123456789abcdef0123")}
}

// putEventTypes writes event type items (JSON objects) to the events
// registry of the database at path.
func putEventTypes(t *testing.T, path, op, messageID string, items ...string) {
	t.Helper()
	st, err := sqlitestore.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := map[string]json.RawMessage{}
	for _, it := range items {
		e, err := notify.DecodeEventItem(json.RawMessage(it))
		if err != nil {
			t.Fatalf("%s: %v", it, err)
		}
		m[e.Name], _ = json.Marshal(e)
	}
	if _, _, err := st.ApplyRegistry(context.Background(), notify.RegistryEvents, op, m, messageID); err != nil {
		t.Fatal(err)
	}
}

// rpc2026 makes a 2026-era request of method with params (a JSON object
// without its braces, or "") and returns the decoded response.
func rpc2026(t *testing.T, url, method, params string) *rpcReply {
	t.Helper()
	if params != "" {
		params += ","
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + meta2026(`{}`) + `}}`
	_, r := call2026(t, url, body, headers2026(method, "")...)
	return r
}

// rpc2025 makes a request of method with params in session sid.
func rpc2025(t *testing.T, url, sid, method, params string) *rpcReply {
	t.Helper()
	if params == "" {
		params = "{}"
	}
	resp := post(t, url, sid, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	text := strings.TrimSpace(string(b))
	if i := strings.LastIndex(text, "data: "); i >= 0 {
		text = strings.TrimSpace(text[i+len("data: "):])
	}
	var r rpcReply
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatalf("%s: %v: %s", method, err, b)
	}
	return &r
}

// TestEventsDiscovery: with Events the extension is declared in
// server/discover and in initialize, as SEP-3415 does (extensions, with
// listChanged) and as ChatGPT reads it (a top-level events); without it,
// nothing is declared and events/* are not found. With it but without
// webhook delivery (functions/mcp without MCPUSH_AUTH), events/subscribe
// and events/unsubscribe answer Unsupported naming MCPUSH_AUTH, not
// method not found.
func TestEventsDiscovery(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("events ", on), func(t *testing.T) {
			opts := []func(*mcp.ServerOptions){dynamic}
			if on {
				opts = append(opts, eventsOn)
			}
			c := newCluster(t, 1, opts...)
			r := rpc2026(t, c.urls[0], "server/discover", "")
			caps, _ := r.Result["capabilities"].(map[string]any)
			sid := initialize(t, c.urls[0], "2025-11-25")
			init := rpc2025(t, c.urls[0], "", "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
			initCaps, _ := init.Result["capabilities"].(map[string]any)
			for what, caps := range map[string]map[string]any{"server/discover": caps, "initialize": initCaps} {
				ext, _ := caps["extensions"].(map[string]any)
				got := ext[mcp.EventsExtension]
				top, topOK := caps["events"]
				if on {
					if diff := cmp.Diff(map[string]any{"listChanged": true}, got); diff != "" {
						t.Errorf("%s: extensions[%s] (-want +got):\n%s", what, mcp.EventsExtension, diff)
					}
					if diff := cmp.Diff(map[string]any{}, top); diff != "" {
						t.Errorf("%s: capabilities.events (-want +got):\n%s", what, diff)
					}
				} else if got != nil || topOK {
					t.Errorf("%s: events declared without ServerOptions.Events: %v, %v", what, got, top)
				}
			}
			for _, m := range []string{"events/list", "events/poll", "events/subscribe", "events/unsubscribe"} {
				code, msg := 0, ""
				if e := rpc2025(t, c.urls[0], sid, m, `{"name":"x","delivery":{"url":"https://hooks.example.com/x"}}`).Error; e != nil {
					code, msg = e.Code, e.Message
				}
				switch {
				case !on && code != mcp.CodeMethodNotFound:
					t.Errorf("%s without the extension: code %d, want %d", m, code, mcp.CodeMethodNotFound)
				case on && strings.HasPrefix(m, "events/") && strings.Contains(m, "subscribe") && (code != mcp.CodeUnsupported || !strings.Contains(msg, "MCPUSH_AUTH")):
					// The extension is declared: not method not found,
					// and the message says what webhooks need.
					t.Errorf("%s without webhook delivery: code %d %q, want %d naming MCPUSH_AUTH", m, code, msg, mcp.CodeUnsupported)
				}
			}
		})
	}
}

// TestEventsList: events/list pages through the event types (sorted,
// from any process, in both eras), with their defaults, and offers only
// the delivery modes the server implements (an event type with none of
// them is not listed); resultType is "complete" in both eras.
func TestEventsList(t *testing.T) {
	c := newCluster(t, 2, eventsOn, func(o *mcp.ServerOptions) { o.PageSize = 2 })
	putEventTypes(t, c.dbPath, notify.OpPut, "m1",
		`{"name":"order.created","topic":"orders","description":"An order","inputSchema":{"type":"object","properties":{"region":{"type":"string"}}}}`,
		`{"name":"order.shipped","topic":"orders","delivery":["poll","webhook"]}`,
		`{"name":"alarm"}`,
		`{"name":"hook.only","delivery":["webhook"]}`,
	)
	sid := initialize(t, c.urls[0], "2025-11-25")
	for _, era := range []string{"2025", "2026"} {
		var names []string
		cursor := ""
		for page := 0; ; page++ {
			params := ""
			if cursor != "" {
				params = `"cursor":"` + cursor + `"`
			}
			var r *rpcReply
			if era == "2026" {
				r = rpc2026(t, c.urls[page%2], "events/list", params)
			} else {
				r = rpc2025(t, c.urls[page%2], sid, "events/list", "{"+params+"}")
			}
			if r.Error != nil {
				t.Fatalf("%s: events/list: %+v", era, r.Error)
			}
			if r.Result["resultType"] != "complete" {
				t.Errorf("%s: resultType %v", era, r.Result["resultType"])
			}
			evs, _ := r.Result["events"].([]any)
			for _, e := range evs {
				e := e.(map[string]any)
				names = append(names, e["name"].(string))
				switch e["name"] {
				case "alarm":
					want := map[string]any{"name": "alarm", "delivery": []any{"poll", "push"}, "inputSchema": map[string]any{"type": "object"}, "payloadSchema": map[string]any{"type": "object"}}
					if diff := cmp.Diff(want, e); diff != "" {
						t.Errorf("%s: alarm (-want +got):\n%s", era, diff)
					}
				case "order.created":
					if e["description"] != "An order" || e["inputSchema"].(map[string]any)["properties"] == nil {
						t.Errorf("%s: order.created = %v", era, e)
					}
				}
			}
			next, _ := r.Result["nextCursor"].(string)
			if next == "" {
				break
			}
			cursor = next
		}
		if diff := cmp.Diff([]string{"alarm", "order.created", "order.shipped"}, names); diff != "" {
			t.Errorf("%s: listed (-want +got):\n%s", era, diff)
		}
	}
}

// TestEventsListChanged: every 2025-era session whose client declared the
// extension gets exactly one notifications/events/list_changed per change
// of the events registry, from any process; a fresh session none; a
// session whose client did not declare it none (nor any other
// list_changed for it).
func TestEventsListChanged(t *testing.T) {
	c := newCluster(t, 3, eventsOn)
	putEventTypes(t, c.dbPath, notify.OpPut, "m0", `{"name":"e0"}`) // the baseline
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(i int, caps string) *counter {
		resp := post(t, c.urls[i%3], "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}}`)
		sid := resp.Header.Get("Mcp-Session-Id")
		resp.Body.Close()
		post(t, c.urls[i%3], sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
		ct := &counter{got: map[string]int{}}
		get := openGET(t, ctx, c.urls[(i+1)%3], sid)
		go func() {
			defer get.Body.Close()
			readEvents(t, get.Body, func(e sseEvent) bool {
				var m mcp.Message
				if json.Unmarshal([]byte(e.data), &m) == nil && strings.HasSuffix(m.Method, "list_changed") {
					ct.add(m.Method)
				}
				return false
			})
		}()
		return ct
	}
	var declared, plain []*counter
	for i := range 3 {
		declared = append(declared, open(i, `{"extensions":{"io.modelcontextprotocol/events":{}}}`))
		plain = append(plain, open(i, `{"sampling":{}}`))
	}
	time.Sleep(300 * time.Millisecond)
	const changes = 3
	for n := 1; n <= changes; n++ {
		putEventTypes(t, c.dbPath, notify.OpPut, fmt.Sprintf("m%d", n), fmt.Sprintf(`{"name":"e0","description":"v%d"}`, n))
		time.Sleep(400 * time.Millisecond)
	}
	// A change back to a notified content is no change at all for the
	// hash (the same items): nothing more.
	putEventTypes(t, c.dbPath, notify.OpPut, "m-same", fmt.Sprintf(`{"name":"e0","description":"v%d"}`, changes))
	time.Sleep(400 * time.Millisecond)
	for i, ct := range declared {
		if diff := cmp.Diff(map[string]int{"notifications/events/list_changed": changes}, ct.snapshot()); diff != "" {
			t.Errorf("declaring session %d (-want +got):\n%s", i, diff)
		}
	}
	for i, ct := range plain {
		if got := ct.snapshot(); len(got) != 0 {
			t.Errorf("session %d that did not declare the extension got %v", i, got)
		}
	}
}

// appendTopic appends events (data JSON) to topic in the database at
// path, each with its SNS MessageId, kept ttl (0: the default).
func appendTopic(t *testing.T, path, topic string, ttl time.Duration, events ...[2]string) {
	t.Helper()
	st, err := sqlitestore.New(path, &sqlitestore.Options{TopicEventTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, ev := range events {
		if _, _, err := st.AppendTopicEvent(context.Background(), topic, ev[0], time.Now(), json.RawMessage(ev[1])); err != nil {
			t.Fatal(err)
		}
	}
}

// pollReply is a decoded events/poll response.
type pollReply struct {
	Result *mcp.PollEventsResult
	Error  *mcp.Error
}

func poll(t *testing.T, url, params string) *pollReply {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"events/poll","params":{` + params + `,` + meta2026(`{}`) + `}}`
	_, r := call2026(t, url, body, headers2026("events/poll", "")...)
	out := &pollReply{}
	if r.Error != nil {
		out.Error = &mcp.Error{Code: r.Error.Code, Message: r.Error.Message, Data: r.Error.Data}
		return out
	}
	b, _ := json.Marshal(r.Result)
	if err := json.Unmarshal(b, &out.Result); err != nil {
		t.Fatal(err)
	}
	return out
}

func cursorParam(c *string) string {
	if c == nil {
		return `"cursor":null`
	}
	return `"cursor":"` + *c + `"`
}

// TestEventsPoll: a poll with a null cursor starts from now (no events,
// a cursor); later polls on any process return what the topic received
// since, in order, with eventIds derived from the SNS MessageIds, in
// batches of maxEvents (hasMore), nextPollMs 1 s after events and the
// configured interval when idle; arguments filter by equality on data's
// members; non-object data arrives as {"value":…}.
func TestEventsPoll(t *testing.T) {
	c := newCluster(t, 3, eventsOn, func(o *mcp.ServerOptions) { o.EventsPollInterval = 7 * time.Second })
	putEventTypes(t, c.dbPath, notify.OpPut, "m1",
		`{"name":"order.created","topic":"orders","inputSchema":{"type":"object","properties":{"region":{"type":"string"},"n":{"type":"number"}}}}`)
	appendTopic(t, c.dbPath, "orders", 0, [2]string{"old", `{"region":"eu"}`}) // before the subscription

	r := poll(t, c.urls[0], `"name":"order.created","cursor":null`)
	if r.Error != nil || len(r.Result.Events) != 0 || r.Result.Cursor == nil || r.Result.HasMore || r.Result.Truncated || r.Result.ResultType != "complete" {
		t.Fatalf("first poll: %+v %+v", r.Result, r.Error)
	}
	start := r.Result.Cursor
	appendTopic(t, c.dbPath, "orders", 0,
		[2]string{"mid-1", `{"region":"eu","n":1}`},
		[2]string{"mid-2", `{"region":"us","n":2.0}`},
		[2]string{"mid-3", `"plain text"`},
		[2]string{"mid-4", `{"region":"eu","n":2}`},
	)
	r = poll(t, c.urls[1], `"name":"order.created",`+cursorParam(start))
	if r.Error != nil {
		t.Fatal(r.Error)
	}
	var ids []string
	for _, e := range r.Result.Events {
		ids = append(ids, e.EventID)
		if e.Name != "order.created" || e.Timestamp == "" || e.Meta["mcpush/messageId"] == nil {
			t.Errorf("event %+v", e)
		}
	}
	want := []string{mcp.EventID("order.created", "mid-1"), mcp.EventID("order.created", "mid-2"), mcp.EventID("order.created", "mid-3"), mcp.EventID("order.created", "mid-4")}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("eventIds (-want +got):\n%s", diff)
	}
	if len(r.Result.Events) == 4 && string(r.Result.Events[2].Data) != `{"value":"plain text"}` {
		t.Errorf("plain text data = %s", r.Result.Events[2].Data)
	}
	if r.Result.HasMore || r.Result.Truncated || r.Result.NextPollMs != 1000 {
		t.Errorf("poll with events: hasMore %t truncated %t nextPollMs %d", r.Result.HasMore, r.Result.Truncated, r.Result.NextPollMs)
	}
	again := poll(t, c.urls[2], `"name":"order.created",`+cursorParam(r.Result.Cursor))
	if again.Error != nil || len(again.Result.Events) != 0 || again.Result.NextPollMs != 7000 || again.Result.Truncated {
		t.Errorf("idle poll: %+v %+v", again.Result, again.Error)
	}

	// maxEvents: batches, hasMore until drained.
	var batches [][]string
	cur := start
	for range 5 {
		r := poll(t, c.urls[0], `"name":"order.created","maxEvents":3,`+cursorParam(cur))
		if r.Error != nil {
			t.Fatal(r.Error)
		}
		var b []string
		for _, e := range r.Result.Events {
			b = append(b, e.EventID)
		}
		batches = append(batches, b)
		cur = r.Result.Cursor
		if !r.Result.HasMore {
			break
		}
	}
	if diff := cmp.Diff([][]string{want[:3], want[3:]}, batches); diff != "" {
		t.Errorf("batches of 3 (-want +got):\n%s", diff)
	}

	// Arguments filter: equality of members of data (2 equals 2.0).
	for _, tc := range []struct {
		args string
		want []string
	}{
		{`{"region":"eu"}`, []string{want[0], want[3]}},
		{`{"n":2}`, []string{want[1], want[3]}},
		{`{"region":"eu","n":2}`, []string{want[3]}},
		{`{"region":"mars"}`, nil},
		{`{}`, want},
	} {
		r := poll(t, c.urls[1], `"name":"order.created","arguments":`+tc.args+`,`+cursorParam(start))
		if r.Error != nil {
			t.Fatalf("%s: %v", tc.args, r.Error)
		}
		var got []string
		for _, e := range r.Result.Events {
			got = append(got, e.EventID)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("arguments %s (-want +got):\n%s", tc.args, diff)
		}
	}
}

// TestEventsPollRefused: what events/poll refuses, each with its JSON-RPC
// error, and a forged or another type's cursor among them.
func TestEventsPollRefused(t *testing.T) {
	c := newCluster(t, 1, eventsOn)
	putEventTypes(t, c.dbPath, notify.OpPut, "m1",
		`{"name":"a","topic":"t","inputSchema":{"type":"object","properties":{"region":{"type":"string"}},"additionalProperties":false}}`,
		`{"name":"b","topic":"t"}`,
		`{"name":"hook","delivery":["webhook"]}`)
	cursorA := poll(t, c.urls[0], `"name":"a","cursor":null`).Result.Cursor
	cursorB := poll(t, c.urls[0], `"name":"b","cursor":null`).Result.Cursor
	forged := strings.TrimSuffix(*cursorA, (*cursorA)[len(*cursorA)-2:]) + "AA"
	if forged == *cursorA {
		forged = strings.TrimSuffix(*cursorA, (*cursorA)[len(*cursorA)-2:]) + "BB"
	}
	// Another key's cursor: as a client might mint one.
	other := newCluster(t, 1, eventsOn, func(o *mcp.ServerOptions) { o.StateKeys = [][]byte{[]byte("another-key-0123456789abcdef0123456")} })
	putEventTypes(t, other.dbPath, notify.OpPut, "m1", `{"name":"a","topic":"t"}`)
	minted := poll(t, other.urls[0], `"name":"a","cursor":null`).Result.Cursor
	for _, tc := range []struct {
		name, params string
		code         int
		text         string
	}{
		{"no name", `"cursor":null`, mcp.CodeInvalidParams, "name is required"},
		{"unknown type", `"name":"nope","cursor":null`, mcp.CodeNotFound, "NotFound"},
		{"webhook only", `"name":"hook","cursor":null`, mcp.CodeUnsupported, "does not offer poll"},
		{"arguments against the schema", `"name":"a","arguments":{"region":5},"cursor":null`, mcp.CodeInvalidParams, "inputSchema"},
		{"an argument the schema forbids", `"name":"a","arguments":{"colour":"red"},"cursor":null`, mcp.CodeInvalidParams, "inputSchema"},
		{"arguments not an object", `"name":"a","arguments":[1],"cursor":null`, mcp.CodeInvalidParams, "JSON object"},
		{"arguments too large", `"name":"b","arguments":{"x":"` + strings.Repeat("x", mcp.MaxEventArgumentsBytes) + `"},"cursor":null`, mcp.CodeInvalidParams, "more than"},
		{"maxEvents 0", `"name":"a","maxEvents":0,"cursor":null`, mcp.CodeInvalidParams, "maxEvents"},
		{"negative maxAgeMs", `"name":"a","maxAgeMs":-1,` + cursorParam(cursorA), mcp.CodeInvalidParams, "maxAgeMs"},
		{"forged cursor", `"name":"a",` + cursorParam(&forged), mcp.CodeInvalidParams, "signature"},
		{"cursor minted with another key", `"name":"a",` + cursorParam(minted), mcp.CodeInvalidParams, "signature"},
		{"another type's cursor", `"name":"a",` + cursorParam(cursorB), mcp.CodeInvalidParams, "another event type"},
		{"garbage cursor", `"name":"a","cursor":"hello"`, mcp.CodeInvalidParams, "malformed"},
		{"empty cursor", `"name":"a","cursor":""`, mcp.CodeInvalidParams, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := poll(t, c.urls[0], tc.params)
			if r.Error == nil || r.Error.Code != tc.code || !strings.Contains(r.Error.Message, tc.text) {
				t.Errorf("got %+v, %+v; want code %d with %q", r.Result, r.Error, tc.code, tc.text)
			}
		})
	}
	if r := poll(t, c.urls[0], `"name":"nope","cursor":null`); r.Error == nil || string(r.Error.Data) != `{"kind":"event"}` {
		t.Errorf("NotFound data: %+v", r.Error)
	}
	if r := poll(t, c.urls[0], `"name":"hook","cursor":null`); r.Error == nil || string(r.Error.Data) != `{"feature":"deliveryMode","value":"poll"}` {
		t.Errorf("Unsupported data: %+v", r.Error)
	}
}

// TestEventsPollTruncated: a cursor that points before what the topic's
// log keeps gets what is left with truncated: true, and a cursor moved
// past the gap; so does a cursor all of whose later events have left the
// log, and one of an event type whose topic changed (from now).
func TestEventsPollTruncated(t *testing.T) {
	c := newCluster(t, 2, eventsOn)
	putEventTypes(t, c.dbPath, notify.OpPut, "m1", `{"name":"e","topic":"t"}`)
	start := poll(t, c.urls[0], `"name":"e","cursor":null`).Result.Cursor
	appendTopic(t, c.dbPath, "t", time.Millisecond, [2]string{"gone-1", `{}`}, [2]string{"gone-2", `{}`})
	time.Sleep(5 * time.Millisecond)
	appendTopic(t, c.dbPath, "t", 0, [2]string{"kept-3", `{}`})
	r := poll(t, c.urls[1], `"name":"e",`+cursorParam(start))
	if r.Error != nil || !r.Result.Truncated || len(r.Result.Events) != 1 || r.Result.Events[0].EventID != mcp.EventID("e", "kept-3") {
		t.Fatalf("poll over a gap: %+v %+v", r.Result, r.Error)
	}
	after3 := r.Result.Cursor
	appendTopic(t, c.dbPath, "t", time.Millisecond, [2]string{"gone-4", `{}`})
	time.Sleep(5 * time.Millisecond)
	r = poll(t, c.urls[0], `"name":"e",`+cursorParam(after3))
	if r.Error != nil || !r.Result.Truncated || len(r.Result.Events) != 0 {
		t.Fatalf("poll after everything left: %+v %+v", r.Result, r.Error)
	}
	r = poll(t, c.urls[1], `"name":"e",`+cursorParam(r.Result.Cursor))
	if r.Error != nil || r.Result.Truncated || len(r.Result.Events) != 0 {
		t.Fatalf("poll from the moved cursor: %+v %+v", r.Result, r.Error)
	}
	// maxAgeMs skips older events, and says so.
	st, err := sqlitestore.New(c.dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []struct {
		id  string
		age time.Duration
	}{{"aged-5", time.Hour}, {"fresh-6", 0}} {
		if _, _, err := st.AppendTopicEvent(context.Background(), "t", ev.id, time.Now().Add(-ev.age), json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	r2 := poll(t, c.urls[0], `"name":"e","maxAgeMs":600000,`+cursorParam(r.Result.Cursor))
	if r2.Error != nil || !r2.Result.Truncated || len(r2.Result.Events) != 1 || r2.Result.Events[0].EventID != mcp.EventID("e", "fresh-6") {
		t.Fatalf("poll with maxAgeMs: %+v %+v", r2.Result, r2.Error)
	}
	// The event type moves to another topic: from now, truncated.
	putEventTypes(t, c.dbPath, notify.OpPut, "m2", `{"name":"e","topic":"u"}`)
	time.Sleep(50 * time.Millisecond)
	rpc2026(t, c.urls[1], "events/list", "") // renews the process's copy of the registry
	time.Sleep(50 * time.Millisecond)
	r3 := poll(t, c.urls[1], `"name":"e",`+cursorParam(r2.Result.Cursor))
	if r3.Error != nil || !r3.Result.Truncated || len(r3.Result.Events) != 0 {
		t.Fatalf("poll after the topic changed: %+v %+v", r3.Result, r3.Error)
	}
}

var _ sync.Mutex
var _ = filepath.Join

// TestEventsListsNeverNull: every list member of an Events result is a
// JSON array, never null: an idle poll's events (from a cursor, with
// nothing new, and with events the arguments filter out), the first
// poll's, and events/list's on a server with no event types.
func TestEventsListsNeverNull(t *testing.T) {
	empty := newCluster(t, 1, eventsOn)
	if r := rpc2026(t, empty.urls[0], "events/list", ""); r.Error != nil || fmt.Sprintf("%#v", r.Result["events"]) != "[]interface {}{}" {
		t.Errorf("events/list of no types: events = %#v, %+v", r.Result["events"], r.Error)
	}
	c := newCluster(t, 1, eventsOn)
	putEventTypes(t, c.dbPath, notify.OpPut, "m1", `{"name":"e","topic":"t","inputSchema":{"type":"object","properties":{"region":{"type":"string"}}}}`)
	first := rpc2026(t, c.urls[0], "events/poll", `"name":"e","cursor":null`)
	cur, _ := first.Result["cursor"].(string)
	idle := rpc2026(t, c.urls[0], "events/poll", `"name":"e","cursor":"`+cur+`"`)
	appendTopic(t, c.dbPath, "t", 0, [2]string{"m-1", `{"region":"us"}`})
	filtered := rpc2026(t, c.urls[0], "events/poll", `"name":"e","arguments":{"region":"eu"},"cursor":"`+cur+`"`)
	for name, r := range map[string]*rpcReply{"first poll": first, "idle poll": idle, "filtered poll": filtered} {
		if r.Error != nil {
			t.Fatalf("%s: %+v", name, r.Error)
		}
		if ev, ok := r.Result["events"].([]any); !ok || len(ev) != 0 {
			t.Errorf("%s: events = %#v, want []", name, r.Result["events"])
		}
	}
}

// TestEventsMcpName: in the 2026 era the Events methods that name an
// event type (events/poll, events/stream, events/subscribe,
// events/unsubscribe) may carry Mcp-Name; when they do it must be the
// body's name (base64 form included), else 400 HeaderMismatch (-32020)
// before anything is served, as for tools/call. Absent, the request is
// served (SEP-3415 does not define the header for them, and the
// TypeScript SDK does not send it). This package's client sends it.
func TestEventsMcpName(t *testing.T) {
	var seen sync.Map // method -> the Mcp-Name the client sent
	c := newCluster(t, 1, eventsOn)
	putEventTypes(t, c.dbPath, notify.OpPut, "m1", `{"name":"order.created","topic":"orders"}`)
	body := func(method string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"name":"order.created","cursor":null,` + meta2026(`{}`) + `}}`
	}
	for _, method := range []string{"events/poll", "events/stream", "events/subscribe", "events/unsubscribe"} {
		for _, tc := range []struct {
			name   string
			header []string
			ok     bool
		}{
			{"the body's name, base64", []string{"Mcp-Name", "=?base64?b3JkZXIuY3JlYXRlZA==?="}, true},
			{"absent", nil, true},
			{"another name", []string{"Mcp-Name", "order.deleted"}, false},
			{"empty", []string{"Mcp-Name", ""}, false},
		} {
			var mismatch bool
			if method == "events/stream" {
				// Served, it is a held stream: read its first bytes only.
				mismatch = streamRefused(t, c.urls[0], body(method), append(headers2026(method, ""), tc.header...))
			} else {
				status, r := call2026(t, c.urls[0], body(method), append(headers2026(method, ""), tc.header...)...)
				mismatch = status == http.StatusBadRequest && r.Error != nil && r.Error.Code == mcp.CodeHeaderMismatch && strings.Contains(r.Error.Message, "Mcp-Name")
			}
			if mismatch == tc.ok {
				t.Errorf("%s, Mcp-Name %s: a mismatch %v, want %v", method, tc.name, mismatch, !tc.ok)
			}
		}
	}
	// The client sends it.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m := r.Header.Get("Mcp-Method"); strings.HasPrefix(m, "events/") {
			seen.Store(m, r.Header.Get("Mcp-Name"))
		}
		target, _ := url.Parse(c.urls[0])
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	defer proxy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{Mode: mcp.ClientMode2026}).Connect(ctx, proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	if _, err := cs.PollEvents(ctx, &mcp.PollEventsParams{Name: "order.created"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := seen.Load("events/poll"); v != "order.created" {
		t.Errorf("the client's Mcp-Name on events/poll: %q", v)
	}
}

// streamRefused POSTs an events/stream and reports whether it was
// refused with 400 HeaderMismatch naming Mcp-Name; a stream that opens
// is read up to its first event and closed.
func streamRefused(t *testing.T, url, body string, header []string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		if !strings.Contains(line, "notifications/events/active") && !strings.HasPrefix(line, "id:") && !strings.HasPrefix(line, "data:") {
			t.Errorf("an opened events stream began with %q", line)
		}
		return false
	}
	b, _ := io.ReadAll(resp.Body)
	var r rpcReply
	json.Unmarshal(b, &r)
	return resp.StatusCode == http.StatusBadRequest && r.Error != nil && r.Error.Code == mcp.CodeHeaderMismatch && strings.Contains(r.Error.Message, "Mcp-Name")
}

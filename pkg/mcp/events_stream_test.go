package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// openEventStream posts events/stream with params (members of the params
// object) and request id id to url: a 2026-era request when sid is "",
// else a request of the 2025-era session sid.
func openEventStream(t *testing.T, ctx context.Context, url, sid, id, params string) *http.Response {
	t.Helper()
	var body string
	var hdr []string
	if sid == "" {
		body = `{"jsonrpc":"2.0","id":"` + id + `","method":"events/stream","params":{` + params + `,` + meta2026(`{}`) + `}}`
		hdr = headers2026("events/stream", "")
	} else {
		body = `{"jsonrpc":"2.0","id":"` + id + `","method":"events/stream","params":{` + params + `}}`
		hdr = []string{"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25"}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for ; len(hdr) > 1; hdr = hdr[2:] {
		req.Header.Set(hdr[0], hdr[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// streamEvent is a message of an events stream, decoded.
type streamEvent struct {
	method    string
	eventID   string
	cursor    string
	truncated bool
	subID     string
}

func decodeStreamEvent(t *testing.T, m map[string]any) streamEvent {
	t.Helper()
	p, _ := m["params"].(map[string]any)
	meta, _ := p["_meta"].(map[string]any)
	ev := streamEvent{method: fmt.Sprint(m["method"]), subID: fmt.Sprint(meta["io.modelcontextprotocol/subscriptionId"])}
	ev.eventID, _ = p["eventId"].(string)
	ev.cursor, _ = p["cursor"].(string)
	ev.truncated, _ = p["truncated"].(bool)
	return ev
}

// nextStream returns the next message of an events stream, skipping
// heartbeats unless withBeats.
func nextStream(t *testing.T, ch <-chan map[string]any) streamEvent {
	t.Helper()
	for {
		ev := decodeStreamEvent(t, next(t, ch))
		if ev.method != "notifications/events/heartbeat" {
			return ev
		}
	}
}

// TestEventStream: events/stream in both eras across two processes: the
// confirmation first (notifications/events/active with a cursor and the
// request id in _meta), then each event published through the ingest, in
// order, with the eventId events/poll gives it and a cursor that a poll
// on the other process resumes from; a stream from a poll's cursor
// replays the same eventIds; arguments filter on data's members; in the
// 2026 era a notifications/cancelled of the request id, sent to the other
// process, ends the stream.
func TestEventStream(t *testing.T) {
	c := newCluster(t, 2, eventsOn)
	putEventTypes(t, c.dbPath, notify.OpPut, "m1",
		`{"name":"order","topic":"orders","inputSchema":{"type":"object","properties":{"region":{"type":"string"}}}}`)
	ingestStore, err := sqlitestore.New(c.dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ingestStore.Close()
	for _, era := range []string{"2025", "2026"} {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sid := ""
			if era == "2025" {
				sid = initialize(t, c.urls[0], "2025-11-25")
			}
			resp := openEventStream(t, ctx, c.urls[0], sid, "sub-1", `"name":"order","cursor":null`)
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("Content-Type %q", ct)
			}
			ch := streamMessages(t, resp)
			active := nextStream(t, ch)
			if active.method != "notifications/events/active" || active.cursor == "" || active.truncated || active.subID != "sub-1" {
				t.Fatalf("first message: %+v", active)
			}
			var ids []string
			for i, region := range []string{"eu", "us", "eu"} {
				id := fmt.Sprintf("%s-%d", era, i)
				publish(t, ingestStore, "orders", id, map[string]any{"region": region, "i": i})
				ids = append(ids, mcp.EventID("order", id))
			}
			var got []streamEvent
			for range ids {
				ev := nextStream(t, ch)
				if ev.method != "notifications/events/event" || ev.cursor == "" || ev.subID != "sub-1" {
					t.Fatalf("event: %+v", ev)
				}
				got = append(got, ev)
			}
			var gotIDs []string
			for _, ev := range got {
				gotIDs = append(gotIDs, ev.eventID)
			}
			if diff := cmp.Diff(ids, gotIDs); diff != "" {
				t.Fatalf("eventIds (-want +got):\n%s", diff)
			}
			// Poll on the other process: from the stream's first cursor the
			// same eventIds, from an event's cursor the ones after it.
			p := poll(t, c.urls[1], `"name":"order","cursor":"`+active.cursor+`"`)
			var polled []string
			for _, e := range p.Result.Events {
				polled = append(polled, e.EventID)
			}
			if diff := cmp.Diff(ids, polled); p.Error != nil || diff != "" {
				t.Fatalf("poll from the active cursor: %+v (-want +got):\n%s", p.Error, diff)
			}
			if p := poll(t, c.urls[1], `"name":"order","cursor":"`+got[1].cursor+`"`); p.Error != nil || len(p.Result.Events) != 1 || p.Result.Events[0].EventID != ids[2] {
				t.Fatalf("poll from the second event's cursor: %+v %+v", p.Result, p.Error)
			}
			if p := poll(t, c.urls[1], `"name":"order","cursor":"`+got[2].cursor+`"`); p.Error != nil || len(p.Result.Events) != 0 || *p.Result.Cursor != *cursorOf(got[2]) {
				t.Fatalf("poll from the last event's cursor: %+v %+v", p.Result, p.Error)
			}
			// A stream from the poll's first cursor, on the other process,
			// replays them; one with region=eu only those.
			replay := streamMessages(t, openEventStream(t, ctx, c.urls[1], sid, "sub-2", `"name":"order","cursor":"`+active.cursor+`"`))
			if ev := nextStream(t, replay); ev.method != "notifications/events/active" || ev.truncated || ev.subID != "sub-2" {
				t.Fatalf("replay: first message %+v", ev)
			}
			for i, want := range ids {
				if ev := nextStream(t, replay); ev.eventID != want || ev.cursor != got[i].cursor {
					t.Fatalf("replay: event %d: %+v, want %s with cursor %s", i, ev, want, got[i].cursor)
				}
			}
			eu := streamMessages(t, openEventStream(t, ctx, c.urls[1], sid, "sub-3", `"name":"order","arguments":{"region":"eu"},"cursor":"`+active.cursor+`"`))
			nextStream(t, eu)
			for _, want := range []string{ids[0], ids[2]} {
				if ev := nextStream(t, eu); ev.eventID != want {
					t.Fatalf("region=eu: %+v, want %s", ev, want)
				}
			}
			publish(t, ingestStore, "orders", era+"-us-late", map[string]any{"region": "us"})
			publish(t, ingestStore, "orders", era+"-eu-late", map[string]any{"region": "eu"})
			if ev := nextStream(t, eu); ev.eventID != mcp.EventID("order", era+"-eu-late") {
				t.Fatalf("region=eu, live: %+v", ev)
			}
			if era != "2026" {
				return
			}
			// A notifications/cancelled of its request id, to the other
			// process, ends the stream without a response.
			resp, _ = testutil.PostRead(t, nil, c.urls[0], "", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"sub-3",`+meta2026(`{}`)+`}}`,
				headers2026("notifications/cancelled", "")...)
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("notifications/cancelled: HTTP %d", resp.StatusCode)
			}
			for {
				select {
				case m, open := <-eu:
					if !open {
						return
					}
					if ev := decodeStreamEvent(t, m); ev.method != "notifications/events/heartbeat" {
						t.Fatalf("after the cancellation: %v", m)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the cancelled events stream is still open after 10 s")
				}
			}
		})
	}
}

func cursorOf(ev streamEvent) *string { return &ev.cursor }

// TestEventStreamRefused: what events/stream refuses, with its JSON-RPC
// error and no stream opened, in both eras; nothing is stored.
func TestEventStreamRefused(t *testing.T) {
	c := newCluster(t, 1, eventsOn)
	putEventTypes(t, c.dbPath, notify.OpPut, "m1",
		`{"name":"a","topic":"t","inputSchema":{"type":"object","properties":{"region":{"type":"string"}},"additionalProperties":false}}`,
		`{"name":"b","topic":"t"}`,
		`{"name":"pollonly","delivery":["poll","webhook"]}`)
	cursorA := poll(t, c.urls[0], `"name":"a","cursor":null`).Result.Cursor
	cursorB := poll(t, c.urls[0], `"name":"b","cursor":null`).Result.Cursor
	forged := (*cursorA)[:len(*cursorA)-2] + "AA"
	if forged == *cursorA {
		forged = (*cursorA)[:len(*cursorA)-2] + "BB"
	}
	sid := initialize(t, c.urls[0], "2025-11-25")
	rows := c.rowCount(t)
	for _, tc := range []struct {
		name, params string
		code         int
		text, data   string
	}{
		{"unknown type", `"name":"nope","cursor":null`, mcp.CodeNotFound, "NotFound", `{"kind":"event"}`},
		{"push not offered", `"name":"pollonly","cursor":null`, mcp.CodeUnsupported, "does not offer push", `{"feature":"deliveryMode","value":"push"}`},
		{"arguments against the schema", `"name":"a","arguments":{"region":5},"cursor":null`, mcp.CodeInvalidParams, "inputSchema", ""},
		{"an argument the schema forbids", `"name":"a","arguments":{"colour":"red"},"cursor":null`, mcp.CodeInvalidParams, "inputSchema", ""},
		{"forged cursor", `"name":"a",` + cursorParam(&forged), mcp.CodeInvalidParams, "signature", ""},
		{"another type's cursor", `"name":"a",` + cursorParam(cursorB), mcp.CodeInvalidParams, "another event type", ""},
		{"garbage cursor", `"name":"a","cursor":"hello"`, mcp.CodeInvalidParams, "malformed", ""},
		{"negative maxAgeMs", `"name":"a","maxAgeMs":-1,` + cursorParam(cursorA), mcp.CodeInvalidParams, "maxAgeMs", ""},
	} {
		for _, era := range []string{"2025", "2026"} {
			t.Run(tc.name+" "+era, func(t *testing.T) {
				s := ""
				if era == "2025" {
					s = sid
				}
				resp := openEventStream(t, context.Background(), c.urls[0], s, "r", tc.params)
				defer resp.Body.Close()
				var m struct {
					Error *mcp.Error `json:"error"`
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" || json.NewDecoder(resp.Body).Decode(&m) != nil || m.Error == nil {
					t.Fatalf("%d %s: want a JSON-RPC error", resp.StatusCode, ct)
				}
				if m.Error.Code != tc.code || !strings.Contains(m.Error.Message, tc.text) || (tc.data != "" && string(m.Error.Data) != tc.data) {
					t.Errorf("got %+v (data %s); want code %d with %q, data %s", m.Error, m.Error.Data, tc.code, tc.text, tc.data)
				}
			})
		}
	}
	if got := c.rowCount(t); got != rows {
		t.Errorf("refused streams stored rows: %d, then %d", rows, got)
	}
}

// roundRobin is a reverse proxy that sends each request to the next of
// urls: a client behind it reaches every process in turn.
func roundRobin(t *testing.T, urls []string) string {
	var n atomic.Int64
	var proxies []*httputil.ReverseProxy
	for _, u := range urls {
		target, _ := url.Parse(u)
		p := httputil.NewSingleHostReverseProxy(target)
		p.FlushInterval = -1
		proxies = append(proxies, p)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxies[int(n.Add(1))%len(proxies)].ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestClientStreamEventsReconnects: StreamEvents across two processes
// sharing one store (SQLite, and DynamoDB on moto), both eras, behind a
// round-robin proxy: each stream ends at the server's deadline
// (MaxStreamDuration), an event is published through the ingest while
// the client is between two streams, and the client, reconnecting from
// its last cursor to the other process, gets every event exactly once
// and in order.
func TestClientStreamEventsReconnects(t *testing.T) {
	for _, hs := range clockedStores(t, time.Now) {
		t.Run(hs.name, func(t *testing.T) {
			var urls []string
			var st mcp.Store
			for range 2 {
				st = hs.open(t)
				srv := mcp.NewServer(&mcp.Implementation{Name: "events", Version: "1"}, st, &mcp.ServerOptions{
					DynamicRegistries: true, Events: true, RegistryRefresh: 20 * time.Millisecond, PollInterval: 50 * time.Millisecond,
					StateKeys: [][]byte{[]byte("events-stream-key-0123456789abcdef01")},
					Logger:    slog.New(slog.DiscardHandler),
				})
				h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, MaxStreamDuration: 3 * time.Second, StreamMargin: time.Second})
				ts := httptest.NewServer(h)
				t.Cleanup(func() { ts.Close(); h.Close() })
				urls = append(urls, ts.URL)
			}
			topic := "orders-" + hs.name
			item, _ := json.Marshal(notify.EventItem{Name: "order", Topic: topic}.WithDefaults())
			if _, _, err := st.ApplyRegistry(context.Background(), notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order": item}, "m-"+hs.name); err != nil {
				t.Fatal(err)
			}
			proxy := roundRobin(t, urls)
			for _, mode := range []mcp.ClientMode{mcp.ClientMode2026, mcp.ClientMode2025} {
				era := map[mcp.ClientMode]string{mcp.ClientMode2026: "2026", mcp.ClientMode2025: "2025"}[mode]
				t.Run(era, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{Mode: mode, Logger: slog.New(slog.DiscardHandler),
						NoStandaloneStream: true, RetryDelay: 300 * time.Millisecond})
					cs, err := client.Connect(ctx, proxy)
					if err != nil {
						t.Fatal(err)
					}
					defer cs.Close(context.Background())
					var (
						mu      sync.Mutex
						got     []string
						actives int
						ends    []error
					)
					published := []string{}
					pub := func(id string) {
						publish(t, st, topic, id, map[string]any{"id": id})
						mu.Lock()
						published = append(published, mcp.EventID("order", id))
						mu.Unlock()
					}
					prefix := hs.name + "-" + era
					err = cs.StreamEvents(ctx, mcp.StreamEventsParams{Name: "order"}, &mcp.EventStreamOptions{OnEnd: func(err error) {
						mu.Lock()
						ends = append(ends, err)
						n := len(ends)
						mu.Unlock()
						// Between two streams: published while no stream is open.
						pub(fmt.Sprintf("%s-between-%d", prefix, n))
					}}, func(m *mcp.EventStreamMessage) error {
						mu.Lock()
						defer mu.Unlock()
						switch m.Kind {
						case "active":
							actives++
							if actives == 1 {
								go pub(prefix + "-first")
							}
						case "event":
							got = append(got, m.Event.EventID)
							if len(ends) >= 2 && len(got) == len(published) {
								return mcp.ErrStopStreaming
							}
						}
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					mu.Lock()
					defer mu.Unlock()
					if diff := cmp.Diff(published, got); diff != "" {
						t.Errorf("events (-published +got):\n%s", diff)
					}
					for _, e := range ends {
						if e != nil {
							t.Errorf("a stream ended with %v, want the server's end at its deadline", e)
						}
					}
					if actives < 3 {
						t.Errorf("%d streams, want 3 or more", actives)
					}
				})
			}
		})
	}
}

// TestClientStreamEventsDedupAndSilence: StreamEvents against a server
// that misbehaves: its second stream repeats an event of the first, which
// the client hands on once; the stream then goes silent, and the client
// reconnects after EventStreamOptions.Silence; each reconnection carries
// the last cursor received and waits the client's back-off; the events
// go to StreamEvents' handler only, not to the session's notification
// handlers.
func TestClientStreamEventsDedupAndSilence(t *testing.T) {
	c := newCluster(t, 1, eventsOn)
	real, _ := url.Parse(c.urls[0])
	proxy := httputil.NewSingleHostReverseProxy(real)
	var (
		mu      sync.Mutex
		cursors []string // the cursor of each events/stream request
		starts  []time.Time
		ended   []time.Time
	)
	event := func(id, cursor string) string {
		return `{"jsonrpc":"2.0","method":"notifications/events/event","params":{"eventId":"` + id + `","name":"e","timestamp":"2026-11-27T00:00:00Z","data":{},"cursor":"` + cursor + `","_meta":{"io.modelcontextprotocol/subscriptionId":1}}}`
	}
	active := func(cursor string) string {
		return `{"jsonrpc":"2.0","method":"notifications/events/active","params":{"cursor":"` + cursor + `","truncated":false,"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}`
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") != "events/stream" {
			proxy.ServeHTTP(w, r)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Cursor *string `json:"cursor"`
			} `json:"params"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		n := len(cursors)
		cursor := "null"
		if m.Params.Cursor != nil {
			cursor = *m.Params.Cursor
		}
		cursors = append(cursors, cursor)
		starts = append(starts, time.Now())
		mu.Unlock()
		defer func() {
			mu.Lock()
			ended = append(ended, time.Now())
			mu.Unlock()
		}()
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(msgs ...string) {
			for _, msg := range msgs {
				fmt.Fprintf(w, "data: %s\n\n", msg)
			}
			w.(http.Flusher).Flush()
		}
		switch n {
		case 0: // an event, then the server's end
			send(active("c0"), event("evt_A", "c1"), `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"resultType":"complete"}}`)
		case 1: // A again, B, then silence
			send(active("c1"), event("evt_A", "c1"), event("evt_B", "c2"))
			<-r.Context().Done()
		default:
			send(active("c2"), event("evt_C", "c3"))
			<-r.Context().Done()
		}
	}))
	t.Cleanup(ts.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var queued atomic.Int64
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{Mode: mcp.ClientMode2026, Logger: slog.New(slog.DiscardHandler),
		NoStandaloneStream: true, RetryDelay: 200 * time.Millisecond, MinRetryDelay: 200 * time.Millisecond})
	client.AddNotificationHandler("notifications/events/event", func(context.Context, *mcp.ClientSession, string, json.RawMessage) { queued.Add(1) })
	cs, err := client.Connect(ctx, ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	var got []string
	const silence = 400 * time.Millisecond
	err = cs.StreamEvents(ctx, mcp.StreamEventsParams{Name: "e"}, &mcp.EventStreamOptions{Silence: silence}, func(m *mcp.EventStreamMessage) error {
		if m.Kind == "event" {
			got = append(got, m.Event.EventID)
			if m.Event.EventID == "evt_C" {
				return mcp.ErrStopStreaming
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"evt_A", "evt_B", "evt_C"}, got); diff != "" {
		t.Errorf("events handed on (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"null", "c1", "c2"}, cursors); diff != "" {
		t.Errorf("cursors of the requests (-want +got):\n%s", diff)
	}
	if len(starts) == 3 && len(ended) >= 2 {
		if d := starts[1].Sub(ended[0]); d < 200*time.Millisecond {
			t.Errorf("reconnected %v after the server's end, want the back-off (200 ms) or more", d)
		}
		if d := ended[1].Sub(starts[1]); d < silence || d > silence+2*time.Second {
			t.Errorf("the silent stream was given up after %v, want about %v", d, silence)
		}
	}
	if n := queued.Load(); n != 0 {
		t.Errorf("%d events went to the session's notification handlers", n)
	}
}

// TestEventStreamStoreRequests counts the store requests of one
// events/stream (2026 era, SQLite) by moment: its opening from now, 3 s
// idle, an event of its topic published by another process, its end
// (the client leaves). The figures are in docs/held-streams.md.
func TestEventStreamStoreRequests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "count.db")
	st, err := sqlitestore.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ingestStore, err := sqlitestore.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ingestStore.Close() })
	var counter storecount.Counter
	srv := mcp.NewServer(&mcp.Implementation{Name: "count", Version: "1"}, storecount.Wrap(st, &counter), &mcp.ServerOptions{
		DynamicRegistries: true, Events: true, StateKeys: [][]byte{[]byte("events-count-key-0123456789abcdef0123")},
		Logger: slog.New(slog.DiscardHandler),
	})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	item, _ := json.Marshal(notify.EventItem{Name: "order", Topic: "orders"}.WithDefaults())
	if _, _, err := ingestStore.ApplyRegistry(context.Background(), notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order": item}, "m1"); err != nil {
		t.Fatal(err)
	}
	publish(t, ingestStore, "orders", "before", map[string]any{}) // the topic exists
	rpc2026(t, ts.URL, "events/list", "")                         // the registry is cached
	own := func(c storecount.Counts) storecount.Counts {
		delete(c, "Changes") // the process's watcher: shared by all its streams
		return c
	}
	settle := func() { time.Sleep(500 * time.Millisecond) }

	counter.Reset()
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	ch := streamMessages(t, openEventStream(t, ctx, ts.URL, "", "s", `"name":"order","cursor":null`))
	if ev := nextStream(t, ch); ev.method != "notifications/events/active" {
		t.Fatalf("first message %+v", ev)
	}
	settle()
	open := own(counter.Counts())

	counter.Reset()
	time.Sleep(3 * time.Second)
	idle := counter.Counts()

	counter.Reset()
	publish(t, ingestStore, "orders", "counted", map[string]any{})
	if ev := nextStream(t, ch); ev.eventID != mcp.EventID("order", "counted") {
		t.Fatalf("event %+v", ev)
	}
	settle()
	woken := own(counter.Counts())

	counter.Reset()
	leave()
	// Two deletes, in either order and not at once under load: the
	// backing session's, and the process's liveness record's.
	waitCount(&counter, "DeleteSession", 2)
	settle()
	end := own(counter.Counts())
	t.Logf("open: %v\nidle 3 s: %v\nwoken by an event: %v\nend: %v", open, idle, woken, end)

	if open.Writes() > 3 || open.Reads() > 8 {
		t.Errorf("open: %d writes, %d reads: %v", open.Writes(), open.Reads(), open)
	}
	if n := own(idle).Total(); n != 0 {
		t.Errorf("idle: %d requests of its own: %v", n, idle)
	}
	if woken.Writes() != 0 || woken.Reads() > 4 {
		t.Errorf("woken: %d writes, %d reads: %v", woken.Writes(), woken.Reads(), woken)
	}
	// The backing session's, and the process's liveness record's: its
	// last held stream ended.
	if end["DeleteSession"] != 2 || end.Total() > 3 {
		t.Errorf("end: %v", end)
	}
}

// TestClientStreamEventsSessionGone: a 2025-era StreamEvents whose
// session is deleted returns mcp.ErrSessionNotFound at its next
// reconnection (the server's stream ended at MaxStreamDuration) instead
// of reconnecting for ever.
func TestClientStreamEventsSessionGone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gone.db")
	st, err := sqlitestore.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := mcp.NewServer(&mcp.Implementation{Name: "gone", Version: "1"}, st, &mcp.ServerOptions{
		DynamicRegistries: true, Events: true, Logger: slog.New(slog.DiscardHandler)})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, MaxStreamDuration: time.Second, StreamMargin: 100 * time.Millisecond})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	item, _ := json.Marshal(notify.EventItem{Name: "order"}.WithDefaults())
	if _, _, err := st.ApplyRegistry(context.Background(), notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order": item}, "m1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{NoStandaloneStream: true, Logger: slog.New(slog.DiscardHandler)}).Connect(ctx, ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	err = cs.StreamEvents(ctx, mcp.StreamEventsParams{Name: "order"}, nil, func(m *mcp.EventStreamMessage) error {
		if m.Kind == "active" {
			return st.DeleteSession(ctx, cs.ID())
		}
		return nil
	})
	if !errors.Is(err, mcp.ErrSessionNotFound) {
		t.Fatalf("StreamEvents = %v, want ErrSessionNotFound", err)
	}
}

// TestEventStreamEndsWithSession: a DELETE of a 2025-era session, on
// another process, ends the events streams opened in it (and not another
// session's).
func TestEventStreamEndsWithSession(t *testing.T) {
	c := newCluster(t, 2, eventsOn)
	putEventTypes(t, c.dbPath, notify.OpPut, "m1", `{"name":"order"}`)
	ctx := t.Context()
	sid, other := initialize(t, c.urls[0], "2025-11-25"), initialize(t, c.urls[0], "2025-11-25")
	gone := streamMessages(t, openEventStream(t, ctx, c.urls[0], sid, "1", `"name":"order","cursor":null`))
	kept := streamMessages(t, openEventStream(t, ctx, c.urls[0], other, "1", `"name":"order","cursor":null`))
	for _, ch := range []<-chan map[string]any{gone, kept} {
		if ev := nextStream(t, ch); ev.method != "notifications/events/active" {
			t.Fatalf("first message %+v", ev)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, c.urls[1], nil)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	resp.Body.Close()
	for open := true; open; {
		select {
		case m, ok := <-gone:
			if open = ok; ok && decodeStreamEvent(t, m).method != "notifications/events/heartbeat" {
				t.Fatalf("after the DELETE: %v", m)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the deleted session's events stream is still open after 10 s")
		}
	}
	select {
	case m, ok := <-kept:
		t.Fatalf("the other session's stream: %v, %v", m, ok)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestEventStreamOverLimit: an events/stream over MaxListensPerPrincipal
// gets the listen quota's HTTP 429 with Retry-After, and the Events
// extension's ResourceExhausted (-32025) with data.limit "streams" and
// data.max, answering the request's id.
func TestEventStreamOverLimit(t *testing.T) {
	st, err := sqlitestore.New(filepath.Join(t.TempDir(), "limit.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := mcp.NewServer(&mcp.Implementation{Name: "limit", Version: "1"}, st, &mcp.ServerOptions{
		DynamicRegistries: true, Events: true, Logger: slog.New(slog.DiscardHandler),
		Limits: mcp.Limits{MaxListensPerPrincipal: 1},
	})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	item, _ := json.Marshal(notify.EventItem{Name: "order"}.WithDefaults())
	if _, _, err := st.ApplyRegistry(context.Background(), notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order": item}, "m1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := streamMessages(t, openEventStream(t, ctx, ts.URL, "", "s1", `"name":"order","cursor":null`))
	if ev := nextStream(t, ch); ev.method != "notifications/events/active" {
		t.Fatalf("first stream: first message %+v", ev)
	}
	resp := openEventStream(t, ctx, ts.URL, "", "s2", `"name":"order","cursor":null`)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var msg struct {
		ID    json.RawMessage `json:"id"`
		Error *mcp.Error      `json:"error"`
	}
	_ = json.Unmarshal(b, &msg)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second stream: HTTP %d, Retry-After %q, body %s; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if msg.Error == nil || msg.Error.Code != mcp.CodeResourceExhausted || string(msg.ID) != `"s2"` {
		t.Fatalf("second stream: %s; want error -32025 (ResourceExhausted) for id s2", b)
	}
	var data struct {
		Limit string `json:"limit"`
		Max   int    `json:"max"`
	}
	if err := json.Unmarshal(msg.Error.Data, &data); err != nil || data.Limit != "streams" || data.Max != 1 {
		t.Errorf("second stream: error data %s, want {limit: streams, max: 1}", msg.Error.Data)
	}
}

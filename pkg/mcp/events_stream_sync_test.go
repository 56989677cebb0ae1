package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// events/stream on the held-stream loop under testing/synctest (see
// held_test.go): a server on a SQLite file, events published through
// the ingest on another process's store on the same file, the bubble's
// clock.

// newEventsRig is a heldRig whose server serves the Events extension,
// with the event types items (JSON) in its registry.
func newEventsRig(t *testing.T, items ...string) *heldRig {
	return newEventsRigWrapped(t, nil, items...)
}

// newEventsRigWrapped is newEventsRig with the server's store wrapped by
// wrap, if not nil.
func newEventsRigWrapped(t *testing.T, wrap func(Store) Store, items ...string) *heldRig {
	path := filepath.Join(t.TempDir(), "events.db")
	st, err := sqlitestore.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := sqlitestore.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var served Store = st
	if wrap != nil {
		served = wrap(st)
	}
	srv := NewServer(&Implementation{Name: "events", Version: "1"}, served, &ServerOptions{PollInterval: heldPoll,
		DynamicRegistries: true, Events: true, StateKeys: [][]byte{[]byte("events-sync-key-0123456789abcdef0123")},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	h := NewStreamableHandler(srv, &StreamableOptions{})
	r := &heldRig{t: t, st: st, other: other, srv: srv, h: h}
	t.Cleanup(func() {
		h.Close()
		time.Sleep(time.Second)
		other.Close()
		st.Close()
	})
	r.putTypes(notify.OpPut, "types-1", items...)
	return r
}

// putTypes applies op to the events registry with items, as an SNS
// registry message does.
func (r *heldRig) putTypes(op, messageID string, items ...string) {
	m := map[string]json.RawMessage{}
	for _, it := range items {
		e, err := notify.DecodeEventItem(json.RawMessage(it))
		if err != nil {
			r.t.Fatal(err)
		}
		m[e.Name], _ = json.Marshal(e)
	}
	if _, _, err := r.other.ApplyRegistry(context.Background(), notify.RegistryEvents, op, m, messageID); err != nil {
		r.t.Fatal(err)
	}
}

// publish ingests an event on topic through the other process's store.
func (r *heldRig) publish(topic, id, data string) {
	msg := `{"type":"event","topic":"` + topic + `","data":` + data + `}`
	sum, err := ingest.New(r.other, nil).Handle(context.Background(), events.SNSEvent{Records: []events.SNSEventRecord{{
		EventVersion: "1.0", EventSource: "aws:sns",
		SNS: events.SNSEntity{Type: "Notification", MessageID: id, TopicArn: "arn:aws:sns:us-east-1:123456789012:mcpush-events",
			Timestamp: time.Now(), Message: msg, SignatureVersion: "1"},
	}}})
	if err != nil || sum.Accepted != 1 {
		r.t.Fatalf("ingest %s: %+v, %v", id, sum, err)
	}
}

// stream opens a 2026-era events/stream with params (members of the
// params object) and a request deadline of timeout (0: none).
func (r *heldRig) stream(params string, timeout time.Duration) *heldGET {
	ctx, cancel := context.WithCancel(context.Background())
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), timeout)
	}
	body := `{"jsonrpc":"2.0","id":"S1","method":"events/stream","params":{` + params +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "events/stream")
	g := &heldGET{rec: newSyncRecorder(), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		r.h.ServeHTTP(g.rec, req)
	}()
	r.t.Cleanup(func() { cancel(); <-g.done })
	synctest.Wait()
	return g
}

// streamMsg is a message of an events stream.
type streamMsg struct {
	Method string `json:"method"`
	Params struct {
		EventID   string          `json:"eventId"`
		Cursor    *string         `json:"cursor"`
		Truncated bool            `json:"truncated"`
		Error     *Error          `json:"error"`
		Meta      json.RawMessage `json:"_meta"`
	} `json:"params"`
	Result map[string]any `json:"result"`
}

// msgs decodes what the stream sent.
func msgs(t *testing.T, g *heldGET) []streamMsg {
	var out []streamMsg
	for line := range strings.Lines(g.rec.body()) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok {
			continue
		}
		var m streamMsg
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		out = append(out, m)
	}
	return out
}

// TestEventStreamHeartbeat: an idle events stream sends a
// notifications/events/heartbeat with its cursor every KeepAlive (25 s)
// from its confirmation, never 30 s without one, and no ": keepalive"
// comment; the heartbeat's cursor moves past events the arguments
// filter out (a poll from it returns none of them); at the request's
// deadline the stream ends with a heartbeat and the empty result.
func TestEventStreamHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newEventsRig(t, `{"name":"order","topic":"orders","inputSchema":{"type":"object","properties":{"region":{"type":"string"}}}}`)
		start := time.Now()
		g := r.stream(`"name":"order","arguments":{"region":"eu"},"cursor":null`, 3*time.Minute)
		got := msgs(t, g)
		if len(got) != 1 || got[0].Method != "notifications/events/active" || got[0].Params.Cursor == nil || got[0].Params.Truncated ||
			string(got[0].Params.Meta) != `{"io.modelcontextprotocol/subscriptionId":"S1"}` {
			t.Fatalf("first messages: %+v", got)
		}
		active := *got[0].Params.Cursor
		time.Sleep(25*time.Second + heldPoll)
		got = msgs(t, g)
		if len(got) != 2 || got[1].Method != "notifications/events/heartbeat" || got[1].Params.Cursor == nil || *got[1].Params.Cursor != active {
			t.Fatalf("after 25 s: %+v", got)
		}
		// Two events the filter refuses: no event, the heartbeat's cursor
		// moves past them.
		r.publish("orders", "us-1", `{"region":"us"}`)
		r.publish("orders", "us-2", `{"region":"us"}`)
		time.Sleep(30 * time.Second)
		got = msgs(t, g)
		last := got[len(got)-1]
		if len(got) != 3 || last.Method != "notifications/events/heartbeat" || *last.Params.Cursor == active {
			t.Fatalf("after filtered-out events: %+v", got)
		}
		res, err := r.srv.pollEvents(context.Background(), nil, json.RawMessage(`{"name":"order","cursor":"`+*last.Params.Cursor+`"}`))
		if err != nil || len(res.Events) != 0 || res.Truncated {
			t.Fatalf("poll from the heartbeat's cursor: %+v, %v", res, err)
		}
		r.publish("orders", "eu-3", `{"region":"eu"}`)
		time.Sleep(heldWithin)
		got = msgs(t, g)
		if last := got[len(got)-1]; last.Method != "notifications/events/event" || last.Params.EventID != EventID("order", "eu-3") {
			t.Fatalf("after a matching event: %+v", got)
		}
		<-g.done
		ended := time.Since(start)
		got = msgs(t, g)
		if n := len(got); n < 3 || got[n-2].Method != "notifications/events/heartbeat" || got[n-1].Result["resultType"] != "complete" {
			t.Fatalf("the end: %+v", got[max(0, len(got)-3):])
		}
		if want := 3*time.Minute - 2*time.Second; ended < want-time.Second || ended > want {
			t.Errorf("ended after %v, want %v (the deadline less StreamMargin)", ended, want)
		}
		// Never more than 30 s between two messages: 6 heartbeats or more
		// in 178 s.
		beats := 0
		for _, m := range got {
			if m.Method == "notifications/events/heartbeat" {
				beats++
			}
		}
		if beats < 6 || strings.Contains(g.rec.body(), ": keepalive") {
			t.Errorf("%d heartbeats in %v, keepalive comments: %v", beats, ended, strings.Contains(g.rec.body(), ": keepalive"))
		}
	})
}

// TestEventStreamHeartbeatUnderTraffic: heartbeats come on their own
// cadence, not KeepAlive after the last message: with an event every
// second for 80 s, every event arrives and a heartbeat comes at most
// KeepAlive (25 s, under SEP-3415's 30 s) after the confirmation and
// after the previous heartbeat (sampled each second). Before, each event
// put the heartbeat off, and none came.
func TestEventStreamHeartbeatUnderTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newEventsRig(t, `{"name":"order","topic":"orders"}`)
		g := r.stream(`"name":"order","cursor":null`, 3*time.Minute)
		every := r.h.heartbeatEvery()
		if every != 25*time.Second {
			t.Fatalf("heartbeat interval %v, want KeepAlive's 25 s", every)
		}
		last, beats, worst := time.Now(), 0, time.Duration(0)
		const seconds = 80
		for i := range seconds {
			r.publish("orders", fmt.Sprintf("e-%d", i), `{"n":1}`)
			time.Sleep(time.Second)
			n := 0
			for _, m := range msgs(t, g) {
				if m.Method == "notifications/events/heartbeat" {
					n++
				}
			}
			if n > beats {
				beats, last = n, time.Now()
			}
			worst = max(worst, time.Since(last))
		}
		events := 0
		for _, m := range msgs(t, g) {
			if m.Method == "notifications/events/event" {
				events++
			}
		}
		t.Logf("%d events, %d heartbeats in %d s; longest without a heartbeat %v", events, beats, seconds, worst)
		if events < seconds-1 || beats < 3 || worst > every+time.Second || worst > MaxEventsHeartbeat {
			t.Errorf("%d events, %d heartbeats in %d s; longest without a heartbeat %v, want at most %v", events, beats, seconds, worst, every+time.Second)
		}
	})
}

// TestEventStreamTerminated: when its event type is deleted from the
// registry, a stream sends notifications/events/terminated (NotFound)
// and ends with the empty result; its backing session is gone.
func TestEventStreamTerminated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newEventsRig(t, `{"name":"order","topic":"orders"}`, `{"name":"other"}`)
		g := r.stream(`"name":"order","cursor":null`, 0)
		r.publish("orders", "o-1", `{}`)
		time.Sleep(heldWithin)
		// The stream's backing session, counted as the address's listen.
		backing := listenPrincipal(quotaPrincipal(&http.Request{RemoteAddr: "192.0.2.1:1234"}, ""))
		if n, err := r.st.CountSessions(context.Background(), backing, 10); err != nil || n != 1 {
			t.Fatalf("backing sessions while streaming: %d, %v", n, err)
		}
		r.putTypes(notify.OpDelete, "types-2", `{"name":"order"}`)
		time.Sleep(2 * time.Second) // the registry cache (500 ms) and the watcher
		if !g.ended() {
			t.Fatalf("the stream goes on after its type was deleted: %+v", msgs(t, g))
		}
		got := msgs(t, g)
		var methods []string
		for _, m := range got {
			methods = append(methods, m.Method)
		}
		want := []string{"notifications/events/active", "notifications/events/event", "notifications/events/terminated", ""}
		if strings.Join(methods, ",") != strings.Join(want, ",") {
			t.Fatalf("messages %q, want %q", methods, want)
		}
		if e := got[2].Params.Error; e == nil || e.Code != CodeNotFound || string(got[2].Params.Meta) != `{"io.modelcontextprotocol/subscriptionId":"S1"}` {
			t.Errorf("terminated: %+v %s", e, got[2].Params.Meta)
		}
		n, err := r.st.CountSessions(context.Background(), backing, 10)
		if err != nil || n != 0 {
			t.Errorf("backing sessions left: %d, %v", n, err)
		}
	})
}

// TestEventStreamGapsAndChanges: a stream from a cursor whose events
// left the log, or older than maxAgeMs, starts with an active that says
// truncated, then the events kept (a poll from its cursor agrees); when
// the event type moves to another topic the stream sends a fresh active
// (truncated) and goes on with the new topic's events; when the type's
// inputSchema stops accepting its arguments it is terminated (-32602).
func TestEventStreamGapsAndChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newEventsRig(t, `{"name":"e","topic":"t"}`)
		ctx := context.Background()
		start, err := r.srv.pollEvents(ctx, nil, json.RawMessage(`{"name":"e","cursor":null}`))
		if err != nil {
			t.Fatal(err)
		}
		r.publish("t", "gone-1", `{"region":"eu"}`)
		time.Sleep(8 * 24 * time.Hour) // past the topic log's 7 days
		r.publish("t", "old-2", `{"region":"eu"}`)
		time.Sleep(time.Hour)
		r.publish("t", "new-3", `{"region":"eu"}`)
		method := func(m streamMsg) string { return m.Method + " " + m.Params.EventID }

		// The log no longer keeps gone-1.
		g := r.stream(`"name":"e","cursor":"`+*start.Cursor+`"`, 0)
		got := msgs(t, g)
		want := []string{"notifications/events/active ", "notifications/events/event " + EventID("e", "old-2"), "notifications/events/event " + EventID("e", "new-3")}
		if len(got) != 3 || !got[0].Params.Truncated || method(got[1]) != want[1] || method(got[2]) != want[2] {
			t.Fatalf("from a cursor before the log: %+v", got)
		}
		res, err := r.srv.pollEvents(ctx, nil, json.RawMessage(`{"name":"e","cursor":"`+*got[0].Params.Cursor+`"}`))
		if err != nil || len(res.Events) != 2 || res.Events[0].EventID != EventID("e", "old-2") || res.Truncated {
			t.Fatalf("poll from the stream's fresh cursor: %+v, %v", res, err)
		}
		g.stop()
		<-g.done

		// maxAgeMs: old-2 is an hour old.
		g = r.stream(`"name":"e","arguments":{"region":"eu"},"maxAgeMs":600000,"cursor":"`+*start.Cursor+`"`, 0)
		got = msgs(t, g)
		if len(got) != 2 || !got[0].Params.Truncated || method(got[1]) != want[2] {
			t.Fatalf("with maxAgeMs: %+v", got)
		}

		// The type moves to topic u.
		r.putTypes(notify.OpPut, "types-2", `{"name":"e","topic":"u"}`)
		time.Sleep(2 * time.Second)
		r.publish("t", "on-t", `{"region":"eu"}`)
		r.publish("u", "on-u", `{"region":"eu"}`)
		time.Sleep(heldWithin)
		got = msgs(t, g)
		if len(got) < 4 || got[2].Method != "notifications/events/active" || !got[2].Params.Truncated || method(got[len(got)-1]) != "notifications/events/event "+EventID("e", "on-u") {
			t.Fatalf("after the move: %+v", got)
		}
		for _, m := range got {
			if m.Params.EventID == EventID("e", "on-t") {
				t.Errorf("an event of the old topic after the move")
			}
		}

		// Its inputSchema no longer allows region.
		r.putTypes(notify.OpPut, "types-3", `{"name":"e","topic":"u","inputSchema":{"type":"object","properties":{"colour":{"type":"string"}},"additionalProperties":false}}`)
		time.Sleep(2 * time.Second)
		if !g.ended() {
			t.Fatalf("the stream goes on after its arguments became invalid: %+v", msgs(t, g))
		}
		got = msgs(t, g)
		if term := got[len(got)-2]; term.Method != "notifications/events/terminated" || term.Params.Error == nil || term.Params.Error.Code != CodeInvalidParams {
			t.Errorf("terminated: %+v", got[len(got)-2:])
		}
	})
}

// headFailStore fails TopicHead for topic while armed.
type headFailStore struct {
	Store
	topic string
	armed atomic.Bool
	fails atomic.Int64
}

func (f *headFailStore) TopicHead(ctx context.Context, topic string) (int64, error) {
	if topic == f.topic && f.armed.Load() {
		f.fails.Add(1)
		return 0, notify.ErrUnavailable
	}
	return f.Store.TopicHead(ctx, topic)
}

// TestEventStreamMoveHeadFails: when the event type moves to another
// topic and reading the new topic's head fails, the stream does not take
// the new type until it has the new topic's position: once the store is
// back it sends the fresh active (truncated) and the new topic's events,
// never the old topic's position read against the new topic's log.
func TestEventStreamMoveHeadFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &headFailStore{topic: "u"}
		r := newEventsRigWrapped(t, func(st Store) Store { fs.Store = st; return fs }, `{"name":"e","topic":"t"}`)
		// Topic u's log is ahead of t's: positions differ between them.
		for i := range 5 {
			r.publish("u", fmt.Sprintf("u-before-%d", i), `{}`)
		}
		g := r.stream(`"name":"e"`, 0)
		r.publish("t", "on-t", `{}`)
		time.Sleep(heldWithin)
		method := func(m streamMsg) string { return m.Method + " " + m.Params.EventID }

		fs.armed.Store(true)
		r.putTypes(notify.OpPut, "types-2", `{"name":"e","topic":"u"}`)
		time.Sleep(2 * time.Second)
		if fs.fails.Load() == 0 {
			t.Fatalf("the move did not read the new topic's head: %+v", msgs(t, g))
		}
		fs.armed.Store(false)
		// The stream looks again after the store's failure: the move's
		// active comes, then an event published on u reaches it.
		waited := 0
		for ; waited < 120 && countMethod(msgs(t, g)[1:], "notifications/events/active") == 0; waited++ {
			time.Sleep(time.Second)
		}
		t.Logf("the move's active came %d s after the store was back", waited)
		r.publish("u", "on-u", `{}`)
		time.Sleep(heldWithin)
		got := msgs(t, g)
		var actives, onU int
		for _, m := range got[1:] {
			var meta struct {
				MessageID string `json:"mcpush/messageId"`
			}
			json.Unmarshal(m.Params.Meta, &meta)
			switch {
			case m.Method == "notifications/events/active":
				actives++
			case strings.HasPrefix(meta.MessageID, "u-before"):
				t.Errorf("an event from before the move: %s (%s)", method(m), meta.MessageID)
			case m.Params.EventID == EventID("e", "on-u"):
				onU++
			}
		}
		if actives != 1 || onU != 1 {
			t.Errorf("after the move: %d actives and %d on-u, want 1 and 1", actives, onU)
		}
	})
}

// countMethod counts the messages of method in ms.
func countMethod(ms []streamMsg, method string) int {
	n := 0
	for _, m := range ms {
		if m.Method == method {
			n++
		}
	}
	return n
}

package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

var t0 = time.Date(2026, 11, 22, 10, 30, 0, 123456789, time.UTC)

func newStore(t *testing.T) notify.Store {
	t.Helper()
	st, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func record(id, topicARN, message string) events.SNSEventRecord {
	return events.SNSEventRecord{
		EventVersion: "1.0", EventSource: "aws:sns",
		EventSubscriptionArn: topicARN + ":2bcfbf39-05c3-41de-beaa-fcfcc21c8f55",
		SNS: events.SNSEntity{
			Type: "Notification", MessageID: id, TopicArn: topicARN,
			Timestamp: t0, Message: message, SignatureVersion: "1",
		},
	}
}

func snsEvent(records ...events.SNSEventRecord) events.SNSEvent {
	return events.SNSEvent{Records: records}
}

// newSession creates a session with a log level, subscribed to topics.
func newSession(t *testing.T, st notify.Store, id, level string, topics ...string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	if err := st.CreateSession(ctx, &notify.Session{ID: id, ProtocolVersion: "2025-11-25", LogLevel: level,
		Initialized: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics {
		if err := st.Subscribe(ctx, id, EventURI(topic)); err != nil {
			t.Fatal(err)
		}
	}
}

// stream returns the GET-stream log of a session as strings.
func stream(t *testing.T, st notify.Store, id string) []string {
	t.Helper()
	evs, err := st.ReadEvents(context.Background(), id, "g", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, string(ev.Data))
	}
	return out
}

func topicEvents(t *testing.T, st notify.Store, topic string) []notify.TopicEvent {
	t.Helper()
	evs, err := st.ReadTopicEvents(context.Background(), topic, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func updatedJSON(topic string) string {
	return `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"events://` + topic + `"}}`
}

func messageJSON(topic string, seq int64, id string, payload string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"events/%s",`+
		`"data":{"topic":"%s","sequence":%d,"messageId":"%s","receivedAt":"2026-11-22T10:30:00.123456789Z","data":%s,"payload":%s}}}`,
		topic, topic, seq, id, payload, payload)
}

const (
	ordersARN = "arn:aws:sns:us-east-1:123456789012:orders"
	alertsARN = "arn:aws:sns:us-east-1:123456789012:alerts"
)

func TestHandleMixedBatch(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	in := New(st, nil)

	sum, err := in.Handle(ctx, snsEvent(
		record("m1", ordersARN, `{"type":"event","topic":"orders","data":{"id":1}}`),
		record("bad-op", ordersARN, `{"type":"registry","registry":"prompts","op":"upsert","items":[{"name":"p2"}]}`),
		record("m2", ordersARN, `{"type":"registry","registry":"prompts","op":"put","items":[{"name":"p1","title":"P1"}]}`),
		record("bad-json", ordersARN, `{"type":"event","topic":"leaked","data":{"id":`),
		record("bad-tool", ordersARN, `{"type":"registry","registry":"tools","op":"put","items":[{"name":"events_wait","enabled":false},{"name":"nope"}]}`),
		record("m3", alertsARN, `disk almost full`),
		record("", ordersARN, `{"type":"event","topic":"leaked","data":1}`),
	))
	if err == nil {
		t.Fatal("Handle returned no error for a batch with bad records")
	}
	for _, id := range []string{"bad-op", "bad-json", "bad-tool", "Records[6]"} {
		if !strings.Contains(err.Error(), id) {
			t.Errorf("error %q does not name %s", err, id)
		}
	}
	if sum.Accepted != 3 || sum.Duplicates != 0 || sum.Rejected != 4 || len(sum.Errors) != 4 {
		t.Errorf("summary = %+v, want 3 accepted, 4 rejected with 4 errors", sum)
	}
	for i, prefix := range []string{"bad-op: ", "bad-json: ", "bad-tool: ", "Records[6]: "} {
		if i < len(sum.Errors) && !strings.HasPrefix(sum.Errors[i], prefix) {
			t.Errorf("Errors[%d] = %q, want prefix %q", i, sum.Errors[i], prefix)
		}
	}

	// The good records are stored ...
	if got := topicEvents(t, st, "orders"); len(got) != 1 || string(got[0].Data) != `{"id":1}` || got[0].MessageID != "m1" || !got[0].ReceivedAt.Equal(t0) {
		t.Errorf("orders events = %+v", got)
	}
	if got := topicEvents(t, st, "alerts"); len(got) != 1 || string(got[0].Data) != `"disk almost full"` {
		t.Errorf("alerts events = %+v", got)
	}
	prompts, err := st.GetRegistry(ctx, notify.RegistryPrompts)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]json.RawMessage{"p1": raw(`{"name":"p1","title":"P1"}`)}, prompts.Items); diff != "" {
		t.Errorf("prompts (-want +got):\n%s", diff)
	}
	// ... and nothing of the bad ones.
	topics, err := st.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range topics {
		names = append(names, tp.Name)
	}
	if diff := cmp.Diff([]string{"alerts", "orders"}, names); diff != "" {
		t.Errorf("topics (-want +got):\n%s", diff)
	}
	hashes, err := st.RegistryHashes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hashes[notify.RegistryTools]; ok || len(hashes) != 1 {
		t.Errorf("registry hashes = %v, want only prompts", hashes)
	}
}

func TestHandleDuplicate(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	in := New(st, nil)
	newSession(t, st, "sess-1", "", "orders")

	batch := snsEvent(
		record("m1", ordersARN, `{"type":"event","topic":"orders","data":"first"}`),
		record("m2", ordersARN, `{"type":"registry","registry":"tools","op":"put","items":[{"name":"events_wait","enabled":false}]}`),
	)
	sum, err := in.Handle(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Summary{Accepted: 2}, sum); diff != "" {
		t.Errorf("first delivery summary (-want +got):\n%s", diff)
	}
	tools, err := st.GetRegistry(ctx, notify.RegistryTools)
	if err != nil {
		t.Fatal(err)
	}
	wantStream := []string{updatedJSON("orders"), messageJSON("orders", 1, "m1", `"first"`)}

	// SNS delivers again; a producer that re-sends with the same id but
	// another body is a duplicate too (an event's is a conflict as well).
	batch.Records[0].SNS.Message = `{"type":"event","topic":"orders","data":"second"}`
	batch.Records[0].SNS.Timestamp = t0.Add(time.Minute)
	batch.Records[1].SNS.Message = `{"type":"registry","registry":"tools","op":"delete","items":[{"name":"events_wait"}]}`
	for range 2 {
		sum, err = in.Handle(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Summary{Duplicates: 2, Conflicts: 1}, sum); diff != "" {
			t.Errorf("re-delivery summary (-want +got):\n%s", diff)
		}
	}
	if got := topicEvents(t, st, "orders"); len(got) != 1 || string(got[0].Data) != `"first"` {
		t.Errorf("orders events = %+v, want the first only", got)
	}
	if diff := cmp.Diff(wantStream, stream(t, st, "sess-1")); diff != "" {
		t.Errorf("session stream (-want +got):\n%s", diff)
	}
	tools2, err := st.GetRegistry(ctx, notify.RegistryTools)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tools, tools2); diff != "" {
		t.Errorf("tools registry changed by a duplicate (-before +after):\n%s", diff)
	}
}

// Logs name the message and what is wrong with it, never the body.
func TestHandleLogsNoPayload(t *testing.T) {
	const secret = "hunter2-very-secret"
	st := newStore(t)
	var logs bytes.Buffer
	in := New(st, &Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	newSession(t, st, "sess-1", "", "orders")
	_, err := in.Handle(context.Background(), snsEvent(
		record("good", ordersARN, `{"type":"event","topic":"orders","data":{"password":"`+secret+`"}}`),
		record("bad", ordersARN, `{"type":"event","topic":"orders","data":{"password":"`+secret+`"`),
		record("bad-text", "arn:aws:sns:us-east-1:1:", secret),
	))
	if err == nil {
		t.Fatal("want an error")
	}
	out := logs.String()
	if strings.Contains(out, secret) || strings.Contains(err.Error(), secret) {
		t.Errorf("the payload leaked into the logs or the error:\n%s\n%v", out, err)
	}
	var rejected int
	for line := range strings.Lines(out) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %s", line)
		}
		if rec["msg"] == "SNS record rejected" {
			rejected++
			if rec["messageId"] == "" || rec["topicArn"] == nil || rec["err"] == "" {
				t.Errorf("rejection log without message id, topic or error: %s", line)
			}
		}
	}
	if rejected != 2 {
		t.Errorf("%d rejections logged, want 2:\n%s", rejected, out)
	}
}

// A record without a Timestamp is received now, by the injected clock.
func TestHandleClock(t *testing.T) {
	st := newStore(t)
	now := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	in := New(st, &Options{Now: func() time.Time { return now }})
	rec := record("m1", ordersARN, "x")
	rec.SNS.Timestamp = time.Time{}
	if _, err := in.Handle(context.Background(), snsEvent(rec)); err != nil {
		t.Fatal(err)
	}
	if got := topicEvents(t, st, "orders"); len(got) != 1 || !got[0].ReceivedAt.Equal(now) {
		t.Errorf("events = %+v, want one received at %v", got, now)
	}
}

func TestSummaryJSON(t *testing.T) {
	for _, tc := range []struct {
		sum  Summary
		want string
	}{
		{Summary{Accepted: 2, Duplicates: 1}, `{"accepted":2,"duplicates":1,"rejected":0,"failed":0}`},
		{Summary{Rejected: 1, Errors: []string{"m1: bad"}}, `{"accepted":0,"duplicates":0,"rejected":1,"failed":0,"errors":["m1: bad"]}`},
	} {
		b, err := json.Marshal(tc.sum)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("json.Marshal(%+v) = %s, want %s", tc.sum, b, tc.want)
		}
	}
}

// TestHandleLongMessageID (issue 12, finding 11): a MessageId longer than
// MaxMessageIDLen is rejected, stored nowhere, and not echoed.
func TestHandleLongMessageID(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	in := New(st, nil)
	long := strings.Repeat("m", 1<<20)
	sum, err := in.Handle(ctx, snsEvent(record(long, ordersARN, `{"type":"event","topic":"orders","data":1}`)))
	if err == nil || sum.Rejected != 1 {
		t.Fatalf("a 1 MB MessageId: summary %+v, err %v; want rejected", sum, err)
	}
	if len(err.Error()) > 1000 || len(strings.Join(sum.Errors, "")) > 1000 {
		t.Errorf("the rejection echoes the MessageId: %d bytes", len(err.Error()))
	}
	if got := topicEvents(t, st, "orders"); len(got) != 0 {
		t.Errorf("orders has %d events, want none", len(got))
	}
}

// TestHandleTools: Options.Tools lists the tools a tools registry item may
// name; by default the BuiltinTools. A refused item stores nothing.
func TestHandleTools(t *testing.T) {
	const arn = "arn:aws:sns:us-east-1:123456789012:registry"
	put := func(name string) string {
		return `{"type":"registry","registry":"tools","op":"put","items":[{"name":"` + name + `","description":"d"}]}`
	}
	for _, tc := range []struct {
		name     string
		tools    []string
		tool     string
		accepted bool
	}{
		{"built-in by default", nil, "events_wait", true},
		{"own tool refused by default", nil, "count", false},
		{"own tool listed", []string{"count", "events_wait"}, "count", true},
		{"built-in not listed", []string{"count"}, "events_wait", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			in := New(st, &Options{Tools: tc.tools})
			sum, err := in.Handle(context.Background(), snsEvent(record("m-1", arn, put(tc.tool))))
			if (err == nil) != tc.accepted || (sum.Accepted == 1) != tc.accepted {
				t.Fatalf("Handle = %+v, %v; want accepted %v", sum, err, tc.accepted)
			}
			if !tc.accepted && !strings.Contains(sum.Errors[0], `unknown tool "`+tc.tool+`"`) {
				t.Errorf("error %q does not name the tool", sum.Errors[0])
			}
			reg, err := st.GetRegistry(context.Background(), notify.RegistryTools)
			if err != nil {
				t.Fatal(err)
			}
			_, stored := reg.Items[tc.tool]
			if stored != tc.accepted {
				t.Errorf("tool item stored = %v, want %v", stored, tc.accepted)
			}
		})
	}
}

// TestHandleDuplicateConflict (issue 20, finding 10): an event delivered
// again under its MessageId with another body keeps the first, and is
// counted in Summary.Conflicts and logged as a warning naming the
// MessageId; the same body again (SNS's own redelivery) is a plain
// duplicate, and so is the same data written with other whitespace.
func TestHandleDuplicateConflict(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	var logs bytes.Buffer
	in := New(st, &Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	first := record("m1", ordersARN, `{"type":"event","topic":"orders","data":{"n":1}}`)
	if sum, err := in.Handle(ctx, snsEvent(first)); err != nil || sum.Accepted != 1 {
		t.Fatalf("first delivery: %+v %v", sum, err)
	}
	same := record("m1", ordersARN, `{ "type": "event", "topic": "orders", "data": { "n": 1 } }`)
	other := record("m1", ordersARN, `{"type":"event","topic":"orders","data":{"n":2}}`)
	sum, err := in.Handle(ctx, snsEvent(first, same, other))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Summary{Duplicates: 3, Conflicts: 1}, sum); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	if got := topicEvents(t, st, "orders"); len(got) != 1 || string(got[0].Data) != `{"n":1}` {
		t.Errorf("orders events = %+v, want the first only", got)
	}
	var warnings int
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %s", line)
		}
		if rec["level"] == "WARN" {
			warnings++
			if rec["messageId"] != "m1" || !strings.Contains(fmt.Sprint(rec["msg"]), "different") {
				t.Errorf("conflict warning %s, want one naming m1", line)
			}
		}
	}
	if warnings != 1 {
		t.Errorf("%d warnings, want 1:\n%s", warnings, logs.String())
	}
}

// TestHandleMessageIDCharacters (issue 20, finding 10): a MessageId with
// a NUL, another control character, a space or non-ASCII is rejected,
// stored nowhere, and not echoed in the summary; a UUID is accepted.
func TestHandleMessageIDCharacters(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	in := New(st, nil)
	for _, id := range []string{"m\x001", "m\n1", "m\x7f", "m 1", "m\u00e91"} {
		sum, err := in.Handle(ctx, snsEvent(record(id, ordersARN, `{"type":"event","topic":"orders","data":1}`)))
		if err == nil || sum.Rejected != 1 || !strings.Contains(sum.Errors[0], "Records[0]") {
			t.Errorf("MessageId %q: summary %+v, err %v; want rejected, named by its index", id, sum, err)
		}
	}
	if got := topicEvents(t, st, "orders"); len(got) != 0 {
		t.Errorf("orders has %d events, want none", len(got))
	}
	if sum, err := in.Handle(ctx, snsEvent(record("0b5e1a2c-e2e0-4000-8000-000000000000", ordersARN, `{"type":"event","topic":"orders","data":1}`))); err != nil || sum.Accepted != 1 {
		t.Errorf("a UUID MessageId: %+v %v, want accepted", sum, err)
	}
}

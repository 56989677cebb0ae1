package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
)

func TestHandleFanOut(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	in := New(st, nil)
	newSession(t, st, "sess-warning", "warning", "orders")
	newSession(t, st, "sess-default", "", "orders", "alerts")
	newSession(t, st, "sess-info", "info", "orders")
	newSession(t, st, "sess-alerts", "debug", "alerts")
	newSession(t, st, "sess-none", "")

	sum, err := in.Handle(ctx, snsEvent(
		record("m1", ordersARN, `{"type":"event","topic":"orders","data":{"id":1,"note":"<b>&"}}`),
		record("m2", ordersARN, `{"type":"event","topic":"orders","data":null}`),
		record("m3", alertsARN, `CPU > 90%`),
	))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Summary{Accepted: 3}, sum); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	m1 := messageJSON("orders", 1, "m1", `{"id":1,"note":"<b>&"}`)
	m2 := messageJSON("orders", 2, "m2", `null`)
	m3 := messageJSON("alerts", 1, "m3", `"CPU > 90%"`)
	for id, want := range map[string][]string{
		"sess-warning": {updatedJSON("orders"), updatedJSON("orders")},
		"sess-default": {updatedJSON("orders"), m1, updatedJSON("orders"), m2, updatedJSON("alerts"), m3},
		"sess-info":    {updatedJSON("orders"), m1, updatedJSON("orders"), m2},
		"sess-alerts":  {updatedJSON("alerts"), m3},
		"sess-none":    nil,
	} {
		if diff := cmp.Diff(want, stream(t, st, id)); diff != "" {
			t.Errorf("%s stream (-want +got):\n%s", id, diff)
		}
	}
	for _, s := range stream(t, st, "sess-default") {
		if !json.Valid([]byte(s)) {
			t.Errorf("notification is not JSON: %s", s)
		}
	}
}

// faultyStore fails chosen calls of a real store.
type faultyStore struct {
	notify.Store
	failAppend map[string]bool // session ids whose AppendEach batch fails
	ghosts     []string        // listed by Subscribers, but no such session
}

var errInjected = errors.New("injected failure")

func (s *faultyStore) AppendEach(ctx context.Context, ids []string, uri string, upTo int64, pick func(*notify.Session, notify.Position) [][]byte) ([]string, error) {
	for _, id := range ids {
		if s.failAppend[id] {
			return nil, errInjected
		}
	}
	return s.Store.AppendEach(ctx, ids, uri, upTo, pick)
}

func (s *faultyStore) Subscribers(ctx context.Context, uri string) ([]string, error) {
	ids, err := s.Store.Subscribers(ctx, uri)
	return append(s.ghosts, ids...), err
}

// TestHandleRetryCompletesFanOut: a batch of the fan-out that fails does
// not stop the other batches, and the retry SNS makes completes the
// failed one without a second copy anywhere.
func TestHandleRetryCompletesFanOut(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	faulty := &faultyStore{Store: st, failAppend: map[string]bool{"sess-a": true}, ghosts: []string{"sess-0-gone"}}
	var logs bytes.Buffer
	in := New(faulty, &Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	// Subscribers lists ids sorted: the ghost and sess-a..sess-c are the
	// first batch, the fillers the second.
	newSession(t, st, "sess-a", "", "orders")
	newSession(t, st, "sess-b", "", "orders")
	newSession(t, st, "sess-c", "warning", "orders")
	var fillers []string
	for i := range notify.MaxAppendEach {
		id := fmt.Sprintf("sess-z%03d", i)
		newSession(t, st, id, "", "orders")
		fillers = append(fillers, id)
	}

	batch := snsEvent(record("m1", ordersARN, `{"type":"event","topic":"orders","data":"x"}`))
	sum, err := in.Handle(ctx, batch)
	if err == nil || !strings.Contains(err.Error(), "m1") {
		t.Fatalf("Handle error = %v, want one naming m1", err)
	}
	// A store failure, not a malformed message: Lambda's error type and
	// message say so, and it is notify.ErrUnavailable.
	var sf *StoreFailure
	if !errors.As(err, &sf) || !errors.Is(err, notify.ErrUnavailable) || !strings.Contains(err.Error(), "failed in the store") || strings.Contains(err.Error(), "rejected") {
		t.Errorf("Handle error = %T %v, want a *StoreFailure that is ErrUnavailable", err, err)
	}
	if sum.Failed != 1 || sum.Rejected != 0 || len(sum.Errors) != 1 || !strings.Contains(sum.Errors[0], "1 of 2 batches") || !strings.Contains(sum.Errors[0], errInjected.Error()) {
		t.Errorf("summary = %+v, want m1 failed (a store failure, not a rejection) for one batch of two", sum)
	}
	if !strings.Contains(logs.String(), `"firstSession":"sess-0-gone"`) {
		t.Errorf("the failed batch is not logged:\n%s", logs.String())
	}
	// The event is stored, and the other batch got it.
	want := []string{updatedJSON("orders"), messageJSON("orders", 1, "m1", `"x"`)}
	for _, id := range []string{"sess-a", "sess-b"} {
		if got := stream(t, st, id); len(got) != 0 {
			t.Errorf("%s stream = %q, want empty", id, got)
		}
	}
	if diff := cmp.Diff(want, stream(t, st, fillers[len(fillers)-1])); diff != "" {
		t.Errorf("second batch's stream (-want +got):\n%s", diff)
	}

	// SNS retries once the fault is gone: the fan-out completes, without
	// a second copy anywhere.
	faulty.failAppend = nil
	for range 2 {
		sum, err = in.Handle(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Summary{Duplicates: 1}, sum); diff != "" {
			t.Errorf("retry summary (-want +got):\n%s", diff)
		}
	}
	wants := map[string][]string{
		"sess-a": want,
		"sess-b": want,
		"sess-c": {updatedJSON("orders")},
	}
	for _, id := range fillers {
		wants[id] = want
	}
	for id, want := range wants {
		if diff := cmp.Diff(want, stream(t, st, id)); diff != "" {
			t.Errorf("%s stream after retry (-want +got):\n%s", id, diff)
		}
	}
	if got := topicEvents(t, st, "orders"); len(got) != 1 {
		t.Errorf("orders has %d events, want 1", len(got))
	}
}

func TestEventNotificationsOversizePayload(t *testing.T) {
	ev := &notify.TopicEvent{Topic: "orders", Seq: 7, MessageID: "m7", ReceivedAt: t0,
		Data: json.RawMessage(`"` + strings.Repeat("a", notify.MaxItemBytes-2) + `"`)}
	got, err := EventNotifications(ev, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{updatedJSON("orders"),
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"events/orders",` +
			`"data":{"topic":"orders","sequence":7,"messageId":"m7","receivedAt":"2026-11-22T10:30:00.123456789Z","dataOmitted":true,"payloadOmitted":true}}}`}
	var gotS []string
	for _, b := range got {
		gotS = append(gotS, string(b))
	}
	if diff := cmp.Diff(want, gotS); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
}

// inFlightStore records the most AppendEach calls that ran at once.
type inFlightStore struct {
	notify.Store
	mu              sync.Mutex
	cur, max, calls int
}

func (s *inFlightStore) AppendEach(ctx context.Context, ids []string, uri string, upTo int64, pick func(*notify.Session, notify.Position) [][]byte) ([]string, error) {
	s.mu.Lock()
	s.cur++
	s.calls++
	s.max = max(s.max, s.cur)
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.cur--; s.mu.Unlock() }()
	return s.Store.AppendEach(ctx, ids, uri, upTo, pick)
}

// TestFanOutConcurrency: a fan-out to many sessions goes to the store in
// batches of notify.MaxAppendEach, at most FanOutConcurrency batches at a
// time, and still notifies every session once, each with the
// notifications its log level admits.
func TestFanOutConcurrency(t *testing.T) {
	ctx := context.Background()
	st := &inFlightStore{Store: newStore(t)}
	const limit = 2
	sessions := 5*notify.MaxAppendEach + 1
	for i := range sessions {
		level := "info"
		if i%2 == 1 {
			level = "error"
		}
		newSession(t, st.Store, fmt.Sprintf("s%03d", i), level, "orders")
	}
	in := New(st, &Options{FanOutConcurrency: limit})
	sum, err := in.Handle(ctx, snsEvent(record("m1", ordersARN, `{"type":"event","topic":"orders","data":1}`)))
	if err != nil || sum.Accepted != 1 {
		t.Fatalf("Handle: %+v, %v", sum, err)
	}
	if st.max > limit {
		t.Errorf("%d batches were appended at once, want at most %d", st.max, limit)
	}
	if st.calls != 6 {
		t.Errorf("%d AppendEach calls for %d sessions, want 6", st.calls, sessions)
	}
	for i := range sessions {
		want := []string{updatedJSON("orders"), messageJSON("orders", 1, "m1", `1`)}
		if i%2 == 1 {
			want = want[:1]
		}
		id := fmt.Sprintf("s%03d", i)
		if diff := cmp.Diff(want, stream(t, st.Store, id)); diff != "" {
			t.Errorf("%s stream (-want +got):\n%s", id, diff)
		}
	}
}

// TestFanOutCatchesUp: the fan-out of an event that finds a subscriber
// whose earlier event has not been appended yet (its fan-out failed)
// appends the missing event first, so the session gets both in order; the
// retry of the failed one then adds nothing. A subscriber more than
// CatchUp events behind gets the last CatchUp.
func TestFanOutCatchesUp(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	faulty := &failUpTo{Store: st, fail: 2}
	in := New(faulty, nil)
	newSession(t, st, "s1", "", "orders")
	ev := func(n int) events.SNSEvent {
		return snsEvent(record(fmt.Sprintf("m%d", n), ordersARN, fmt.Sprintf(`{"type":"event","topic":"orders","data":%d}`, n)))
	}
	if _, err := in.Handle(ctx, ev(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Handle(ctx, ev(2)); err == nil {
		t.Fatal("the fan-out of event 2 did not fail")
	}
	if _, err := in.Handle(ctx, ev(3)); err != nil {
		t.Fatal(err)
	}
	faulty.fail = 0
	if sum, err := in.Handle(ctx, ev(2)); err != nil || sum.Duplicates != 1 {
		t.Fatalf("retry of event 2: %+v, %v", sum, err)
	}
	var want []string
	for n := 1; n <= 3; n++ {
		want = append(want, updatedJSON("orders"), messageJSON("orders", int64(n), fmt.Sprintf("m%d", n), fmt.Sprint(n)))
	}
	if diff := cmp.Diff(want, stream(t, st, "s1")); diff != "" {
		t.Errorf("s1 stream (-want +got):\n%s", diff)
	}

	// Far behind: events 4 .. 4+CatchUp fail to reach s1, the next one
	// brings the last CatchUp of them.
	faulty.fail = -1
	last := 4 + CatchUp
	for n := 4; n <= last; n++ {
		in.Handle(ctx, ev(n))
	}
	faulty.fail = 0
	if _, err := in.Handle(ctx, ev(last+1)); err != nil {
		t.Fatal(err)
	}
	got := stream(t, st, "s1")[len(want):]
	var seqs []int64
	for _, s := range got {
		var m struct {
			Params struct {
				Data EventData `json:"data"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(s), &m); m.Params.Data.Sequence > 0 {
			seqs = append(seqs, m.Params.Data.Sequence)
		}
	}
	var wantSeqs []int64
	for n := last + 2 - CatchUp; n <= last+1; n++ {
		wantSeqs = append(wantSeqs, int64(n))
	}
	if diff := cmp.Diff(wantSeqs, seqs); diff != "" {
		t.Errorf("sequences after falling %d behind (-want +got):\n%s", CatchUp+1, diff)
	}
}

// failUpTo fails AppendEach up to fail (every one when fail is -1).
type failUpTo struct {
	notify.Store
	fail int64
}

func (s *failUpTo) AppendEach(ctx context.Context, ids []string, uri string, upTo int64, pick func(*notify.Session, notify.Position) [][]byte) ([]string, error) {
	if s.fail == -1 || upTo == s.fail {
		return nil, errInjected
	}
	return s.Store.AppendEach(ctx, ids, uri, upTo, pick)
}

// TestFanOutConcurrentIngests: ingests of one topic's events that run at
// once, and repeat, reach every subscriber exactly once each and in
// sequence order (the documented gap of earlier versions), including the
// events whose fan-out comes after a later one's has reached the session.
func TestFanOutConcurrentIngests(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	in := New(st, &Options{FanOutConcurrency: 2})
	const sessions, n = 60, 30
	for i := range sessions {
		newSession(t, st, fmt.Sprintf("s%02d", i), "", "orders")
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			// Each worker ingests every event, in its own order: the
			// first to store an event fans it out, the others are
			// duplicates that complete it.
			for i := range n {
				k := (i*7 + w*3) % n
				rec := record(fmt.Sprintf("m%02d", k), ordersARN, fmt.Sprintf(`{"type":"event","topic":"orders","data":%d}`, k))
				rec.SNS.Timestamp = time.Now() // published after the sessions subscribed
				msg := snsEvent(rec)
				if _, err := in.Handle(ctx, msg); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i := range sessions {
		id := fmt.Sprintf("s%02d", i)
		var seqs []int64
		for _, s := range stream(t, st, id) {
			var m struct {
				Params struct {
					Data EventData `json:"data"`
				} `json:"params"`
			}
			if err := json.Unmarshal([]byte(s), &m); err != nil {
				t.Fatal(err)
			}
			if m.Params.Data.Sequence > 0 {
				seqs = append(seqs, m.Params.Data.Sequence)
			}
		}
		var want []int64
		for k := 1; k <= n; k++ {
			want = append(want, int64(k))
		}
		if diff := cmp.Diff(want, seqs); diff != "" {
			t.Errorf("%s: event sequences (-want +got):\n%s", id, diff)
		}
	}
}

// seqsOf returns the sequence numbers of the notifications/message in a
// session's stream, and how many of them left the payload out.
func seqsOf(t *testing.T, msgs []string) (seqs []int64, omitted int) {
	t.Helper()
	for _, s := range msgs {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Data EventData `json:"data"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		if m.Method == "notifications/message" {
			seqs = append(seqs, m.Params.Data.Sequence)
			if m.Params.Data.DataOmitted {
				omitted++
			}
		}
	}
	return seqs, omitted
}

// TestFanOutCatchUpLarge: catching up on events too large to fit one
// append together still brings every one of them, in order: the earlier
// ones with their payloads left out (to be read from events://<topic>).
func TestFanOutCatchUpLarge(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	faulty := &failUpTo{Store: st}
	in := New(faulty, nil)
	newSession(t, st, "s1", "", "orders")
	big := strings.Repeat("x", 300<<10)
	ev := func(n int) events.SNSEvent {
		return snsEvent(record(fmt.Sprintf("m%d", n), ordersARN, fmt.Sprintf(`{"type":"event","topic":"orders","data":"%d%s"}`, n, big)))
	}
	if _, err := in.Handle(ctx, ev(1)); err != nil {
		t.Fatal(err)
	}
	faulty.fail = -1
	for n := 2; n <= 12; n++ {
		in.Handle(ctx, ev(n))
	}
	faulty.fail = 0
	if _, err := in.Handle(ctx, ev(13)); err != nil {
		t.Fatal(err)
	}
	seqs, omitted := seqsOf(t, stream(t, st, "s1"))
	var want []int64
	for n := 1; n <= 13; n++ {
		want = append(want, int64(n))
	}
	if diff := cmp.Diff(want, seqs); diff != "" {
		t.Errorf("sequences (-want +got):\n%s", diff)
	}
	if omitted == 0 || omitted > 11 {
		t.Errorf("%d messages left their payload out, want some of the 11 caught up", omitted)
	}
}

// TestFanOutNewSubscriber: a subscription that no event has reached yet
// gets, with the event that reaches it first, the earlier events published
// since it started, and none published before.
func TestFanOutNewSubscriber(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	in := New(st, nil)
	ev := func(n int, at time.Time) events.SNSEvent {
		r := record(fmt.Sprintf("m%d", n), ordersARN, fmt.Sprintf(`{"type":"event","topic":"orders","data":%d}`, n))
		r.SNS.Timestamp = at
		return snsEvent(r)
	}
	// Events 1 and 2 are stored, in that order (a slice, not a map: the
	// topic sequence follows the order), before anyone subscribes (event 2's
	// fan-out still to come, as when its ingest is slow): 1 was published
	// before the subscription, 2 after it.
	subscribed := time.Now()
	for n, at := range []time.Time{1: subscribed.Add(-time.Hour), 2: subscribed.Add(time.Hour)} {
		if n == 0 {
			continue
		}
		if _, _, err := st.AppendTopicEvent(ctx, "orders", fmt.Sprintf("m%d", n), at, json.RawMessage(fmt.Sprint(n))); err != nil {
			t.Fatal(err)
		}
	}
	newSession(t, st, "s1", "", "orders")
	if _, err := in.Handle(ctx, ev(3, subscribed.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Handle(ctx, ev(2, subscribed.Add(time.Hour))); err != nil { // event 2's late fan-out
		t.Fatal(err)
	}
	seqs, _ := seqsOf(t, stream(t, st, "s1"))
	if diff := cmp.Diff([]int64{2, 3}, seqs); diff != "" {
		t.Errorf("sequences (-want +got):\n%s", diff)
	}
}

// TestEventNotificationsDataAndPayload: the event's body is "data", as in
// the event tools and the resource, and "payload" too for the clients of
// before; a body too large to fit twice keeps "data" and leaves "payload"
// out (payloadOmitted), so that a body that fits once is still carried.
func TestEventNotificationsDataAndPayload(t *testing.T) {
	ev := &notify.TopicEvent{Topic: "orders", Seq: 7, MessageID: "m7", ReceivedAt: t0, Data: json.RawMessage(`{"id":1}`)}
	got, err := EventNotifications(ev, true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(messageJSON("orders", 7, "m7", `{"id":1}`), string(got[1])); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	big := `"` + strings.Repeat("a", notify.MaxItemBytes*2/3) + `"`
	ev.Data = json.RawMessage(big)
	got, err = EventNotifications(ev, true)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Params struct {
			Data EventData `json:"data"`
		} `json:"params"`
	}
	if err := json.Unmarshal(got[1], &m); err != nil {
		t.Fatal(err)
	}
	if d := m.Params.Data; string(d.Data) != big || d.DataOmitted || d.Payload != nil || !d.PayloadOmitted {
		t.Errorf("a body that fits once: data %d bytes (omitted %v), payload %d bytes (omitted %v); want data only",
			len(d.Data), d.DataOmitted, len(d.Payload), d.PayloadOmitted)
	}
}

package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mcpush/mcpush/pkg/notify"
)

func testTopicEvents(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	topics, err := st.Topics(ctx)
	if err != nil || len(topics) != 0 {
		t.Errorf("Topics() on an empty store = %v, %v; want none", topics, err)
	}

	t0 := now().Add(-time.Minute)
	ev := func(topic string, seq int64, id string, sec int, data string) notify.TopicEvent {
		return notify.TopicEvent{Topic: topic, Seq: seq, MessageID: id,
			ReceivedAt: t0.Add(time.Duration(sec) * time.Second), Data: json.RawMessage(data)}
	}
	m1 := ev("orders", 1, "m1", 1, `{"n":1}`)
	m2 := ev("orders", 2, "m2", 2, `{"n":2}`)
	m3 := ev("orders", 3, "m3", 3, `"three"`)
	b1 := ev("billing", 1, "b1", 4, `[1,2]`)
	appends := []struct {
		in          notify.TopicEvent // Seq ignored
		want        notify.TopicEvent
		wantCreated bool
	}{
		{m1, m1, true},
		{m2, m2, true},
		{ev("orders", 0, "m2", 9, `{"n":"dup"}`), m2, false}, // a repeated message id returns the original
		{m3, m3, true},
		{b1, b1, true},
		{m1, m1, false},
	}
	for _, a := range appends {
		got, created, err := st.AppendTopicEvent(ctx, a.in.Topic, a.in.MessageID, a.in.ReceivedAt, a.in.Data)
		if err != nil || created != a.wantCreated {
			t.Errorf("AppendTopicEvent(%q, %q) = created %t, %v; want %t, nil", a.in.Topic, a.in.MessageID, created, err, a.wantCreated)
		}
		if diff := cmp.Diff(a.want, got, cmpOpts); diff != "" {
			t.Errorf("AppendTopicEvent(%q, %q) mismatch (-want +got):\n%s", a.in.Topic, a.in.MessageID, diff)
		}
	}

	reads := []struct {
		topic string
		after int64
		limit int
		want  []notify.TopicEvent
	}{
		{"orders", 0, 10, []notify.TopicEvent{m1, m2, m3}},
		{"orders", 0, 2, []notify.TopicEvent{m1, m2}},
		{"orders", 1, 1, []notify.TopicEvent{m2}},
		{"orders", 2, 10, []notify.TopicEvent{m3}},
		{"orders", 3, 10, nil},
		{"billing", 0, 10, []notify.TopicEvent{b1}},
		{"none", 0, 10, nil},
	}
	for _, r := range reads {
		got, err := st.ReadTopicEvents(ctx, r.topic, r.after, r.limit)
		if err != nil {
			t.Fatalf("ReadTopicEvents(%q, %d, %d): %v", r.topic, r.after, r.limit, err)
		}
		if diff := cmp.Diff(r.want, got, cmpOpts); diff != "" {
			t.Errorf("ReadTopicEvents(%q, %d, %d) mismatch (-want +got):\n%s", r.topic, r.after, r.limit, diff)
		}
	}

	topics, err = st.Topics(ctx)
	if err != nil {
		t.Fatalf("Topics: %v", err)
	}
	want := []notify.Topic{{Name: "billing", LastSeq: 1}, {Name: "orders", LastSeq: 3}}
	if diff := cmp.Diff(want, topics, cmpOpts, cmpopts.IgnoreFields(notify.Topic{}, "UpdatedAt")); diff != "" {
		t.Errorf("Topics mismatch (-want +got):\n%s", diff)
	}
	for _, tp := range topics {
		if tp.UpdatedAt.IsZero() {
			t.Errorf("Topics: %s has a zero UpdatedAt", tp.Name)
		}
	}
}

// testTopicHead: TopicHead reports a topic's last sequence number, 0 for
// a topic without events, on any Store of the database; an empty topic
// is invalid.
func testTopicHead(t *testing.T, s *suite) {
	st, a, b := storesAs(t, s)
	ctx := t.Context()
	if n, err := a.TopicHead(ctx, "none"); err != nil || n != 0 {
		t.Errorf("TopicHead(no events) = %d, %v; want 0, nil", n, err)
	}
	for i := range 3 {
		if _, _, err := st.AppendTopicEvent(ctx, "orders", fmt.Sprintf("m%d", i), now(), json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := st.AppendTopicEvent(ctx, "orders", "m0", now(), json.RawMessage(`{}`)); err != nil { // a duplicate
		t.Fatal(err)
	}
	for _, h := range []notify.TopicHeads{a, b} {
		if n, err := h.TopicHead(ctx, "orders"); err != nil || n != 3 {
			t.Errorf("TopicHead(orders) = %d, %v; want 3, nil", n, err)
		}
	}
	if _, err := a.TopicHead(ctx, ""); !errors.Is(err, notify.ErrInvalid) {
		t.Errorf("TopicHead(\"\") = %v, want ErrInvalid", err)
	}
}

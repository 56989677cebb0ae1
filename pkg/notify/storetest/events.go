package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
)

func testAppendRead(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	createSession(t, st, "s1")
	createSession(t, st, "s2")

	appends := []struct {
		session, stream string
		data            []string
		opts            *notify.AppendOptions
		wantSeq         int64
	}{
		{"s1", "a", []string{"a1"}, nil, 1},
		{"s1", "a", []string{"a2", "a3"}, nil, 3},
		{"s1", "b", []string{"b1"}, nil, 1},
		{"s1", "a", []string{"a4", "a5", "a6"}, &notify.AppendOptions{}, 6}, // empty options: unconditional
		{"s2", "a", []string{"x1"}, nil, 1},
		{"s1", "a", []string{""}, nil, 7}, // an empty event is an event
	}
	for _, a := range appends {
		seq, ok, err := st.Append(ctx, a.session, a.stream, bytesOf(a.data...), a.opts)
		if err != nil || !ok || seq != a.wantSeq {
			t.Errorf("Append(%q, %q, %q) = %d, %t, %v; want %d, true, nil", a.session, a.stream, a.data, seq, ok, err, a.wantSeq)
		}
	}

	reads := []struct {
		session, stream string
		after           int64
		limit           int
		want            []notify.Event
	}{
		{"s1", "a", 0, 100, events(1, "a1", "a2", "a3", "a4", "a5", "a6", "")},
		{"s1", "a", 0, 1, events(1, "a1")},
		{"s1", "a", 2, 2, events(3, "a3", "a4")},
		{"s1", "a", 5, 10, events(6, "a6", "")},
		{"s1", "a", 7, 10, nil},
		{"s1", "a", 100, 10, nil},
		{"s1", "b", 0, 10, events(1, "b1")},
		{"s1", "never", 0, 10, nil},
		{"s2", "a", 0, 10, events(1, "x1")},
		{"s2", "b", 0, 10, nil},
	}
	for _, r := range reads {
		got := readEvents(t, st, r.session, r.stream, r.after, r.limit)
		if diff := cmp.Diff(r.want, got, cmpOpts); diff != "" {
			t.Errorf("ReadEvents(%q, %q, %d, %d) mismatch (-want +got):\n%s", r.session, r.stream, r.after, r.limit, diff)
		}
	}
}

func testAppendIdempotencyKey(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	createSession(t, st, "s1")
	createSession(t, st, "s2")
	withKey := func(k string) *notify.AppendOptions { return &notify.AppendOptions{IdempotencyKey: k} }

	steps := []struct {
		session, stream, data string
		opts                  *notify.AppendOptions
		wantSeq               int64
		wantOK                bool
	}{
		{"s1", "a", "first", withKey("k1"), 1, true},
		{"s1", "a", "again", withKey("k1"), 0, false},
		{"s1", "b", "other stream", withKey("k1"), 0, false}, // keys are per session, not per stream
		{"s1", "a", "second", withKey("k2"), 2, true},
		{"s2", "a", "other session", withKey("k1"), 1, true},
		{"s1", "a", "no key", nil, 3, true},
		{"s1", "a", "no key", nil, 4, true},
		{"s1", "a", "again", withKey("k2"), 0, false},
		// A failed hash condition appends nothing and does not use up the key.
		{"s1", "a", "cas fails", &notify.AppendOptions{IdempotencyKey: "k3",
			NotifiedHash: &notify.HashCAS{Registry: notify.RegistryTools, Old: "nope", New: "h"}}, 0, false},
		{"s1", "a", "k3", withKey("k3"), 5, true},
	}
	for _, c := range steps {
		seq, ok, err := st.Append(ctx, c.session, c.stream, bytesOf(c.data), c.opts)
		if err != nil || ok != c.wantOK || seq != c.wantSeq {
			t.Errorf("Append(%q, %q, %q, %s) = %d, %t, %v; want %d, %t, nil",
				c.session, c.stream, c.data, fmtOpts(c.opts), seq, ok, err, c.wantSeq, c.wantOK)
		}
	}
	want := events(1, "first", "second", "no key", "no key", "k3")
	if diff := cmp.Diff(want, readEvents(t, st, "s1", "a", 0, 100), cmpOpts); diff != "" {
		t.Errorf("ReadEvents(s1, a) mismatch (-want +got):\n%s", diff)
	}
	if evs := readEvents(t, st, "s1", "b", 0, 100); len(evs) != 0 {
		t.Errorf("ReadEvents(s1, b) = %v, want none", evs)
	}
}

// fmtOpts formats AppendOptions for messages.
func fmtOpts(o *notify.AppendOptions) string {
	if o == nil {
		return "nil"
	}
	if o.NotifiedHash == nil {
		return fmt.Sprintf("{IdempotencyKey:%q}", o.IdempotencyKey)
	}
	return fmt.Sprintf("{IdempotencyKey:%q NotifiedHash:%+v}", o.IdempotencyKey, *o.NotifiedHash)
}

func testAppendNotifiedHash(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	createSession(t, st, "s1", func(s *notify.Session) {
		s.NotifiedHashes = map[string]string{notify.RegistryTools: "h0"}
	})
	cas := func(reg, old, new string) *notify.AppendOptions {
		return &notify.AppendOptions{NotifiedHash: &notify.HashCAS{Registry: reg, Old: old, New: new}}
	}
	steps := []struct {
		name       string
		data       string
		opts       *notify.AppendOptions
		wantSeq    int64
		wantOK     bool
		wantHashes map[string]string
	}{
		{"mismatch", "x", cas(notify.RegistryTools, "other", "h1"), 0, false,
			map[string]string{notify.RegistryTools: "h0"}},
		{"empty Old, hash set", "x", cas(notify.RegistryTools, "", "h1"), 0, false,
			map[string]string{notify.RegistryTools: "h0"}},
		{"match", "tools h1", cas(notify.RegistryTools, "h0", "h1"), 1, true,
			map[string]string{notify.RegistryTools: "h1"}},
		{"old again", "x", cas(notify.RegistryTools, "h0", "h2"), 0, false,
			map[string]string{notify.RegistryTools: "h1"}},
		{"never set is empty", "prompts p1", cas(notify.RegistryPrompts, "", "p1"), 2, true,
			map[string]string{notify.RegistryTools: "h1", notify.RegistryPrompts: "p1"}},
		{"with key", "resources r1", &notify.AppendOptions{IdempotencyKey: "k",
			NotifiedHash: &notify.HashCAS{Registry: notify.RegistryResources, Old: "", New: "r1"}}, 3, true,
			map[string]string{notify.RegistryTools: "h1", notify.RegistryPrompts: "p1", notify.RegistryResources: "r1"}},
		{"key used, hash matches", "x", &notify.AppendOptions{IdempotencyKey: "k",
			NotifiedHash: &notify.HashCAS{Registry: notify.RegistryResources, Old: "r1", New: "r2"}}, 0, false,
			map[string]string{notify.RegistryTools: "h1", notify.RegistryPrompts: "p1", notify.RegistryResources: "r1"}},
		{"back to an earlier hash", "tools h0", cas(notify.RegistryTools, "h1", "h0"), 4, true,
			map[string]string{notify.RegistryTools: "h0", notify.RegistryPrompts: "p1", notify.RegistryResources: "r1"}},
		{"events never set", "events e1", cas(notify.RegistryEvents, "", "e1"), 5, true,
			map[string]string{notify.RegistryTools: "h0", notify.RegistryPrompts: "p1", notify.RegistryResources: "r1", notify.RegistryEvents: "e1"}},
		{"events mismatch", "x", cas(notify.RegistryEvents, "e0", "e2"), 0, false,
			map[string]string{notify.RegistryTools: "h0", notify.RegistryPrompts: "p1", notify.RegistryResources: "r1", notify.RegistryEvents: "e1"}},
		{"events match", "events e2", cas(notify.RegistryEvents, "e1", "e2"), 6, true,
			map[string]string{notify.RegistryTools: "h0", notify.RegistryPrompts: "p1", notify.RegistryResources: "r1", notify.RegistryEvents: "e2"}},
	}
	for _, c := range steps {
		seq, ok, err := st.Append(ctx, "s1", "get", bytesOf(c.data), c.opts)
		if err != nil || ok != c.wantOK || seq != c.wantSeq {
			t.Errorf("%s: Append = %d, %t, %v; want %d, %t, nil", c.name, seq, ok, err, c.wantSeq, c.wantOK)
		}
		if diff := cmp.Diff(c.wantHashes, getSession(t, st, "s1").NotifiedHashes); diff != "" {
			t.Errorf("%s: NotifiedHashes mismatch (-want +got):\n%s", c.name, diff)
		}
	}
	want := events(1, "tools h1", "prompts p1", "resources r1", "tools h0", "events e1", "events e2")
	if diff := cmp.Diff(want, readEvents(t, st, "s1", "get", 0, 100), cmpOpts); diff != "" {
		t.Errorf("ReadEvents mismatch (-want +got):\n%s", diff)
	}

	// A batch under a condition is appended whole.
	seq, ok, err := st.Append(ctx, "s1", "get", bytesOf("b1", "b2", "b3"), cas(notify.RegistryTools, "h0", "h3"))
	if err != nil || !ok || seq != 9 {
		t.Errorf("Append(batch of 3, matching hash) = %d, %t, %v; want 9, true, nil", seq, ok, err)
	}
}

func testMarkDelivered(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	createSession(t, st, "s1", func(s *notify.Session) { s.Delivered = 2 })
	if got := getSession(t, st, "s1").Delivered; got != 2 {
		t.Errorf("Delivered = %d, want 2 as created", got)
	}
	for _, c := range []struct{ mark, want int64 }{
		{5, 5},
		{3, 5}, // never backwards
		{5, 5},
		{0, 5},
		{9, 9},
	} {
		if err := st.MarkDelivered(ctx, "s1", c.mark); err != nil {
			t.Fatalf("MarkDelivered(%d): %v", c.mark, err)
		}
		if got := getSession(t, st, "s1").Delivered; got != c.want {
			t.Errorf("after MarkDelivered(%d): Delivered = %d, want %d", c.mark, got, c.want)
		}
	}
}

func testMailbox(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	createSession(t, st, "s1")
	createSession(t, st, "s2")
	puts := []struct {
		session, key string
		data         []byte
		wantCreated  bool
	}{
		{"s1", "resp:1", []byte(`{"result":1}`), true},
		{"s1", "resp:1", []byte(`{"result":2}`), false}, // first write wins
		{"s1", "cancel:1", []byte("c"), true},
		{"s2", "resp:1", []byte(`{"result":3}`), true}, // keys are per session
		{"s1", "empty", nil, true},
		{"s1", "empty", []byte("late"), false},
	}
	for _, p := range puts {
		created, err := st.PutMessage(ctx, p.session, p.key, p.data)
		if err != nil || created != p.wantCreated {
			t.Errorf("PutMessage(%q, %q, %q) = %t, %v; want %t, nil", p.session, p.key, p.data, created, err, p.wantCreated)
		}
	}
	gets := []struct {
		session, key string
		want         []byte
		wantErr      error
	}{
		{"s1", "resp:1", []byte(`{"result":1}`), nil},
		{"s1", "cancel:1", []byte("c"), nil},
		{"s2", "resp:1", []byte(`{"result":3}`), nil},
		{"s1", "empty", nil, nil},
		{"s1", "resp:2", nil, notify.ErrNotFound},
		{"s2", "cancel:1", nil, notify.ErrNotFound},
	}
	for _, g := range gets {
		got, err := st.GetMessage(ctx, g.session, g.key)
		if !wantErr(err, g.wantErr) {
			t.Errorf("GetMessage(%q, %q): got error %v, want %v", g.session, g.key, err, g.wantErr)
			continue
		}
		if diff := cmp.Diff(g.want, got, cmpOpts); diff != "" {
			t.Errorf("GetMessage(%q, %q) mismatch (-want +got):\n%s", g.session, g.key, diff)
		}
		if errors.Is(err, notify.ErrSessionGone) {
			t.Errorf("GetMessage(%q, %q) of a live session = %v; want a missing message, not ErrSessionGone", g.session, g.key, err)
		}
	}
	// A missing session is told apart from a missing message: a request
	// running for a deleted session stops (ErrSessionGone).
	if _, err := st.GetMessage(ctx, "nosuch", "resp:1"); !errors.Is(err, notify.ErrSessionGone) || !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetMessage of a session never created = %v; want ErrSessionGone (an ErrNotFound)", err)
	}
	if err := st.DeleteSession(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetMessage(ctx, "s2", "resp:1"); !errors.Is(err, notify.ErrSessionGone) {
		t.Errorf("GetMessage of a deleted session = %v; want ErrSessionGone", err)
	}
}

func testSubscriptions(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	const a, b = "file:///a", "events://orders"
	createSession(t, st, "s2")
	createSession(t, st, "s1")
	createSession(t, st, "s3", func(s *notify.Session) { s.Subscriptions = []string{a} })

	steps := []struct {
		op           string // "sub" or "unsub"
		session, uri string
	}{
		{"sub", "s2", a},
		{"sub", "s1", b},
		{"sub", "s1", a},
		{"sub", "s1", a},   // idempotent
		{"unsub", "s2", b}, // idempotent: never subscribed
		{"sub", "s2", b},
		{"unsub", "s2", b},
		{"unsub", "s2", b},
	}
	for _, c := range steps {
		var err error
		if c.op == "sub" {
			err = st.Subscribe(ctx, c.session, c.uri)
		} else {
			err = st.Unsubscribe(ctx, c.session, c.uri)
		}
		if err != nil {
			t.Fatalf("%s(%q, %q): %v", c.op, c.session, c.uri, err)
		}
	}
	checkSubscribers(t, st, a, "s1", "s2", "s3")
	checkSubscribers(t, st, b, "s1")
	checkSubscribers(t, st, "file:///none")
	for id, want := range map[string][]string{"s1": {b, a}, "s2": {a}, "s3": {a}} {
		if diff := cmp.Diff(want, getSession(t, st, id).Subscriptions, cmpOpts); diff != "" {
			t.Errorf("GetSession(%q).Subscriptions mismatch (-want +got):\n%s", id, diff)
		}
	}

	if err := st.Unsubscribe(ctx, "s1", a); err != nil {
		t.Fatal(err)
	}
	checkSubscribers(t, st, a, "s2", "s3")
	if err := st.DeleteSession(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	checkSubscribers(t, st, a, "s3")
	if err := st.Subscribe(ctx, "s2", a); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("Subscribe(deleted session): got %v, want ErrNotFound", err)
	}
	checkSubscribers(t, st, a, "s3")
}

// testStreamHead: GetSession reports the head of the session's SessionStream
// log, and only of that stream and that session.
func testStreamHead(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	createSession(t, st, "s1")
	createSession(t, st, "s2")
	steps := []struct {
		session, stream string
		n               int
		want            map[string]int64 // session -> StreamHead after the step
	}{
		{"", "", 0, map[string]int64{"s1": 0, "s2": 0}},
		{"s1", notify.SessionStream, 2, map[string]int64{"s1": 2, "s2": 0}},
		{"s1", "other", 5, map[string]int64{"s1": 2, "s2": 0}},
		{"s2", notify.SessionStream, 1, map[string]int64{"s1": 2, "s2": 1}},
		{"s1", notify.SessionStream, 3, map[string]int64{"s1": 5, "s2": 1}},
	}
	for i, step := range steps {
		if step.n > 0 {
			data := make([]string, step.n)
			for j := range data {
				data[j] = fmt.Sprintf("e%d", j)
			}
			if _, _, err := st.Append(ctx, step.session, step.stream, bytesOf(data...), nil); err != nil {
				t.Fatalf("step %d: Append: %v", i, err)
			}
		}
		got := map[string]int64{}
		for id := range step.want {
			sess, err := st.GetSession(ctx, id)
			if err != nil {
				t.Fatalf("step %d: GetSession(%q): %v", i, id, err)
			}
			got[id] = sess.StreamHead
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("step %d: StreamHead mismatch (-want +got):\n%s", i, diff)
		}
	}
}

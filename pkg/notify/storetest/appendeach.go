package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// testAppendEach: AppendEach appends what pick returns to each live
// session's SessionStream log after what is there, skips sessions that
// are gone, unknown or picked nil, shares its idempotency keys with
// Append, shows pick the profile, and refuses bad arguments without
// appending anything.
func testAppendEach(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	g := notify.SessionStream
	createSession(t, st, "a", func(s *notify.Session) { s.LogLevel = "info"; s.Principal = "alice" })
	createSession(t, st, "b", func(s *notify.Session) { s.LogLevel = "error" })
	createSession(t, st, "c")
	createSession(t, st, "d")
	createSession(t, st, "gone")
	appendEvents(t, st, "a", g, "a1", "a2")
	if err := st.DeleteSession(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	// c already has the key, from Append.
	if _, ok, err := st.Append(ctx, "c", g, bytesOf("c-by-append"), &notify.AppendOptions{IdempotencyKey: "k1"}); err != nil || !ok {
		t.Fatalf("Append with key: %t, %v", ok, err)
	}

	var (
		mu   sync.Mutex
		seen = map[string]string{}
	)
	pick := func(sess *notify.Session) [][]byte {
		mu.Lock()
		seen[sess.ID] = sess.LogLevel + "/" + sess.Principal
		mu.Unlock()
		switch sess.ID {
		case "d":
			return nil
		case "b":
			return bytesOf("x")
		}
		return bytesOf("x", "y:"+sess.LogLevel)
	}
	ids := []string{"unknown", "a", "b", "gone", "c", "d", "a"}
	got, err := st.AppendEach(ctx, ids, "k1", pick)
	if err != nil {
		t.Fatalf("AppendEach: %v", err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("appended (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"a": "info/alice", "b": "error/", "c": "/", "d": "/"}, seen); diff != "" {
		t.Errorf("profiles pick saw (-want +got):\n%s", diff)
	}
	for id, want := range map[string][]notify.Event{
		"a": events(1, "a1", "a2", "x", "y:info"),
		"b": events(1, "x"),
		"c": events(1, "c-by-append"),
		"d": nil,
	} {
		if diff := cmp.Diff(want, readEvents(t, st, id, g, 0, 100)); diff != "" {
			t.Errorf("%s log (-want +got):\n%s", id, diff)
		}
	}
	if sess := getSession(t, st, "a"); sess.StreamHead != 4 {
		t.Errorf("a's StreamHead = %d, want 4", sess.StreamHead)
	}

	// The same key again appends nothing; Append with it neither.
	if got, err := st.AppendEach(ctx, []string{"a", "b", "c"}, "k1", pick); err != nil || len(got) != 0 {
		t.Errorf("repeated AppendEach = %q, %v; want nothing appended", got, err)
	}
	if _, ok, err := st.Append(ctx, "b", g, bytesOf("again"), &notify.AppendOptions{IdempotencyKey: "k1"}); err != nil || ok {
		t.Errorf("Append with AppendEach's key = %t, %v; want not appended", ok, err)
	}
	// Another key appends after what is there.
	if got, err := st.AppendEach(ctx, []string{"b"}, "k2", pick); err != nil || len(got) != 1 {
		t.Errorf("AppendEach(k2) = %q, %v", got, err)
	}
	if diff := cmp.Diff(events(1, "x", "x"), readEvents(t, st, "b", g, 0, 100)); diff != "" {
		t.Errorf("b log after k2 (-want +got):\n%s", diff)
	}

	// Bad arguments are refused, and nothing is appended.
	many := make([]string, notify.MaxAppendEach+1)
	for i := range many {
		many[i] = fmt.Sprintf("m%d", i)
	}
	big := func(sess *notify.Session) [][]byte {
		if sess.ID == "c" {
			return [][]byte{make([]byte, notify.MaxItemBytes+1)}
		}
		return bytesOf("small")
	}
	for _, c := range []struct {
		name string
		ids  []string
		key  string
		pick func(*notify.Session) [][]byte
		want error
	}{
		{"no ids", nil, "k3", pick, notify.ErrInvalid},
		{"empty id", []string{"a", ""}, "k3", pick, notify.ErrInvalid},
		{"empty key", []string{"a"}, "", pick, notify.ErrInvalid},
		{"too many ids", many, "k3", pick, notify.ErrInvalid},
		{"empty data", []string{"a", "b"}, "k3", func(*notify.Session) [][]byte { return [][]byte{} }, notify.ErrInvalid},
		{"oversized data", []string{"a", "c"}, "k3", big, notify.ErrTooLarge},
	} {
		got, err := st.AppendEach(ctx, c.ids, c.key, c.pick)
		if !errors.Is(err, c.want) || len(got) != 0 {
			t.Errorf("AppendEach(%s) = %q, %v; want %v and nothing appended", c.name, got, err, c.want)
		}
	}
	if diff := cmp.Diff(events(1, "a1", "a2", "x", "y:info"), readEvents(t, st, "a", g, 0, 100)); diff != "" {
		t.Errorf("a log after refused calls (-want +got):\n%s", diff)
	}
	// Repeated ids count once towards the bound.
	if _, err := st.AppendEach(ctx, append(many[:notify.MaxAppendEach:notify.MaxAppendEach], many[0]), "k4", pick); err != nil {
		t.Errorf("AppendEach of %d distinct ids, one repeated: %v", notify.MaxAppendEach, err)
	}
}

// testAppendEachMany: AppendEach to MaxAppendEach sessions with two events
// each (more than one DynamoDB transaction holds) appends to every one,
// racing with Appends to the same logs from another Store: each log ends
// gap-free with every event once and each batch's events together.
func testAppendEachMany(t *testing.T, s *suite) {
	stores := s.twoStores(t)
	ctx := t.Context()
	g := notify.SessionStream
	ids := make([]string, notify.MaxAppendEach)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%02d", i)
		createSession(t, stores[0], ids[i])
	}
	const rounds = 3
	race(2, func(w int) {
		for r := range rounds {
			if w == 0 {
				key := fmt.Sprintf("event/%d", r)
				got, err := stores[0].AppendEach(ctx, ids, key, func(sess *notify.Session) [][]byte {
					return bytesOf(key+"/"+sess.ID+"/1", key+"/"+sess.ID+"/2")
				})
				if err != nil || len(got) != len(ids) {
					t.Errorf("AppendEach(%s) appended %d of %d: %v", key, len(got), len(ids), err)
				}
				continue
			}
			for _, id := range ids[:10] {
				if _, ok, err := stores[1].Append(ctx, id, g, bytesOf(fmt.Sprintf("own/%s/%d", id, r)), nil); err != nil || !ok {
					t.Errorf("Append(%s): %t, %v", id, ok, err)
				}
			}
		}
	})
	for i, id := range ids {
		evs := readEvents(t, stores[1], id, g, 0, 100)
		want := 2 * rounds
		if i < 10 {
			want += rounds
		}
		if len(evs) != want {
			t.Errorf("%s has %d events, want %d", id, len(evs), want)
		}
		seen := map[string]bool{}
		for j, ev := range evs {
			if ev.Seq != int64(j+1) {
				t.Errorf("%s event %d has seq %d", id, j, ev.Seq)
			}
			d := string(ev.Data)
			if seen[d] {
				t.Errorf("%s has %q twice", id, d)
			}
			seen[d] = true
			if strings.HasSuffix(d, "/1") && (j+1 >= len(evs) || string(evs[j+1].Data) != strings.TrimSuffix(d, "1")+"2") {
				t.Errorf("%s: %q is not followed by its batch's second event", id, d)
			}
		}
	}
}

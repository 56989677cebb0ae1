package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// upToPick returns a pick that appends "<id>/<n>" for each n after the
// position up to upTo, and records the positions it saw.
func upToPick(upTo int64, seen map[string][]int64, mu *sync.Mutex) func(*notify.Session, notify.Position) [][]byte {
	return func(s *notify.Session, p notify.Position) [][]byte {
		if mu != nil {
			mu.Lock()
			seen[s.ID] = append(seen[s.ID], p.At)
			mu.Unlock()
		}
		var out [][]byte
		for n := p.At + 1; n <= upTo; n++ {
			out = append(out, fmt.Appendf(nil, "%s/%d", s.ID, n))
		}
		return out
	}
}

// testAppendEach: AppendEach appends what pick returns to each live,
// subscribed session's SessionStream log after what is there, moves the
// subscription's position, skips sessions that are gone, unknown, not
// subscribed, at the position already or picked nil, shows pick the
// profile and the position, and refuses bad arguments without appending
// anything. Unsubscribe forgets the position; subscribing again while
// subscribed keeps it.
func testAppendEach(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	g := notify.SessionStream
	const uri = "events://t"
	sub := func(s *notify.Session) { s.Subscriptions = []string{uri} }
	before := time.Now().Add(-time.Second) // the store's clock may differ a little
	createSession(t, st, "a", sub, func(s *notify.Session) { s.LogLevel = "info"; s.Principal = "alice" })
	createSession(t, st, "b", func(s *notify.Session) { s.LogLevel = "error" })
	if err := st.Subscribe(ctx, "b", uri); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(time.Second)
	createSession(t, st, "c") // not subscribed
	createSession(t, st, "d", sub)
	createSession(t, st, "gone", sub)
	appendEvents(t, st, "a", g, "a1", "a2")
	if err := st.DeleteSession(ctx, "gone"); err != nil {
		t.Fatal(err)
	}

	var (
		mu   sync.Mutex
		seen = map[string]string{}
	)
	since := map[string]time.Time{}
	pick := func(sess *notify.Session, p notify.Position) [][]byte {
		mu.Lock()
		seen[sess.ID] = fmt.Sprintf("%s/%s@%d", sess.LogLevel, sess.Principal, p.At)
		since[sess.ID] = p.Since
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
	got, err := st.AppendEach(ctx, ids, uri, 2, pick)
	if err != nil {
		t.Fatalf("AppendEach: %v", err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("appended (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"a": "info/alice@0", "b": "error/@0", "d": "/@0"}, seen); diff != "" {
		t.Errorf("profiles and positions pick saw (-want +got):\n%s", diff)
	}
	for id, t0 := range since {
		if t0.Before(before) || t0.After(after) {
			t.Errorf("%s: Position.Since = %v, want the time it subscribed (%v .. %v)", id, t0, before, after)
		}
	}
	bSince := since["b"]
	for id, want := range map[string][]notify.Event{
		"a": events(1, "a1", "a2", "x", "y:info"),
		"b": events(1, "x"),
		"c": nil,
		"d": nil,
	} {
		if diff := cmp.Diff(want, readEvents(t, st, id, g, 0, 100)); diff != "" {
			t.Errorf("%s log (-want +got):\n%s", id, diff)
		}
	}
	if sess := getSession(t, st, "a"); sess.StreamHead != 4 {
		t.Errorf("a's StreamHead = %d, want 4", sess.StreamHead)
	}

	// At or below the position: nothing, and pick is not asked.
	clear(seen)
	for _, upTo := range []int64{2, 1} {
		if got, err := st.AppendEach(ctx, []string{"a", "b"}, uri, upTo, pick); err != nil || len(got) != 0 {
			t.Errorf("AppendEach up to %d again = %q, %v; want nothing appended", upTo, got, err)
		}
	}
	if len(seen) != 0 {
		t.Errorf("pick saw %v for sessions at the position", seen)
	}
	// Further: pick sees the position; d (picked nil) is still at 0.
	if got, err := st.AppendEach(ctx, []string{"b", "d"}, uri, 5, pick); err != nil || len(got) != 1 {
		t.Errorf("AppendEach up to 5 = %q, %v", got, err)
	}
	if diff := cmp.Diff(map[string]string{"b": "error/@2", "d": "/@0"}, seen); diff != "" {
		t.Errorf("positions pick saw (-want +got):\n%s", diff)
	}
	if !since["b"].Equal(bSince) {
		t.Errorf("b's Position.Since moved from %v to %v", bSince, since["b"])
	}
	if diff := cmp.Diff(events(1, "x", "x"), readEvents(t, st, "b", g, 0, 100)); diff != "" {
		t.Errorf("b log (-want +got):\n%s", diff)
	}
	// Subscribing again keeps the position; unsubscribing forgets it.
	if err := st.Subscribe(ctx, "b", uri); err != nil {
		t.Fatal(err)
	}
	clear(seen)
	if got, err := st.AppendEach(ctx, []string{"b"}, uri, 5, pick); err != nil || len(got) != 0 || len(seen) != 0 {
		t.Errorf("AppendEach after subscribing again = %q, %v (pick saw %v); want the position kept", got, err, seen)
	}
	if err := st.Unsubscribe(ctx, "b", uri); err != nil {
		t.Fatal(err)
	}
	if got, err := st.AppendEach(ctx, []string{"b"}, uri, 6, pick); err != nil || len(got) != 0 {
		t.Errorf("AppendEach after unsubscribing = %q, %v; want nothing appended", got, err)
	}
	if err := st.Subscribe(ctx, "b", uri); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if err := st.Subscribe(ctx, "b", uri); err != nil { // again: keeps Since
		t.Fatal(err)
	}
	if got, err := st.AppendEach(ctx, []string{"b"}, uri, 6, pick); err != nil || len(got) != 1 || seen["b"] != "error/@0" {
		t.Errorf("AppendEach after subscribing anew = %q, %v (pick saw %q); want position 0", got, err, seen["b"])
	}
	if !since["b"].After(bSince) {
		t.Errorf("b's Position.Since after subscribing anew = %v, want after its first subscription's %v", since["b"], bSince)
	}

	// Bad arguments are refused, and nothing is appended.
	many := make([]string, notify.MaxAppendEach+1)
	for i := range many {
		many[i] = fmt.Sprintf("m%d", i)
	}
	big := func(sess *notify.Session, _ notify.Position) [][]byte {
		if sess.ID == "d" {
			return [][]byte{make([]byte, notify.MaxItemBytes+1)}
		}
		return bytesOf("small")
	}
	for _, c := range []struct {
		name string
		ids  []string
		uri  string
		upTo int64
		pick func(*notify.Session, notify.Position) [][]byte
		want error
	}{
		{"no ids", nil, uri, 9, pick, notify.ErrInvalid},
		{"empty id", []string{"a", ""}, uri, 9, pick, notify.ErrInvalid},
		{"empty uri", []string{"a"}, "", 9, pick, notify.ErrInvalid},
		{"long uri", []string{"a"}, "events://" + strings.Repeat("u", notify.MaxURIBytes), 9, pick, notify.ErrTooLarge},
		{"position 0", []string{"a"}, uri, 0, pick, notify.ErrInvalid},
		{"too many ids", many, uri, 9, pick, notify.ErrInvalid},
		{"empty data", []string{"a", "d"}, uri, 9, func(*notify.Session, notify.Position) [][]byte { return [][]byte{} }, notify.ErrInvalid},
		{"oversized data", []string{"a", "d"}, uri, 9, big, notify.ErrTooLarge},
	} {
		got, err := st.AppendEach(ctx, c.ids, c.uri, c.upTo, c.pick)
		if !errors.Is(err, c.want) || len(got) != 0 {
			t.Errorf("AppendEach(%s) = %q, %v; want %v and nothing appended", c.name, got, err, c.want)
		}
	}
	if diff := cmp.Diff(events(1, "a1", "a2", "x", "y:info"), readEvents(t, st, "a", g, 0, 100)); diff != "" {
		t.Errorf("a log after refused calls (-want +got):\n%s", diff)
	}
	// Repeated ids count once towards the bound.
	if _, err := st.AppendEach(ctx, append(many[:notify.MaxAppendEach:notify.MaxAppendEach], many[0]), uri, 9, pick); err != nil {
		t.Errorf("AppendEach of %d distinct ids, one repeated: %v", notify.MaxAppendEach, err)
	}
}

// testAppendEachOrder: AppendEach calls up to 1..rounds in random order
// from two Stores, to MaxAppendEach sessions (more than one DynamoDB
// transaction holds), each pick filling the gap from the position, race
// with Appends to the same logs: each session's log ends with 1..rounds
// exactly once each and in order, and every other event once.
func testAppendEachOrder(t *testing.T, s *suite) {
	stores := s.twoStores(t)
	ctx := t.Context()
	g := notify.SessionStream
	const uri = "events://order"
	ids := make([]string, notify.MaxAppendEach)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%02d", i)
		createSession(t, stores[0], ids[i], func(s *notify.Session) { s.Subscriptions = []string{uri} })
	}
	const rounds = 6
	order := rand.Perm(rounds)
	race(3, func(w int) {
		switch w {
		case 0, 1:
			// Each AppendEach worker takes every other upTo of a random
			// order.
			for i, n := range order {
				if i%2 != w {
					continue
				}
				upTo := int64(n + 1)
				if _, err := stores[w].AppendEach(ctx, ids, uri, upTo, upToPick(upTo, nil, nil)); err != nil {
					t.Errorf("AppendEach(%d): %v", upTo, err)
				}
			}
		case 2:
			for r := range rounds {
				for _, id := range ids[:10] {
					if _, ok, err := stores[1].Append(ctx, id, g, bytesOf(fmt.Sprintf("own/%d", r)), nil); err != nil || !ok {
						t.Errorf("Append(%s): %t, %v", id, ok, err)
					}
				}
			}
		}
	})
	for i, id := range ids {
		evs := readEvents(t, stores[1], id, g, 0, 100)
		var mine, own []string
		for j, ev := range evs {
			if ev.Seq != int64(j+1) {
				t.Errorf("%s event %d has seq %d", id, j, ev.Seq)
			}
			if d := string(ev.Data); strings.HasPrefix(d, "own/") {
				own = append(own, d)
			} else {
				mine = append(mine, d)
			}
		}
		var want []string
		for n := 1; n <= rounds; n++ {
			want = append(want, fmt.Sprintf("%s/%d", id, n))
		}
		if diff := cmp.Diff(want, mine); diff != "" {
			t.Errorf("%s: fanned-out events (-want +got):\n%s", id, diff)
		}
		if wantOwn := map[bool]int{true: rounds, false: 0}[i < 10]; len(own) != wantOwn {
			t.Errorf("%s has %d own events, want %d", id, len(own), wantOwn)
		}
	}
}

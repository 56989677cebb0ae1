package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/mcpush/mcpush/pkg/notify"
)

// testChanges: the change feed names, from the cursor on, the sessions
// whose SessionStream log grew (Append, AppendEach) or that were deleted,
// and not those of other streams' appends; a second Store on the same
// backing database reads what the first wrote; a cursor read to the end
// reports nothing more; an ApplyRegistry that applies is reported
// (ChangeSet.Registries), and its redelivery (same message id) is not.
func testChanges(t *testing.T, s *suite) {
	st, dsn := s.storeDSN(t)
	other := s.reopen(t, dsn)
	ctx := t.Context()
	g := notify.SessionStream
	const uri = "events://feed"
	createSession(t, st, "before")
	appendEvents(t, st, "before", g, "x") // before the cursor: not reported
	_, cursor, err := other.Changes(ctx, "")
	if err != nil {
		t.Fatalf("Changes from the end: %v", err)
	}
	if cursor == "" {
		t.Fatal("Changes from the end returned an empty cursor")
	}
	sub := func(s *notify.Session) { s.Subscriptions = []string{uri} }
	createSession(t, st, "a")
	createSession(t, st, "b", sub)
	createSession(t, st, "c", sub)
	createSession(t, st, "quiet")
	createSession(t, st, "gone")
	appendEvents(t, st, "a", g, "a1")
	appendEvents(t, st, "quiet", "other", "q1") // a request stream: not a change
	if _, err := st.AppendEach(ctx, []string{"b", "c"}, uri, 1, func(*notify.Session, notify.Position) [][]byte {
		return [][]byte{[]byte("ev")}
	}); err != nil {
		t.Fatalf("AppendEach: %v", err)
	}
	if err := st.DeleteSession(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	item := map[string]json.RawMessage{"p1": json.RawMessage(`{"name":"p1"}`)}
	if _, applied, err := st.ApplyRegistry(ctx, notify.RegistryPrompts, notify.OpPut, item, "feed-m1"); err != nil || !applied {
		t.Fatalf("ApplyRegistry = %t, %v", applied, err)
	}
	var got []string
	registries := false
	for range 3 { // a feed may report in more than one read
		ch, next, err := other.Changes(ctx, cursor)
		if err != nil {
			t.Fatalf("Changes: %v", err)
		}
		if ch.Overflow {
			t.Fatalf("Changes reported an overflow for %d changes", 5)
		}
		got, cursor, registries = append(got, ch.Sessions...), next, registries || ch.Registries
	}
	got = slices.Compact(slices.Sorted(slices.Values(got)))
	if want := []string{"a", "b", "c", "gone"}; !slices.Equal(got, want) || !registries {
		t.Errorf("Changes reported sessions %q and a registry change %v; want %q and true", got, registries, want)
	}
	if _, applied, err := st.ApplyRegistry(ctx, notify.RegistryPrompts, notify.OpPut, item, "feed-m1"); err != nil || applied {
		t.Fatalf("ApplyRegistry redelivered = %t, %v; want not applied", applied, err)
	}
	ch, _, err := other.Changes(ctx, cursor)
	if err != nil || len(ch.Sessions) != 0 || ch.Registries || ch.Overflow || ch.Full {
		t.Errorf("Changes after reading to the end: %+v, %v; want nothing", ch, err)
	}
	if _, _, err := st.Changes(ctx, "not a cursor"); err == nil {
		t.Error("Changes with a malformed cursor succeeded")
	}
}

// testChangesMany: more changes than one Changes call returns
// (notify.MaxChangesRead) are all reported over the calls that follow, or
// a call reports an overflow (ChangeSet.Overflow): none is dropped.
func testChangesMany(t *testing.T, s *suite) {
	st, dsn := s.storeDSN(t)
	other := s.reopen(t, dsn)
	ctx := t.Context()
	_, cursor, err := other.Changes(ctx, "")
	if err != nil {
		t.Fatalf("Changes from the end: %v", err)
	}
	ids := make([]string, notify.MaxChangesRead+50)
	for i := range ids {
		ids[i] = fmt.Sprintf("many-%05d", i)
		createSession(t, st, ids[i])
		appendEvents(t, st, ids[i], notify.SessionStream, "x")
	}
	got := map[string]bool{}
	overflow := false
	for range 10 {
		read, next, err := other.Changes(ctx, cursor)
		if err != nil {
			t.Fatalf("Changes: %v", err)
		}
		if len(read.Sessions) > notify.MaxChangesRead {
			t.Errorf("one Changes call returned %d ids; want at most %d", len(read.Sessions), notify.MaxChangesRead)
		}
		if read.Overflow && len(read.Sessions) > 0 {
			t.Errorf("an overflow came with %d session ids; want none", len(read.Sessions))
		}
		for _, id := range read.Sessions {
			got[id] = true
		}
		overflow = overflow || read.Overflow
		cursor = next
		if len(read.Sessions) == 0 && !read.Overflow {
			break
		}
	}
	if overflow {
		return // the reader takes all its sessions as changed
	}
	missing := 0
	for _, id := range ids {
		if !got[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d changed sessions were never reported, and no call reported an overflow", missing, len(ids))
	}
}

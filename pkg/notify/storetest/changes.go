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
// reports nothing more; an ApplyRegistry that applies is reported as
// notify.RegistryChanged, and its redelivery (same message id) is not.
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
	for range 3 { // a feed may report in more than one read
		ids, next, err := other.Changes(ctx, cursor)
		if err != nil {
			t.Fatalf("Changes: %v", err)
		}
		got, cursor = append(got, ids...), next
	}
	got = slices.Compact(slices.Sorted(slices.Values(got)))
	if want := []string{notify.RegistryChanged, "a", "b", "c", "gone"}; !slices.Equal(got, want) {
		t.Errorf("Changes reported %q, want %q", got, want)
	}
	if _, applied, err := st.ApplyRegistry(ctx, notify.RegistryPrompts, notify.OpPut, item, "feed-m1"); err != nil || applied {
		t.Fatalf("ApplyRegistry redelivered = %t, %v; want not applied", applied, err)
	}
	ids, _, err := other.Changes(ctx, cursor)
	if err != nil || len(ids) != 0 {
		t.Errorf("Changes after reading to the end: %q, %v; want nothing", ids, err)
	}
	if _, _, err := st.Changes(ctx, "not a cursor"); err == nil {
		t.Error("Changes with a malformed cursor succeeded")
	}
}

// testChangesMany: more changes than one Changes call returns
// (notify.MaxChangesRead) are all reported over the calls that follow, or
// a call reports notify.ChangesOverflow: none is dropped.
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
		if len(read) > notify.MaxChangesRead {
			t.Errorf("one Changes call returned %d ids; want at most %d", len(read), notify.MaxChangesRead)
		}
		for _, id := range read {
			got[id] = true
		}
		overflow = overflow || got[notify.ChangesOverflow]
		cursor = next
		if len(read) == 0 {
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
		t.Errorf("%d of %d changed sessions were never reported, and no call reported ChangesOverflow", missing, len(ids))
	}
}

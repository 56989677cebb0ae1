package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpush/mcpush/pkg/notify"
)

// testURILimit checks that a subscription URI of MaxURIBytes is kept and a
// longer one is ErrTooLarge, on Subscribe and CreateSession, storing
// nothing.
func testURILimit(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	createSession(t, st, "s1")
	longest := "events://" + strings.Repeat("a", notify.MaxURIBytes-len("events://"))
	if err := st.Subscribe(ctx, "s1", longest); err != nil {
		t.Fatalf("Subscribe(%d-byte URI): %v", len(longest), err)
	}
	if err := st.Subscribe(ctx, "s1", longest+"b"); !errors.Is(err, notify.ErrTooLarge) {
		t.Errorf("Subscribe(%d-byte URI) = %v, want ErrTooLarge", len(longest)+1, err)
	}
	sess := newSession("s2")
	sess.Subscriptions = []string{longest + "b"}
	if err := st.CreateSession(ctx, sess); !errors.Is(err, notify.ErrTooLarge) {
		t.Errorf("CreateSession(%d-byte subscription) = %v, want ErrTooLarge", len(longest)+1, err)
	}
	got, err := st.GetSession(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Subscriptions) != 1 || got.Subscriptions[0] != longest {
		t.Errorf("subscriptions = %d URIs, want only the %d-byte one", len(got.Subscriptions), len(longest))
	}
	if _, err := st.GetSession(ctx, "s2"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetSession(s2) = %v, want ErrNotFound: a refused CreateSession stores nothing", err)
	}
}

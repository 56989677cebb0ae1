package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mcpush/mcpush/pkg/notify"
)

// ignoreVersion leaves Session.Version, whose first value is the store's
// choice, to explicit checks.
var ignoreVersion = cmpopts.IgnoreFields(notify.Session{}, "Version")

func testSession(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	n := now()
	sess := &notify.Session{
		ID:                 "sess-1",
		Principal:          "alice",
		ProtocolVersion:    "2025-06-18",
		ClientInfo:         json.RawMessage(`{"name":"client","version":"1.0"}`),
		ClientCapabilities: json.RawMessage(`{"roots":{"listChanged":true}}`),
		LogLevel:           "info",
		Initialized:        true,
		CreatedAt:          n,
		ExpiresAt:          n.Add(time.Hour),
		Subscriptions:      []string{"file:///c", "file:///a", "events://orders"},
		NotifiedHashes:     map[string]string{notify.RegistryTools: "t1", notify.RegistryPrompts: "p1", notify.RegistryEvents: "e1"},
		Delivered:          7,
	}
	if err := st.CreateSession(ctx, sess); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	want := *sess
	want.Subscriptions = []string{"events://orders", "file:///a", "file:///c"}
	got := getSession(t, st, sess.ID)
	if diff := cmp.Diff(&want, got, cmpOpts, ignoreVersion); diff != "" {
		t.Errorf("GetSession mismatch (-want +got):\n%s", diff)
	}
	if got.Version != sess.Version {
		t.Errorf("GetSession: Version = %d, want %d (the Version CreateSession left in the session)", got.Version, sess.Version)
	}

	// The id is taken; the stored session is unchanged.
	dup := newSession(sess.ID)
	if err := st.CreateSession(ctx, dup); !errors.Is(err, notify.ErrExists) {
		t.Errorf("CreateSession(existing id): got %v, want ErrExists", err)
	}
	if diff := cmp.Diff(&want, getSession(t, st, sess.ID), cmpOpts, ignoreVersion); diff != "" {
		t.Errorf("after CreateSession(existing id): GetSession mismatch (-want +got):\n%s", diff)
	}

	if _, err := st.GetSession(ctx, "sess-none"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetSession(missing): got %v, want ErrNotFound", err)
	}
}

// testSessionFresh checks a session created with nothing but the required
// fields: no subscriptions, a non-nil empty NotifiedHashes, nothing
// delivered.
func testSessionFresh(t *testing.T, s *suite) {
	st := s.store(t)
	sess := createSession(t, st, "fresh")
	got := getSession(t, st, "fresh")
	want := &notify.Session{
		ID:              "fresh",
		ProtocolVersion: sess.ProtocolVersion,
		CreatedAt:       sess.CreatedAt,
		ExpiresAt:       sess.ExpiresAt,
		NotifiedHashes:  map[string]string{},
	}
	if diff := cmp.Diff(want, got, cmpOpts, ignoreVersion); diff != "" {
		t.Errorf("GetSession mismatch (-want +got):\n%s", diff)
	}
	if len(got.NotifiedHashes) != 0 {
		t.Errorf("NotifiedHashes = %v, want empty", got.NotifiedHashes)
	}
	// A fresh session's baseline is what CreateSession was given: with
	// only the tools hash set, the other registries are unset ("").
	createSession(t, st, "baseline", func(s *notify.Session) {
		s.NotifiedHashes = map[string]string{notify.RegistryTools: "h-tools"}
	})
	if diff := cmp.Diff(map[string]string{notify.RegistryTools: "h-tools"}, getSession(t, st, "baseline").NotifiedHashes); diff != "" {
		t.Errorf("NotifiedHashes mismatch (-want +got):\n%s", diff)
	}
}

// testSessionListen checks Session.Listen, the listen state of a
// stream's backing session: written by CreateSession and UpdateSession
// like the rest of the profile (set, changed, cleared), read back whole
// by GetSession and by another Store on the same database, kept apart
// from ClientInfo (a session may have both); its strings count against
// MaxItemBytes with ClientInfo and ClientCapabilities: over it,
// ErrTooLarge and nothing written.
func testSessionListen(t *testing.T, s *suite) {
	st, _, other := storesAs(t, s)
	ctx := t.Context()
	served := notify.ListenState{Process: "process-1", Request: "s:L1", Session: "sess-2025"}
	sess := createSession(t, st, "listen-1", func(s *notify.Session) {
		s.Principal = "mcpush-listen:abc"
		s.ClientInfo = json.RawMessage(`{"name":"c"}`)
		s.Listen = served
	})
	check := func(want notify.ListenState, info string) {
		t.Helper()
		for _, st := range []Store{st, other} {
			got := getSession(t, st, "listen-1")
			if got.Listen != want || string(got.ClientInfo) != info {
				t.Errorf("GetSession: Listen %+v, ClientInfo %s; want %+v, %s", got.Listen, got.ClientInfo, want, info)
			}
		}
	}
	check(served, `{"name":"c"}`)

	parked := notify.ListenState{Parked: "key", After: 42}
	sess.Listen, sess.ClientInfo = parked, nil
	if err := st.UpdateSession(ctx, sess); err != nil {
		t.Fatalf("UpdateSession(parked): %v", err)
	}
	check(parked, "")

	// Too large with the client info: refused, the stored one kept.
	big := *sess
	big.ClientInfo = json.RawMessage(`"` + strings.Repeat("i", notify.MaxItemBytes/2) + `"`)
	big.Listen = notify.ListenState{Request: strings.Repeat("r", notify.MaxItemBytes/2)}
	if err := st.UpdateSession(ctx, &big); !errors.Is(err, notify.ErrTooLarge) {
		t.Errorf("UpdateSession(client info and listen state over MaxItemBytes) = %v, want ErrTooLarge", err)
	}
	tooBig := newSession("listen-2")
	tooBig.Listen = notify.ListenState{Process: strings.Repeat("p", notify.MaxItemBytes+1)}
	if err := st.CreateSession(ctx, tooBig); !errors.Is(err, notify.ErrTooLarge) {
		t.Errorf("CreateSession(listen state over MaxItemBytes) = %v, want ErrTooLarge", err)
	}
	if _, err := st.GetSession(ctx, "listen-2"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetSession of the refused session = %v, want ErrNotFound", err)
	}
	check(parked, "")

	sess.Listen = notify.ListenState{}
	if err := st.UpdateSession(ctx, sess); err != nil {
		t.Fatalf("UpdateSession(cleared): %v", err)
	}
	check(notify.ListenState{}, "")
}

func testUpdateSession(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	n := now()
	sess := createSession(t, st, "upd", func(s *notify.Session) {
		s.Principal = "alice"
		s.Subscriptions = []string{"file:///a"}
		s.NotifiedHashes = map[string]string{notify.RegistryTools: "h"}
		s.Delivered = 3
	})
	stale := *sess

	// UpdateSession works on the struct CreateSession was given, and
	// writes only the mutable profile.
	upd := *sess
	upd.ProtocolVersion = "2025-11-25"
	upd.ClientInfo = json.RawMessage(`{"name":"c2"}`)
	upd.ClientCapabilities = json.RawMessage(`{"sampling":{}}`)
	upd.LogLevel = "debug"
	upd.Initialized = true
	upd.ExpiresAt = n.Add(2 * time.Hour)
	upd.Principal = "mallory"              // not part of the profile
	upd.CreatedAt = n.Add(-time.Hour)      // not part of the profile
	upd.Subscriptions = []string{"x:///y"} // maintained by Subscribe
	upd.NotifiedHashes = nil               // maintained by Append
	upd.Delivered = 0                      // maintained by MarkDelivered
	if err := st.UpdateSession(ctx, &upd); err != nil {
		t.Fatalf("UpdateSession: %v", err)
	}
	if upd.Version != sess.Version+1 {
		t.Errorf("after UpdateSession: Version = %d, want %d", upd.Version, sess.Version+1)
	}
	want := *sess
	want.ProtocolVersion = upd.ProtocolVersion
	want.ClientInfo = upd.ClientInfo
	want.ClientCapabilities = upd.ClientCapabilities
	want.LogLevel = upd.LogLevel
	want.Initialized = true
	want.ExpiresAt = upd.ExpiresAt
	want.Version = upd.Version
	if diff := cmp.Diff(&want, getSession(t, st, "upd"), cmpOpts); diff != "" {
		t.Errorf("GetSession after UpdateSession mismatch (-want +got):\n%s", diff)
	}

	// A stale copy conflicts and changes nothing.
	stale.LogLevel = "error"
	if err := st.UpdateSession(ctx, &stale); !errors.Is(err, notify.ErrConflict) {
		t.Errorf("UpdateSession(stale): got %v, want ErrConflict", err)
	}
	if stale.Version != sess.Version {
		t.Errorf("UpdateSession(stale) changed Version to %d", stale.Version)
	}
	if diff := cmp.Diff(&want, getSession(t, st, "upd"), cmpOpts); diff != "" {
		t.Errorf("GetSession after a conflict mismatch (-want +got):\n%s", diff)
	}

	// Writes through other methods do not change Version: a profile
	// update does not conflict with them.
	if err := st.Subscribe(ctx, "upd", "file:///b"); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	if err := st.MarkDelivered(ctx, "upd", 9); err != nil {
		t.Fatalf("MarkDelivered: %v", err)
	}
	if _, ok, err := st.Append(ctx, "upd", "s", bytesOf("x"), &notify.AppendOptions{
		NotifiedHash: &notify.HashCAS{Registry: notify.RegistryTools, Old: "h", New: "h2"}}); err != nil || !ok {
		t.Fatalf("Append with NotifiedHash: %t, %v", ok, err)
	}
	if _, err := st.PutMessage(ctx, "upd", "k", []byte("m")); err != nil {
		t.Fatalf("PutMessage: %v", err)
	}
	upd.LogLevel = "warning"
	if err := st.UpdateSession(ctx, &upd); err != nil {
		t.Fatalf("UpdateSession after Subscribe, MarkDelivered, Append, PutMessage: %v", err)
	}
	want.LogLevel = "warning"
	want.Version = upd.Version
	want.Subscriptions = []string{"file:///a", "file:///b"}
	want.NotifiedHashes = map[string]string{notify.RegistryTools: "h2"}
	want.Delivered = 9
	if diff := cmp.Diff(&want, getSession(t, st, "upd"), cmpOpts); diff != "" {
		t.Errorf("GetSession after the second UpdateSession mismatch (-want +got):\n%s", diff)
	}

	missing := newSession("upd-none")
	if err := st.UpdateSession(ctx, missing); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("UpdateSession(missing): got %v, want ErrNotFound", err)
	}
}

// testDeleteSession checks that DeleteSession removes the session with its
// logs, mailbox, subscriptions and idempotency keys: a new session with the
// same id starts empty.
func testDeleteSession(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	const id, uri = "del", "file:///a"
	createSession(t, st, id, func(s *notify.Session) {
		s.Subscriptions = []string{uri}
		s.NotifiedHashes = map[string]string{notify.RegistryTools: "h"}
	})
	createSession(t, st, "other", func(s *notify.Session) { s.Subscriptions = []string{uri} })
	appendEvents(t, st, id, "s", "a", "b")
	if _, ok, err := st.Append(ctx, id, "s", bytesOf("c"), &notify.AppendOptions{IdempotencyKey: "k"}); err != nil || !ok {
		t.Fatalf("Append with key: %t, %v", ok, err)
	}
	if _, err := st.PutMessage(ctx, id, "m", []byte("v")); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, st, "other", "s", "o")

	if err := st.DeleteSession(ctx, id); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	checkGone(t, st, id)
	checkSubscribers(t, st, uri, "other")
	if diff := cmp.Diff(events(1, "o"), readEvents(t, st, "other", "s", 0, 10), cmpOpts); diff != "" {
		t.Errorf("other session's events changed (-want +got):\n%s", diff)
	}

	createSession(t, st, id)
	got := getSession(t, st, id)
	if len(got.Subscriptions) != 0 || len(got.NotifiedHashes) != 0 || got.Delivered != 0 {
		t.Errorf("recreated session: Subscriptions %q, NotifiedHashes %v, Delivered %d; want none",
			got.Subscriptions, got.NotifiedHashes, got.Delivered)
	}
	if evs := readEvents(t, st, id, "s", 0, 10); len(evs) != 0 {
		t.Errorf("recreated session has events %v", evs)
	}
	if _, err := st.GetMessage(ctx, id, "m"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("recreated session: GetMessage: got %v, want ErrNotFound", err)
	}
	checkSubscribers(t, st, uri, "other")
	seq, ok, err := st.Append(ctx, id, "s", bytesOf("new"), &notify.AppendOptions{IdempotencyKey: "k"})
	if err != nil || !ok || seq != 1 {
		t.Errorf("recreated session: Append with the old key = %d, %t, %v; want 1, true, nil", seq, ok, err)
	}
}

// testMissingSession checks that every method naming a session that never
// existed reports ErrNotFound and creates nothing.
func testMissingSession(t *testing.T, s *suite) {
	st := s.store(t)
	checkGone(t, st, "none")
	checkGone(t, st, "none") // nothing was created by the first round
	checkSubscribers(t, st, "file:///x")
}

// testExpiry checks that a session whose ExpiresAt has passed is gone for
// every method, and that UpdateSession can extend it. It sleeps about
// three seconds: the set-up before the expiry makes several requests,
// which take over a second on a loaded machine against moto.
func testExpiry(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	const uri = "file:///watched"
	n := now()

	// Expired when created.
	createSession(t, st, "past", func(s *notify.Session) {
		s.ExpiresAt = n.Add(-time.Second)
		s.Subscriptions = []string{uri}
	})

	// Expires soon, with state; and one that is extended before then.
	soon := time.Now().Add(3 * time.Second)
	createSession(t, st, "soon", func(s *notify.Session) {
		s.ExpiresAt = soon
		s.Subscriptions = []string{uri}
	})
	ext := createSession(t, st, "extended", func(s *notify.Session) {
		s.ExpiresAt = soon
		s.Subscriptions = []string{uri}
	})
	appendEvents(t, st, "soon", "s", "a")
	if _, err := st.PutMessage(ctx, "soon", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	ext.ExpiresAt = now().Add(time.Hour)
	if err := st.UpdateSession(ctx, ext); err != nil {
		t.Fatalf("UpdateSession(extend): %v", err)
	}
	getSession(t, st, "soon")
	checkSubscribers(t, st, uri, "extended", "soon")
	if late := time.Since(soon); late >= 0 {
		t.Fatalf("setting up took %v too long: the checks before expiry ran after it", late)
	}

	checkGone(t, st, "past")

	time.Sleep(time.Until(soon) + 200*time.Millisecond)
	checkSubscribers(t, st, uri, "extended")
	getSession(t, st, "extended")
	checkGone(t, st, "soon")
}

package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpush/mcpush/pkg/notify"
)

// testSessionCount checks notify.SessionCounter: a principal's live
// sessions are counted up to the limit, from any Store on the same
// database; deleted and expired sessions do not count, a session whose
// expiry was extended still does, expired index entries do not hide live
// ones at the limit, and bad arguments are refused.
func testSessionCount(t *testing.T, s *suite) {
	st, sc, other := storesAs(t, s)
	ctx := t.Context()
	check := func(c notify.SessionCounter, principal string, limit, want int) {
		t.Helper()
		got, err := c.CountSessions(ctx, principal, limit)
		if err != nil || got != want {
			t.Errorf("CountSessions(%q, %d) = %d, %v; want %d", principal, limit, got, err, want)
		}
	}
	of := principalOf

	check(sc, "alice", 5, 0)
	for _, id := range []string{"a1", "a2", "a3"} {
		createSession(t, st, id, of("alice"))
	}
	createSession(t, st, "b1", of("bob"))
	createSession(t, st, "anon1", of(""))
	check(sc, "alice", 5, 3)
	check(other, "alice", 5, 3) // another process sees them
	check(sc, "alice", 3, 3)
	check(sc, "alice", 2, 2) // counts no further than the limit
	check(sc, "bob", 5, 1)
	check(sc, "", 5, 1)
	check(sc, "carol", 1, 0)
	if err := st.DeleteSession(ctx, "a2"); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	check(other, "alice", 5, 2)
	check(sc, "alice", 2, 2)
	if err := st.DeleteSession(ctx, "a1"); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	check(sc, "alice", 2, 1)

	// Expiry: dave has two sessions that expire soon (their ids sort
	// first), one of them extended, and two that live.
	soon := now().Add(time.Second)
	short := func(s *notify.Session) { s.ExpiresAt = soon }
	createSession(t, st, "d1", of("dave"), short)
	ext := createSession(t, st, "d2", of("dave"), short)
	createSession(t, st, "d3", of("dave"))
	createSession(t, st, "d4", of("dave"))
	ext.ExpiresAt = now().Add(time.Hour)
	if err := st.UpdateSession(ctx, ext); err != nil {
		t.Fatalf("UpdateSession(extend): %v", err)
	}
	check(sc, "dave", 10, 4)
	if late := time.Since(soon); late >= 0 {
		t.Fatalf("setting up took %v too long: the checks before expiry ran after it", late)
	}
	time.Sleep(time.Until(soon) + 200*time.Millisecond)
	check(sc, "dave", 10, 3)
	check(sc, "dave", 3, 3) // at the limit, the expired d1 does not count
	check(sc, "dave", 2, 2)
	check(other, "dave", 4, 3)
	// An expired session replaced under the same id counts once.
	createSession(t, st, "d1", of("dave"))
	check(sc, "dave", 10, 4)
	if err := st.DeleteSession(ctx, "d1"); err != nil {
		t.Fatalf("DeleteSession(d1): %v", err)
	}
	check(sc, "dave", 10, 3)

	for _, tc := range []struct {
		principal string
		limit     int
		want      error
	}{
		{"alice", 0, notify.ErrInvalid},
		{"alice", -1, notify.ErrInvalid},
		{strings.Repeat("p", notify.MaxURIBytes+1), 1, notify.ErrTooLarge},
	} {
		if _, err := sc.CountSessions(ctx, tc.principal, tc.limit); !errors.Is(err, tc.want) {
			t.Errorf("CountSessions(%.10q, %d): %v, want %v", tc.principal, tc.limit, err, tc.want)
		}
	}
}

// testIdleSessions checks notify.SessionReclaimer: only a principal's
// live sessions that hold nothing are idle (not one with a subscription,
// a GET stream or another stream's events, or a mailbox message) and
// that expire by the time given, least recently extended first, up to
// the limit; from any Store on the same
// database; bad arguments are refused.
func testIdleSessions(t *testing.T, s *suite) {
	st, sr, other := storesAs(t, s)
	ctx := t.Context()
	base := now()
	as := func(p string, expiresIn time.Duration) func(*notify.Session) {
		return func(s *notify.Session) { s.Principal = p; s.ExpiresAt = base.Add(expiresIn) }
	}
	// Created out of order: the least recently extended comes first.
	createSession(t, st, "idle-late", as("alice", 50*time.Minute))
	createSession(t, st, "idle-early", as("alice", 40*time.Minute))
	createSession(t, st, "idle-mid", as("alice", 45*time.Minute))
	createSession(t, st, "subscribed", as("alice", time.Minute))
	createSession(t, st, "get-stream", as("alice", time.Minute))
	createSession(t, st, "post-stream", as("alice", time.Minute))
	createSession(t, st, "mailbox", as("alice", time.Minute))
	createSession(t, st, "bob-idle", as("bob", time.Minute))
	createSession(t, st, "expiring", as("alice", 500*time.Millisecond))
	if err := st.Subscribe(ctx, "subscribed", "events://orders"); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, st, "get-stream", notify.SessionStream, "x")
	appendEvents(t, st, "post-stream", "s1", "y")
	if _, err := st.PutMessage(ctx, "mailbox", "k", []byte("m")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // "expiring" expires
	all := base.Add(2 * time.Hour)
	check := func(sr notify.SessionReclaimer, principal string, by time.Time, limit int, want ...string) {
		t.Helper()
		got, err := sr.IdleSessions(ctx, principal, by, limit)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("IdleSessions(%q, %v, %d) = %q, %v; want %q", principal, by.Sub(base), limit, got, err, want)
		}
	}
	check(sr, "alice", all, 10, "idle-early", "idle-mid", "idle-late")
	check(other, "alice", all, 2, "idle-early", "idle-mid")
	check(sr, "alice", all, 1, "idle-early")
	check(sr, "alice", base.Add(47*time.Minute), 10, "idle-early", "idle-mid") // idle-late expires later
	check(sr, "alice", base.Add(40*time.Minute), 10, "idle-early")
	check(sr, "alice", base.Add(39*time.Minute), 10)
	check(sr, "bob", all, 10, "bob-idle")
	check(sr, "carol", all, 10)
	if err := st.DeleteSession(ctx, "idle-early"); err != nil {
		t.Fatal(err)
	}
	check(other, "alice", all, 1, "idle-mid")
	if _, err := sr.IdleSessions(ctx, "alice", all, 0); !wantErr(err, notify.ErrInvalid) {
		t.Errorf("IdleSessions(limit 0) = %v, want ErrInvalid", err)
	}
	if _, err := sr.IdleSessions(ctx, strings.Repeat("p", notify.MaxURIBytes+1), all, 1); !wantErr(err, notify.ErrTooLarge) {
		t.Errorf("IdleSessions(long principal) = %v, want ErrTooLarge", err)
	}
}

// testPrincipalProfiles checks notify.ProfileLister: the live sessions
// of a principal, sorted, up to the limit, only those whose Listen
// matches when there is a match (each field of it, and not the bytes of
// another field or of ClientInfo); from any Store on the same
// database; not another principal's, not deleted or expired ones, an
// extended one past its first expiry still; each profile as GetSession
// reads it; bad arguments are refused.
func testPrincipalProfiles(t *testing.T, s *suite) {
	st, pl, other := storesAs(t, s)
	ctx := t.Context()
	checkMatch := func(pl notify.ProfileLister, principal string, match notify.ListenMatch, limit int, want ...string) {
		t.Helper()
		profiles, err := pl.PrincipalProfiles(ctx, principal, match, limit)
		var ids []string
		for _, p := range profiles {
			ids = append(ids, p.ID)
			g, err := st.GetSession(ctx, p.ID)
			if err != nil {
				t.Errorf("GetSession(%q): %v", p.ID, err)
				continue
			}
			g.Subscriptions, g.StreamHead = nil, 0
			if d := cmp.Diff(g, p); d != "" {
				t.Errorf("PrincipalProfiles(%q): profile of %s differs from GetSession's: %s", principal, p.ID, d)
			}
		}
		if err != nil || !slices.Equal(ids, want) {
			t.Errorf("PrincipalProfiles(%q, %+v, %d) = %q, %v; want %q", principal, match, limit, ids, err, want)
		}
	}
	check := func(pl notify.ProfileLister, principal string, limit int, want ...string) {
		t.Helper()
		checkMatch(pl, principal, notify.ListenMatch{}, limit, want...)
	}
	of := principalOf
	soon := now().Add(time.Second)
	short := func(s *notify.Session) { s.ExpiresAt = soon }
	createSession(t, st, "p3", of("alice"))
	createSession(t, st, "p1", of("alice"), short)
	ext := createSession(t, st, "p2", of("alice"), short)
	createSession(t, st, "p4", of("alice"), func(s *notify.Session) {
		s.ClientInfo, s.ClientCapabilities = json.RawMessage(`{"name":"k1"}`), json.RawMessage(`{"roots":{}}`)
		s.NotifiedHashes = map[string]string{notify.RegistryTools: "h1"}
		s.Listen = notify.ListenState{Process: "proc", Request: "s:r1", Session: "sess-1"}
	})
	createSession(t, st, "p5", of("alice"), func(s *notify.Session) {
		s.Listen = notify.ListenState{Parked: "k1", After: 7}
	})
	createSession(t, st, "q1", of("bob"), func(s *notify.Session) {
		s.Listen = notify.ListenState{Parked: "k1"}
	})
	ext.ExpiresAt = now().Add(time.Hour)
	if err := st.UpdateSession(ctx, ext); err != nil {
		t.Fatalf("UpdateSession(extend): %v", err)
	}
	check(pl, "alice", 10, "p1", "p2", "p3", "p4", "p5")
	if late := time.Since(soon); late >= 0 {
		t.Fatalf("setting up took %v too long: the checks before expiry ran after it", late)
	}
	time.Sleep(time.Until(soon) + 200*time.Millisecond)
	check(pl, "alice", 10, "p2", "p3", "p4", "p5") // p1 expired, p2 extended
	check(other, "alice", 10, "p2", "p3", "p4", "p5")
	// Only those whose Listen matches: every field of the match, each
	// against its own field.
	m := func(request, parked, session string) notify.ListenMatch {
		return notify.ListenMatch{Request: request, Parked: parked, Session: session}
	}
	checkMatch(pl, "alice", m("s:r1", "", ""), 10, "p4")
	checkMatch(other, "alice", m("", "k1", ""), 10, "p5")
	checkMatch(pl, "alice", m("", "", "sess-1"), 10, "p4")
	checkMatch(pl, "alice", m("s:r1", "", "sess-1"), 10, "p4")
	checkMatch(pl, "alice", m("s:r1", "k1", ""), 10)
	checkMatch(pl, "alice", m("s:r2", "", ""), 10)
	checkMatch(pl, "alice", m("proc", "", ""), 10)     // the process is not the request
	checkMatch(pl, "alice", m("", "k1", "sess-1"), 10) // nor one field another's
	checkMatch(pl, "alice", m("", "k", ""), 10)        // nor a prefix the value
	checkMatch(pl, "alice", m("", "", "k1"), 10)
	checkMatch(pl, "bob", m("", "k1", ""), 10, "q1")
	// An update changes what matches.
	p5 := getSession(t, st, "p5")
	p5.Listen = notify.ListenState{Process: "proc2", Request: "s:r2"}
	if err := st.UpdateSession(ctx, p5); err != nil {
		t.Fatalf("UpdateSession(p5): %v", err)
	}
	checkMatch(other, "alice", m("", "k1", ""), 10)
	checkMatch(other, "alice", m("s:r2", "", ""), 10, "p5")
	if got, err := pl.PrincipalProfiles(ctx, "alice", notify.ListenMatch{}, 2); err != nil || len(got) != 2 {
		t.Errorf("PrincipalProfiles(alice, 2) = %d sessions, %v; want 2 of them", len(got), err)
	}
	if err := st.DeleteSession(ctx, "p3"); err != nil {
		t.Fatal(err)
	}
	check(other, "alice", 10, "p2", "p4", "p5")
	check(pl, "bob", 10, "q1")
	check(pl, "carol", 10)
	if _, err := pl.PrincipalProfiles(ctx, "alice", notify.ListenMatch{}, 0); !wantErr(err, notify.ErrInvalid) {
		t.Errorf("PrincipalProfiles(limit 0) = %v, want ErrInvalid", err)
	}
	if _, err := pl.PrincipalProfiles(ctx, strings.Repeat("p", notify.MaxURIBytes+1), notify.ListenMatch{}, 1); !wantErr(err, notify.ErrTooLarge) {
		t.Errorf("PrincipalProfiles(long principal) = %v, want ErrTooLarge", err)
	}
	long := strings.Repeat("m", notify.MaxURIBytes+1)
	for _, match := range []notify.ListenMatch{m(long, "", ""), m("", long, ""), m("", "", long)} {
		if _, err := pl.PrincipalProfiles(ctx, "alice", match, 1); !wantErr(err, notify.ErrTooLarge) {
			t.Errorf("PrincipalProfiles(a long match field) = %v, want ErrTooLarge", err)
		}
	}
}

// principalOf sets a session's Principal (a createSession option).
func principalOf(p string) func(*notify.Session) {
	return func(s *notify.Session) { s.Principal = p }
}

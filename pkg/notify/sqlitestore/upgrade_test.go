package sqlitestore

import (
	"context"
	"database/sql"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// version4 undoes what schema version 4 added: the listen state's columns.
var version4 = []string{
	`ALTER TABLE sessions DROP COLUMN listen_process`,
	`ALTER TABLE sessions DROP COLUMN listen_request`,
	`ALTER TABLE sessions DROP COLUMN listen_parked`,
	`ALTER TABLE sessions DROP COLUMN listen_after`,
	`ALTER TABLE sessions DROP COLUMN listen_session`,
}

// TestUpgradeFromVersion1: a file of schema version 1 (subscriptions
// without AppendEach's position and start) is upgraded on open, keeping
// its subscriptions, which then start at position 0.
func TestUpgradeFromVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	st, err := New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := st.CreateSession(ctx, &notify.Session{ID: "s", CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		Subscriptions: []string{"events://t"}}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	// Back to version 1.
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(version4, []string{
		`ALTER TABLE subscriptions DROP COLUMN position`,
		`ALTER TABLE subscriptions DROP COLUMN since`,
		`ALTER TABLE sessions DROP COLUMN notified_events`, // version 3
		`PRAGMA user_version = 1`,
	}...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	st, err = New(path, nil)
	if err != nil {
		t.Fatalf("opening a version 1 file: %v", err)
	}
	defer st.Close()
	var seen []notify.Position
	got, err := st.AppendEach(ctx, []string{"s"}, "events://t", 1, func(_ *notify.Session, p notify.Position) [][]byte {
		seen = append(seen, p)
		return [][]byte{[]byte("e1")}
	})
	if err != nil || len(got) != 1 || len(seen) != 1 || seen[0].At != 0 {
		t.Fatalf("AppendEach after the upgrade = %q, %v (pick saw %v)", got, err, seen)
	}
	var v int
	if err := st.w.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Errorf("user_version = %d, %v; want %d", v, err, schemaVersion)
	}
}

// TestUpgradeFromVersion2: a file of schema version 2 (sessions without
// the events registry's notified hash) is upgraded on open, keeping its
// sessions, whose events hash then starts unset and takes a conditional
// append.
func TestUpgradeFromVersion2(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v2.db")
	st, err := New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := st.CreateSession(ctx, &notify.Session{ID: "s", CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		NotifiedHashes: map[string]string{notify.RegistryTools: "t1"}}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(version4, []string{
		`ALTER TABLE sessions DROP COLUMN notified_events`,
		`PRAGMA user_version = 2`,
	}...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	st, err = New(path, nil)
	if err != nil {
		t.Fatalf("opening a version 2 file: %v", err)
	}
	defer st.Close()
	_, ok, err := st.Append(ctx, "s", "get", [][]byte{[]byte("x")}, &notify.AppendOptions{
		NotifiedHash: &notify.HashCAS{Registry: notify.RegistryEvents, Old: "", New: "e1"}})
	if err != nil || !ok {
		t.Fatalf("Append with an events HashCAS after the upgrade = %t, %v", ok, err)
	}
	sess, err := st.GetSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{notify.RegistryTools: "t1", notify.RegistryEvents: "e1"}; !maps.Equal(sess.NotifiedHashes, want) {
		t.Errorf("NotifiedHashes = %v, want %v", sess.NotifiedHashes, want)
	}
	var v int
	if err := st.w.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Errorf("user_version = %d, %v; want %d", v, err, schemaVersion)
	}
}

// TestUpgradeFromVersion3: a file of schema version 3, whose listen
// backing sessions keep their listen state in client_info as the
// previous version wrote it, is upgraded on open: each such row's state
// moves to the listen columns (its client_info cleared), where
// PrincipalProfiles matches it and GetSession reads it; a client's
// session, and a session of another principal whose client info looks
// the same, keep their client info and no listen state.
func TestUpgradeFromVersion3(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v3.db")
	st, err := New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(version4, `PRAGMA user_version = 3`) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Rows as version 3 wrote them.
	now := time.Now()
	const lp = "mcpush-listen:4h8nkvUPd4rkvnp-Ig3W26Zkw_7XRDqDbTv1nWVMkBk"
	for _, r := range []struct{ id, principal, info string }{
		{"listen-parked", lp, `{"mcpush/parked":"pk1","mcpush/after":7}`},
		{"listen-served", lp, `{"mcpush/process":"process-a","mcpush/request":"s:L1"}`},
		{"evstream-1", lp, `{"mcpush/process":"process-a","mcpush/request":"n:3","mcpush/session":"sess-2025"}`},
		{"client", "alice", `{"name":"c","version":"1"}`},
		{"lookalike", "alice", `{"mcpush/parked":"pk1"}`},
	} {
		if _, err := db.Exec(`INSERT INTO sessions (id, principal, protocol_version, client_info, log_level,
			initialized, created_at, expires_at, version, delivered) VALUES (?, ?, '2026-07-28', ?, '', 1, ?, ?, 1, 0)`,
			r.id, r.principal, []byte(r.info), now.UnixNano(), now.Add(time.Hour).UnixNano()); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	st, err = New(path, nil)
	if err != nil {
		t.Fatalf("opening a version 3 file: %v", err)
	}
	defer st.Close()
	for id, want := range map[string]notify.ListenState{
		"listen-parked": {Parked: "pk1", After: 7},
		"listen-served": {Process: "process-a", Request: "s:L1"},
		"evstream-1":    {Process: "process-a", Request: "n:3", Session: "sess-2025"},
	} {
		sess, err := st.GetSession(ctx, id)
		if err != nil || sess.Listen != want || sess.ClientInfo != nil {
			t.Errorf("GetSession(%s) after the upgrade: Listen %+v, ClientInfo %s, %v; want %+v and no client info", id, sess.Listen, sess.ClientInfo, err, want)
		}
	}
	for id, info := range map[string]string{"client": `{"name":"c","version":"1"}`, "lookalike": `{"mcpush/parked":"pk1"}`} {
		sess, err := st.GetSession(ctx, id)
		if err != nil || sess.Listen != (notify.ListenState{}) || string(sess.ClientInfo) != info {
			t.Errorf("GetSession(%s) after the upgrade: Listen %+v, ClientInfo %s, %v; want no listen state and %s", id, sess.Listen, sess.ClientInfo, err, info)
		}
	}
	for _, c := range []struct {
		match notify.ListenMatch
		want  string
	}{
		{notify.ListenMatch{Parked: "pk1"}, "listen-parked"},
		{notify.ListenMatch{Request: "s:L1"}, "listen-served"},
		{notify.ListenMatch{Session: "sess-2025"}, "evstream-1"},
	} {
		got, err := st.PrincipalProfiles(ctx, lp, c.match, 10)
		if err != nil || len(got) != 1 || got[0].ID != c.want {
			t.Errorf("PrincipalProfiles(%+v) after the upgrade = %v, %v; want %s", c.match, got, err, c.want)
		}
	}
	var v int
	if err := st.w.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Errorf("user_version = %d, %v; want %d", v, err, schemaVersion)
	}
}

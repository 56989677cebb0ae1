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
	for _, q := range []string{
		`ALTER TABLE subscriptions DROP COLUMN position`,
		`ALTER TABLE subscriptions DROP COLUMN since`,
		`ALTER TABLE sessions DROP COLUMN notified_events`, // version 3
		`PRAGMA user_version = 1`,
	} {
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
	for _, q := range []string{
		`ALTER TABLE sessions DROP COLUMN notified_events`,
		`PRAGMA user_version = 2`,
	} {
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

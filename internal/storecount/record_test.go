package storecount_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// TestRecord: a recorded store writes its counts to its stats file while
// it runs (a killed process keeps them) and when it is closed, replacing
// the file whole, with nothing else left in the directory.
func TestRecord(t *testing.T) {
	ctx := context.Background()
	sq, err := sqlitestore.New(filepath.Join(t.TempDir(), "record.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "stats") // created by Record
	st, path, err := storecount.Record(sq, dir, &storecount.RecordOptions{Name: "test", Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(path), "test-") || filepath.Dir(path) != dir {
		t.Errorf("stats file %s, want test-PID-NANOS.json in %s", path, dir)
	}
	if _, ok := st.(notify.RateCounter); !ok {
		t.Error("a recorded SQLite store is not a notify.RateCounter")
	}
	stats := func() storecount.Stats {
		t.Helper()
		all, err := storecount.ReadStats(dir)
		if err != nil || len(all) != 1 {
			t.Fatalf("ReadStats = %+v, %v; want one file", all, err)
		}
		return all[0]
	}
	if s := stats(); s.Process != "test" || s.PID != os.Getpid() || s.Ops.Total() != 0 {
		t.Errorf("first stats %+v, want process test, pid %d, no requests", s, os.Getpid())
	}

	// While the store is open, the counts reach the file.
	now := time.Now()
	if err := st.CreateSession(ctx, &notify.Session{ID: "s1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); stats().Ops["CreateSession"] != 1; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the stats file has %+v 10 s after a CreateSession", stats())
		}
	}

	// Closing writes the last counts, which the interval would not
	// have yet.
	if _, err := st.GetSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RegistryHashes(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	s := stats()
	if diff := cmp.Diff(storecount.Counts{"CreateSession": 1, "GetSession": 1, "RegistryHashes": 1}, s.Ops); diff != "" {
		t.Errorf("stats after Close (-want +got):\n%s", diff)
	}
	if s.Reads != 2 || s.Writes != 1 || s.Updated.Before(s.Started) {
		t.Errorf("stats after Close: %d reads, %d writes, started %v, updated %v; want 2, 1, updated after started", s.Reads, s.Writes, s.Started, s.Updated)
	}
	if _, err := sq.GetSession(ctx, "s1"); err == nil {
		t.Error("closing the recorded store left the SQLite store open")
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Errorf("stats directory holds %v (%v), want the stats file only", entries, err)
	}
}

// TestRecordBadDir: a directory that cannot be written is an error at
// once, not a silent diagnostic.
func TestRecordBadDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if st, _, err := storecount.Record(nil, file, nil); err == nil {
		st.Close()
		t.Error("Record into a regular file's path: no error")
	}
}

// TestOpenStats: with a stats directory the store is counted into a
// stats file, written last when it is closed.
func TestOpenStats(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := storecount.Open(ctx, envconfig.Store{Spec: "sqlite:" + filepath.Join(t.TempDir(), "mcpush.db"), StatsDir: dir}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.AppendTopicEvent(ctx, "t", "m-1", time.Now(), []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	all, err := storecount.ReadStats(dir)
	if err != nil || len(all) != 1 || all[0].Process != "test" || all[0].Ops.String() != "AppendTopicEvent=1" || all[0].Writes != 1 {
		t.Errorf("stats = %+v, %v; want one file of process test with AppendTopicEvent=1", all, err)
	}
}

// TestOpenStatsError: a stats directory that cannot be made is an error
// that names MCPUSH_STORE_STATS and its value (it said "store stats: ..."
// alone), and the store is closed.
func TestOpenStatsError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := storecount.Open(context.Background(), envconfig.Store{Spec: "sqlite:" + filepath.Join(t.TempDir(), "mcpush.db"), StatsDir: file}, "test", nil)
	if want := fmt.Sprintf("MCPUSH_STORE_STATS=%q: store stats: ", file); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Open with a file as the stats directory: %v; want %s...", err, want)
	}
}

package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/storetest"
)

func open(dsn string) (storetest.Store, error) { return New(dsn, nil) }

func TestMain(m *testing.M) {
	storetest.RunChild(open)
	os.Exit(m.Run())
}

func TestContract(t *testing.T) {
	storetest.Run(t, open, func(t *testing.T) string {
		return filepath.Join(t.TempDir(), "store.db")
	})
}

func newStore(t *testing.T, path string, opts *Options) *Store {
	t.Helper()
	s, err := New(path, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestReopen checks that everything survives closing and reopening the
// file, and that New creates missing parent directories.
func TestReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "a", "b", "store.db")
	s, err := New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	sess := &notify.Session{
		ID: "s1", ProtocolVersion: "2025-06-18", CreatedAt: time.Unix(1700000000, 123456789).UTC(),
		ExpiresAt: time.Now().Add(time.Hour).UTC(), Subscriptions: []string{"file:///a"},
		NotifiedHashes: map[string]string{notify.RegistryTools: "h"}, ClientInfo: json.RawMessage(`{"name":"c"}`),
	}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Append(ctx, "s1", "get", [][]byte{[]byte("e1"), []byte("e2")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AppendTopicEvent(ctx, "orders", "m1", time.Now(), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	reg, _, err := s.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut,
		map[string]json.RawMessage{"echo": json.RawMessage(`{"name":"echo"}`)}, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s = newStore(t, path, nil)
	got, err := s.GetSession(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sess, got); diff != "" {
		t.Errorf("GetSession after reopen mismatch (-want +got):\n%s", diff)
	}
	seq, _, err := s.Append(ctx, "s1", "get", [][]byte{[]byte("e3")}, nil)
	if err != nil || seq != 3 {
		t.Errorf("Append after reopen = %d, %v; want 3", seq, err)
	}
	if _, created, err := s.AppendTopicEvent(ctx, "orders", "m1", time.Now(), json.RawMessage(`1`)); err != nil || created {
		t.Errorf("AppendTopicEvent(seen message id) after reopen = %t, %v; want false, nil", created, err)
	}
	hashes, err := s.RegistryHashes(ctx)
	if err != nil || hashes[notify.RegistryTools] != reg.Hash {
		t.Errorf("RegistryHashes after reopen = %v, %v; want tools %q", hashes, err, reg.Hash)
	}
}

// TestTTL checks the expiry of events, messages, idempotency keys, topic
// events and registry message ids with an injected clock, and that
// CreateSession prunes expired rows.
func TestTTL(t *testing.T) {
	ctx := t.Context()
	clk := testutil.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(t, filepath.Join(t.TempDir(), "store.db"), &Options{
		Now: clk.Now, EventTTL: time.Hour, TopicEventTTL: 2 * time.Hour,
	})
	sess := &notify.Session{ID: "s1", ExpiresAt: clk.Now().Add(10 * time.Hour)}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	expiring := &notify.Session{ID: "s2", ExpiresAt: clk.Now().Add(30 * time.Minute), Subscriptions: []string{"u"}}
	if err := s.CreateSession(ctx, expiring); err != nil {
		t.Fatal(err)
	}
	key := &notify.AppendOptions{IdempotencyKey: "k"}
	if _, _, err := s.Append(ctx, "s1", "a", [][]byte{[]byte("old")}, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutMessage(ctx, "s1", "m", []byte("old")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AppendTopicEvent(ctx, "t", "id1", clk.Now(), json.RawMessage(`"old"`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut,
		map[string]json.RawMessage{"a": json.RawMessage(`1`)}, "r1"); err != nil {
		t.Fatal(err)
	}

	for id, ttl := range map[string]time.Duration{"t-gone": 30 * time.Minute, "t-kept": 10 * time.Hour} {
		if err := s.CreateTask(ctx, &notify.Task{Principal: "p", ID: id, Status: notify.TaskWorking, ExpiresAt: clk.Now().Add(ttl)}); err != nil {
			t.Fatal(err)
		}
	}

	clk.Advance(90 * time.Minute) // past EventTTL, not TopicEventTTL
	if evs, err := s.ReadEvents(ctx, "s1", "a", 0, 10); err != nil || len(evs) != 0 {
		t.Errorf("ReadEvents after EventTTL = %v, %v; want none", evs, err)
	}
	if _, err := s.GetMessage(ctx, "s1", "m"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetMessage after EventTTL: got %v, want ErrNotFound", err)
	}
	if created, err := s.PutMessage(ctx, "s1", "m", []byte("new")); err != nil || !created {
		t.Errorf("PutMessage over an expired message = %t, %v; want true", created, err)
	}
	if seq, ok, err := s.Append(ctx, "s1", "a", [][]byte{[]byte("new")}, key); err != nil || !ok || seq != 2 {
		t.Errorf("Append with an expired key = %d, %t, %v; want 2, true (seq never reused)", seq, ok, err)
	}
	if _, applied, err := s.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut,
		map[string]json.RawMessage{"b": json.RawMessage(`2`)}, "r1"); err != nil || !applied {
		t.Errorf("ApplyRegistry with an expired message id = %t, %v; want applied", applied, err)
	}
	if _, created, err := s.AppendTopicEvent(ctx, "t", "id1", clk.Now(), json.RawMessage(`"dup"`)); err != nil || created {
		t.Errorf("AppendTopicEvent within TopicEventTTL = %t, %v; want a duplicate", created, err)
	}
	if subs, err := s.Subscribers(ctx, "u"); err != nil || len(subs) != 0 {
		t.Errorf("Subscribers(u) = %q, %v; want none (s2 expired)", subs, err)
	}

	clk.Advance(time.Hour) // past TopicEventTTL of id1
	if evs, err := s.ReadTopicEvents(ctx, "t", 0, 10); err != nil || len(evs) != 0 {
		t.Errorf("ReadTopicEvents after TopicEventTTL = %v, %v; want none", evs, err)
	}
	ev, created, err := s.AppendTopicEvent(ctx, "t", "id1", clk.Now(), json.RawMessage(`"again"`))
	if err != nil || !created || ev.Seq != 2 {
		t.Errorf("AppendTopicEvent(expired message id) = %d, %t, %v; want 2, true", ev.Seq, created, err)
	}

	// CreateSession prunes: s2 with its subscription, and the expired rows.
	clk.Advance(pruneInterval)
	if err := s.CreateSession(ctx, &notify.Session{ID: "s3", ExpiresAt: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, table := range []string{"sessions", "subscriptions", "events", "messages", "idempotency", "topic_events", "registry_messages", "tasks"} {
		var n int
		if err := s.r.QueryRowContext(ctx, fmt.Sprintf("SELECT count(*) FROM %s", table)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		counts[table] = n
	}
	want := map[string]int{
		"sessions": 2, "subscriptions": 0, "events": 0, "messages": 0, "idempotency": 0,
		"topic_events": 1, "registry_messages": 0, "tasks": 1,
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("rows after prune (-want +got):\n%s", diff)
	}
}

// TestCreateOverExpired checks that the id of an expired session is free,
// and that the new session inherits nothing.
func TestCreateOverExpired(t *testing.T) {
	ctx := t.Context()
	clk := testutil.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(t, filepath.Join(t.TempDir(), "store.db"), &Options{Now: clk.Now})
	old := &notify.Session{ID: "s1", ExpiresAt: clk.Now().Add(time.Minute), Subscriptions: []string{"u"}}
	if err := s.CreateSession(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Append(ctx, "s1", "a", [][]byte{[]byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession(ctx, &notify.Session{ID: "s1", ExpiresAt: clk.Now().Add(time.Hour)}); !errors.Is(err, notify.ErrExists) {
		t.Fatalf("CreateSession(live id): got %v, want ErrExists", err)
	}
	clk.Advance(time.Minute)
	if err := s.CreateSession(ctx, &notify.Session{ID: "s1", ExpiresAt: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("CreateSession(expired id): %v", err)
	}
	got, err := s.GetSession(ctx, "s1")
	if err != nil || len(got.Subscriptions) != 0 {
		t.Errorf("GetSession = %+v, %v; want no subscriptions", got, err)
	}
	if seq, _, err := s.Append(ctx, "s1", "a", [][]byte{[]byte("y")}, nil); err != nil || seq != 1 {
		t.Errorf("Append = %d, %v; want 1", seq, err)
	}
}

// TestZeroExpiresAt checks that a session without an expiry is refused
// rather than stored already expired.
func TestZeroExpiresAt(t *testing.T) {
	s := newStore(t, filepath.Join(t.TempDir(), "store.db"), nil)
	if err := s.CreateSession(t.Context(), &notify.Session{ID: "s1"}); !errors.Is(err, notify.ErrInvalid) {
		t.Errorf("CreateSession(zero ExpiresAt): got %v, want ErrInvalid", err)
	}
}

// TestConcurrentOpen checks that many Stores opening one new file at once
// all succeed, and agree.
func TestConcurrentOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new", "store.db")
	const n = 6
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = New(path, nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("New %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	ctx := t.Context()
	if err := stores[0].CreateSession(ctx, &notify.Session{ID: "s", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for i, s := range stores {
		if seq, _, err := s.Append(ctx, "s", "a", [][]byte{nil}, nil); err != nil || seq != int64(i+1) {
			t.Errorf("store %d: Append = %d, %v; want %d", i, seq, err, i+1)
		}
	}
}

// TestContextCanceled checks that a canceled context stops a write that
// waits for the writer connection.
func TestContextCanceled(t *testing.T) {
	s := newStore(t, filepath.Join(t.TempDir(), "store.db"), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.CreateSession(ctx, &notify.Session{ID: "s", ExpiresAt: time.Now().Add(time.Hour)})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("CreateSession(canceled) = %v, want context.Canceled", err)
	}
}

func TestDSN(t *testing.T) {
	got := dsn("/tmp/a dir/x?y#z.db", false)
	want := "file:///tmp/a%20dir/x%3Fy%23z.db?_pragma=busy_timeout%2810000%29&_pragma=synchronous%28NORMAL%29&_pragma=journal_mode%28WAL%29&_txlock=immediate"
	if got != want {
		t.Errorf("dsn = %q, want %q", got, want)
	}
	// The odd name works.
	newStore(t, filepath.Join(t.TempDir(), "a dir", "x?y#z.db"), nil)
}

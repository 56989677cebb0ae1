package mcp_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/heldclients"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// failingReads is a store whose session and log reads fail while failing
// is set (a throttled or unreachable store), recording which sessions'
// reads failed.
type failingReads struct {
	mcp.Store
	mu      sync.Mutex
	failing bool
	failed  map[string]bool
}

func (f *failingReads) fail(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failing {
		return nil
	}
	f.failed[id] = true
	return fmt.Errorf("injected: %w", notify.ErrUnavailable)
}

func (f *failingReads) set(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = on
}

func (f *failingReads) failedSessions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.failed)
}

func (f *failingReads) GetSession(ctx context.Context, id string) (*notify.Session, error) {
	if err := f.fail(id); err != nil {
		return nil, err
	}
	return f.Store.GetSession(ctx, id)
}

func (f *failingReads) ReadEvents(ctx context.Context, id, stream string, after int64, limit int) ([]notify.Event, error) {
	if err := f.fail(id); err != nil {
		return nil, err
	}
	return f.Store.ReadEvents(ctx, id, stream, after, limit)
}

// TestHeldStreamReadRetry: a held stream woken by the watcher whose read
// of its log then fails (the store throttles, a network blip) reads again
// by itself, backing off, and delivers the event within seconds, not at
// its next own check (idleCheck, 10 minutes): both eras.
func TestHeldStreamReadRetry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "retry.db")
	st, err := sqlitestore.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ing, err := sqlitestore.New(path, nil) // the ingest's own store
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ing.Close() })
	flaky := &failingReads{Store: st, failed: map[string]bool{}}
	url := heldServer(t, flaky, 15*time.Minute)
	topic := fmt.Sprintf("retry%d", time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	streams, wait := heldclients.Open(ctx, t.Errorf, heldclients.OpenOptions{URLs: []string{url}, URI: ingest.EventURI(topic), N: 2,
		Era2025: func(i int) bool { return i == 0 }, Concurrent: 2})
	defer func() { cancel(); wait() }()
	if err := heldclients.WaitOpen(streams, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // both idle, registered with the watcher

	flaky.set(true)
	publish(t, ing, topic, topic+"-1", 1)
	// The watcher wakes both streams; their reads fail.
	for start := time.Now(); flaky.failedSessions() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the streams' reads failed for %d sessions within 10 s; want both woken", flaky.failedSessions())
		}
	}
	time.Sleep(300 * time.Millisecond) // a retry or two fail as well
	flaky.set(false)
	cleared := time.Now()
	const within = 15 * time.Second // a few doublings of the backoff from 100 ms, far short of idleCheck
	for _, s := range streams {
		for s.Record().Updated < 1 && time.Since(cleared) < within {
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i, s := range streams {
		if r := s.Record(); r.Updated != 1 {
			t.Errorf("stream %d (%s) got %d resources/updated within %v of the store recovering; want 1", i, era(i, 1), r.Updated, within)
		} else {
			t.Logf("stream %d (%s): delivered %v after the store recovered", i, era(i, 1), r.Last.Sub(cleared).Round(time.Millisecond))
		}
	}
}

package mcp_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/heldclients"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// failingProcessDelete is a store whose deletion of liveness records
// ("process-" ids) fails, as when the store is unreachable at the moment
// a process's last listen stream ends.
type failingProcessDelete struct {
	*sqlitestore.Store // with its session counting, which liveness needs
	failed             atomic.Int32
}

func (f *failingProcessDelete) DeleteSession(ctx context.Context, id string) error {
	if strings.HasPrefix(id, "process-") {
		f.failed.Add(1)
		return fmt.Errorf("injected: %w", notify.ErrUnavailable)
	}
	return f.Store.DeleteSession(ctx, id)
}

// TestListenAfterFailedLivenessDelete: when the deletion of a process's
// liveness record failed as its last listen stream ended, the record is
// still stored under the process's id; the process's next listen takes it
// as its own (not "exists": refused until it expired).
func TestListenAfterFailedLivenessDelete(t *testing.T) {
	st, err := sqlitestore.New(filepath.Join(t.TempDir(), "live.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	store := &failingProcessDelete{Store: st}
	url := heldServer(t, store, 15*time.Minute)
	uri := ingest.EventURI(fmt.Sprintf("live%d", time.Now().UnixNano()))
	listen := func() {
		ctx, cancel := context.WithCancel(context.Background())
		streams, wait := heldclients.Open(ctx, t.Errorf, heldclients.OpenOptions{URLs: []string{url}, URI: uri, N: 1,
			Era2025: func(int) bool { return false }, Concurrent: 1})
		err := heldclients.WaitOpen(streams, 30*time.Second)
		cancel()
		wait()
		if err != nil {
			t.Fatal(err)
		}
	}
	listen()
	for start := time.Now(); store.failed.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the liveness record's deletion was not attempted after the last stream ended")
		}
	}
	listen() // acknowledged, with the record left behind
}

package mcp

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// TestWatcherReadsFullPagesAtOnce: a fan-out larger than one read of the
// change feed (notify.MaxChangesRead) is read page after page at once, not
// one page per PollInterval: the stream of the last session written, in
// the third page, is woken by the read that finds the first page, not two
// PollIntervals later.
func TestWatcherReadsFullPagesAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pages.db")
	st, err := sqlitestore.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other, err := sqlitestore.New(path, nil) // another process's writes
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()
	const poll = 8 * time.Second
	srv := NewServer(&Implementation{Name: "pages", Version: "1"}, st, &ServerOptions{PollInterval: poll})
	ids := make([]string, 2*notify.MaxChangesRead+100)
	now := time.Now()
	for i := range ids {
		ids[i] = fmt.Sprintf("pages-session-%05d-xxxxxxxx", i)
		if err := other.CreateSession(ctx, &notify.Session{ID: ids[i], ProtocolVersion: "2025-11-25", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	last := ids[len(ids)-1]
	sw := srv.watch(ctx, last, true) // held without StreamHold: the watcher reads every poll
	defer sw.stop()
	if sw.wake == nil {
		t.Fatal("no watcher")
	}
	registered := time.Now()
	for _, id := range ids {
		if _, _, err := other.Append(ctx, id, notify.SessionStream, [][]byte{[]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if time.Since(registered) > poll/2 {
		t.Fatalf("writing %d changes took %v: the watcher's first read may have split them", len(ids), time.Since(registered))
	}
	// The first read is one poll after registration; reading the three
	// pages one per poll would wake the stream two polls after that.
	limit := poll + poll*3/4
	select {
	case <-sw.wake:
		t.Logf("woken %v after registration (poll %v)", time.Since(registered).Round(time.Millisecond), poll)
	case <-time.After(limit - time.Since(registered)):
		t.Fatalf("the stream of the last of %d changed sessions was not woken within %v of registration; want the feed's pages read at once after the first read (%v)", len(ids), limit, poll)
	}
}

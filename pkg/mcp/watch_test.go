package mcp

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// TestWatcherReadsFullPagesAtOnce: a fan-out larger than one read of the
// change feed (notify.MaxChangesRead) is read page after page at once, not
// one page per PollInterval: the stream of the last session written, in
// the second page, is woken by the read that finds the first page, not a
// PollInterval later.
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
	const poll = 10 * time.Second
	srv := NewServer(&Implementation{Name: "pages", Version: "1"}, st, &ServerOptions{PollInterval: poll})
	ids := make([]string, notify.MaxChangesRead+100)
	now := time.Now()
	const uri = "events://pages"
	for i := range ids {
		ids[i] = fmt.Sprintf("pages-session-%05d-xxxxxxxx", i)
		if err := other.CreateSession(ctx, &notify.Session{ID: ids[i], ProtocolVersion: "2025-11-25", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := other.Subscribe(ctx, ids[i], uri); err != nil {
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
	for chunk := range slices.Chunk(ids, notify.MaxAppendEach) { // a fan-out, as the ingest writes it
		if _, err := other.AppendEach(ctx, chunk, uri, 1, func(*notify.Session, notify.Position) [][]byte {
			return [][]byte{[]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)}
		}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d changes written in %v", len(ids), time.Since(registered).Round(time.Millisecond))
	if time.Since(registered) > poll/2 {
		t.Fatalf("writing %d changes took %v: the watcher's first read may have split them", len(ids), time.Since(registered))
	}
	// The first read is one poll after registration; reading the two
	// pages one per poll would wake the stream a poll after that.
	limit := poll + poll*3/4
	select {
	case <-sw.wake:
		t.Logf("woken %v after registration (poll %v)", time.Since(registered).Round(time.Millisecond), poll)
	case <-time.After(limit - time.Since(registered)):
		t.Fatalf("the stream of the last of %d changed sessions was not woken within %v of registration; want the feed's pages read at once after the first read (%v)", len(ids), limit, poll)
	}
}

// overflowFeed is a store whose change feed reports an overflow once
// armed, as dynamostore does when more sessions changed than one read
// returns.
type overflowFeed struct {
	Store
	armed atomic.Bool
}

func (o *overflowFeed) Changes(ctx context.Context, cursor string) (notify.ChangeSet, string, error) {
	ch, next, err := o.Store.Changes(ctx, cursor)
	if err == nil && cursor != "" && o.armed.CompareAndSwap(true, false) {
		ch = notify.ChangeSet{Overflow: true}
	}
	return ch, next, err
}

// TestWatcherOverflowWakesAll: a feed read that reports an overflow
// wakes every stream the watcher serves (none of their sessions named).
func TestWatcherOverflowWakesAll(t *testing.T) {
	st, err := sqlitestore.New(filepath.Join(t.TempDir(), "overflow.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	feed := &overflowFeed{Store: st}
	srv := NewServer(&Implementation{Name: "overflow", Version: "1"}, feed, &ServerOptions{PollInterval: 20 * time.Millisecond})
	ctx := context.Background()
	var ws []*streamWatch
	for i := range 3 {
		sw := srv.watch(ctx, fmt.Sprintf("overflow-%d", i), true)
		defer sw.stop()
		ws = append(ws, sw)
	}
	time.Sleep(100 * time.Millisecond) // a few quiet reads: nobody woken
	for i, sw := range ws {
		select {
		case <-sw.wake:
			t.Fatalf("stream %d woken with nothing in the feed", i)
		default:
		}
	}
	feed.armed.Store(true)
	for i, sw := range ws {
		select {
		case <-sw.wake:
		case <-time.After(10 * time.Second):
			t.Fatalf("stream %d not woken by a feed read that overflowed", i)
		}
	}
}

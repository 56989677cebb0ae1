package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// TestGetStreamHold: a resumed GET stream with nothing to send ends at
// once with retry: (an idle client's reconnection), while one that
// delivers stays open StreamHold for what follows.
func TestGetStreamHold(t *testing.T) {
	c := newCluster(t, 2)
	sid := initialize(t, c.urls[0], "2025-11-25")
	store, err := sqlitestore.New(c.dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	var cctx context.Context // of the last stream opened
	open := func(url, lastID string) (*http.Response, context.CancelFunc) {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, 3*time.Second) // well under the 5 s hold
		req, _ := http.NewRequestWithContext(cctx, "GET", url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, cancel
	}
	appendMsg := func(n int) string {
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "data": n}})
		if _, _, err := store.Append(ctx, sid, notify.SessionStream, [][]byte{msg}, nil); err != nil {
			t.Fatal(err)
		}
		return string(msg)
	}

	// A fresh stream: its priming event is the position to resume from.
	first, cancel := open(c.urls[0], "")
	evs := readEvents(t, first.Body, func(sseEvent) bool { return true })
	cancel()
	if len(evs) != 1 || evs[0].id == "" || evs[0].data != "" {
		t.Fatalf("fresh GET stream began with %+v; want a priming event", evs)
	}
	last := evs[0].id

	// Idle: the reconnection ends by itself, long before the hold.
	idle, cancel := open(c.urls[1], last)
	evs = readEvents(t, idle.Body, nil)
	held := errors.Is(cctx.Err(), context.DeadlineExceeded)
	cancel()
	if held {
		t.Fatal("an idle reconnection was held instead of ending at once")
	}
	for _, e := range evs {
		if e.data != "" || e.id == "" || e.id == last {
			t.Errorf("an idle reconnection sent %+v; want only priming events with new ids", evs)
		}
	}
	if len(evs) == 0 {
		t.Fatal("an idle reconnection sent nothing; want a priming event")
	}
	last = evs[len(evs)-1].id

	// Activity: the reconnection delivers, then stays open for more.
	m1 := appendMsg(1)
	active, cancel := open(c.urls[0], last)
	defer cancel()
	var m2 string
	var got []string
	readEvents(t, active.Body, func(e sseEvent) bool {
		if e.data == "" {
			return false
		}
		got = append(got, e.data)
		if len(got) == 1 {
			m2 = appendMsg(2) // after the stream delivered m1
		}
		return len(got) == 2
	})
	if want := []string{m1, m2}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("a reconnection that delivers got %q; want %q on the same stream (it must hold after delivering)", got, want)
	}
}

package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// TestCancelAcrossProcesses: the tool runs on process 0, the cancellation
// reaches process 1; the tool's context is cancelled and the client gets
// no response for the cancelled request.
func TestCancelAcrossProcesses(t *testing.T) {
	c := newCluster(t, 2)
	sid := initialize(t, c.urls[0], "2025-11-25")
	start := time.Now()
	type result struct {
		status int
		ct     string
		body   string
	}
	done := make(chan result, 1)
	go func() {
		resp := post(t, c.urls[0], sid, `{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"block","arguments":{}}}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
	}()
	time.Sleep(300 * time.Millisecond) // the call is running
	r := post(t, c.urls[1], sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call-1","reason":"user"}}`)
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d", r.StatusCode)
	}
	select {
	case res := <-done:
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("the call ended after %v: it was not cancelled", elapsed)
		}
		if strings.Contains(res.body, `"call-1"`) || strings.Contains(res.body, "not cancelled") {
			t.Errorf("a cancelled request got a response: %d %s %q", res.status, res.ct, res.body)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the cancelled call did not end")
	}
}

// TestTakeoverDoesNotReplay: a new GET stream starts after what the
// stream it replaces delivered.
func TestTakeoverDoesNotReplay(t *testing.T) {
	c := newCluster(t, 2)
	sid := initialize(t, c.urls[0], "2025-11-25")
	store, err := sqlitestore.New(c.dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	for i := range 3 {
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "data": i}})
		if _, _, err := store.Append(ctx, sid, "g", [][]byte{msg}, nil); err != nil {
			t.Fatal(err)
		}
	}
	open := func(url string) (*http.Response, context.CancelFunc) {
		cctx, cancel := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(cctx, "GET", url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, cancel
	}
	first, cancel1 := open(c.urls[0])
	defer cancel1()
	got := 0
	readEvents(t, first.Body, func(e sseEvent) bool {
		if e.data != "" {
			got++
		}
		return got == 3
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := store.GetSession(ctx, sid)
		if err == nil && s.Delivered >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery not recorded: %+v %v", s, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	second, cancel2 := open(c.urls[1])
	defer cancel2()
	evs := make(chan []sseEvent, 1)
	go func() { evs <- readEvents(t, second.Body, nil) }()
	time.Sleep(500 * time.Millisecond) // several polls
	cancel2()
	for _, e := range <-evs {
		if e.data != "" {
			t.Errorf("the new stream replayed %s %s", e.id, e.data)
		}
	}
}

// TestUnknownResponseStoresNothing: a response to an id the server never
// used is accepted and dropped.
func TestUnknownResponseStoresNothing(t *testing.T) {
	c := newCluster(t, 1)
	sid := initialize(t, c.urls[0], "2025-11-25")
	before := c.rowCount(t)
	r := post(t, c.urls[0], sid, `{"jsonrpc":"2.0","id":"not-ours","result":{}}`)
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		t.Errorf("status %d, want 202", r.StatusCode)
	}
	if after := c.rowCount(t); after != before {
		t.Errorf("a stray response changed stored state: %d rows, then %d", before, after)
	}
}

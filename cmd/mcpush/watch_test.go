package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/eventserver"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// TestWatchSessionLost: when the server forgets the watch's session (here
// a DELETE; in production an expiry), watch starts a new session,
// re-subscribes, and prints the events the lost session missed, from
// events_recent, then the new ones: each once, in order.
func TestWatchSessionLost(t *testing.T) {
	es := eventserver.Start(t, &mcp.StreamableOptions{RetryInterval: 50 * time.Millisecond})
	publish := func(n int) { es.Publish("lost", n) }

	e, out, errb := testEnv(es.URL)
	var mu sync.Mutex
	var sid string
	e.httpTransport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && resp.Header.Get("Mcp-Session-Id") != "" {
			mu.Lock()
			sid = resp.Header.Get("Mcp-Session-Id")
			mu.Unlock()
		}
		return resp, err
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"watch", "--json", "--topic", "lost"}, e) }()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("watch exited %d: %s", code, errb)
		}
	}()
	lines := func() []string {
		s := strings.TrimSpace(out.String())
		if s == "" {
			return nil
		}
		return strings.Split(s, "\n")
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; stdout %q, stderr %q", what, out.String(), errb.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("watching", func() bool { return strings.Contains(errb.String(), "watching") })
	publish(1)
	wait("event 1", func() bool { return len(lines()) == 1 })

	mu.Lock()
	old := sid
	mu.Unlock()
	req, _ := http.NewRequest(http.MethodDelete, es.URL, nil)
	req.Header.Set("Mcp-Session-Id", old)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	publish(2) // the session is gone: it gets neither event
	publish(3)
	wait("a new session", func() bool { mu.Lock(); defer mu.Unlock(); return sid != old })
	wait("events 2 and 3", func() bool { return len(lines()) == 3 })
	publish(4)
	wait("event 4", func() bool { return len(lines()) >= 4 })
	time.Sleep(200 * time.Millisecond)

	var got []string
	for _, l := range lines() {
		var ev watchEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, fmt.Sprintf("%s#%d %s", ev.Topic, ev.Sequence, ev.Data))
	}
	want := []string{`lost#1 {"n":1}`, `lost#2 {"n":2}`, `lost#3 {"n":3}`, `lost#4 {"n":4}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("watch output (-want +got):\n%s", diff)
	}
}

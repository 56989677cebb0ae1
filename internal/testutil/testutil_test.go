package testutil

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLockedBuffer(t *testing.T) {
	var b LockedBuffer
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() { defer wg.Done(); fmt.Fprintf(&b, "%d", i%2) }()
	}
	wg.Wait()
	if got := len(b.String()); got != 10 {
		t.Errorf("%d bytes written, want 10", got)
	}
}

func TestClock(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	c := NewClock(t0)
	c.Advance(time.Minute)
	if got := c.Now(); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("Now = %v", got)
	}
	c.Set(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Errorf("after Set: %v", got)
	}
}

func TestPost(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"%s %s %s\"}\n\nretry: 5\n\n",
			r.Header.Get("Accept"), r.Header.Get("Mcp-Session-Id"), r.Header.Get("X-Extra"))
	}))
	defer ts.Close()
	resp, body := PostRead(t, nil, ts.URL, "s1", RPC(1, "ping", nil), "X-Extra", "e")
	got := Messages(t, resp.Header.Get("Content-Type"), body)
	if len(got) != 1 || got[0].Method != "application/json, text/event-stream s1 e" {
		t.Errorf("messages %+v", got)
	}
	want := []SSEEvent{{ID: "1", Data: `{"jsonrpc":"2.0","method":"application/json, text/event-stream s1 e"}`}, {Retry: "5"}}
	if diff := cmp.Diff(want, ParseSSE(body)); diff != "" {
		t.Errorf("ParseSSE (-want +got):\n%s", diff)
	}
}

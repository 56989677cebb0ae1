package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestNotifyQueue: functions run one at a time in push order, a panic is
// recovered and logged without stopping the queue, a barrier waits for
// everything before it, and close runs what is queued.
func TestNotifyQueue(t *testing.T) {
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), nil))
	cs := &ClientSession{c: &Client{log: log}}
	q := newNotifyQueue(log, 1000, 32<<20)
	var got []int
	running := 0
	const n = 1000
	for i := range n {
		q.push(func() {
			running++
			defer func() { running-- }()
			if running != 1 {
				t.Errorf("%d functions running at once", running)
			}
			got = append(got, i)
			if i%10 == 0 {
				cs.safely("test", "m", func() { panic("boom") })
			}
		})
	}
	if err := q.barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(got, want) {
		t.Errorf("ran %d functions, not in push order", len(got))
	}
	last := false
	q.push(func() { last = true })
	q.close()
	if !last {
		t.Error("close did not run what was queued")
	}
	if q.push(func() {}) {
		t.Error("push after close succeeded")
	}
	logMu.Lock()
	defer logMu.Unlock()
	if c := strings.Count(logs.String(), "handler panicked"); c != n/10 {
		t.Errorf("%d panics logged, want %d", c, n/10)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestUndeclaredNotification: a notification the server declared no
// capability for is handled anyway, and logged as a warning; a declared
// one is not.
func TestUndeclaredNotification(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	c := NewClient(&Implementation{Name: "t", Version: "1"}, &ClientOptions{Logger: log})
	var handled []string
	c.AddNotificationHandler("", func(ctx context.Context, cs *ClientSession, method string, params json.RawMessage) {
		handled = append(handled, method)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := &ClientSession{c: c, ctx: ctx, queue: newNotifyQueue(log, 1000, 32<<20), progress: map[string]ProgressFunc{},
		init: &InitializeResult{Capabilities: &ServerCapabilities{Logging: &struct{}{}}}}
	for _, m := range []string{"notifications/message", "notifications/resources/updated", "notifications/prompts/list_changed"} {
		cs.handleIncoming(&Message{JSONRPC: "2.0", Method: m, Params: json.RawMessage(`{"uri":"x://y","level":"info","data":1}`)})
	}
	cs.queue.close()
	if want := []string{"notifications/message", "notifications/resources/updated", "notifications/prompts/list_changed"}; !slices.Equal(handled, want) {
		t.Errorf("handled %q, want %q", handled, want)
	}
	mu.Lock()
	defer mu.Unlock()
	out := logs.String()
	for _, m := range []string{"notifications/resources/updated", "notifications/prompts/list_changed"} {
		if !strings.Contains(out, "did not declare the capability") || !strings.Contains(out, "method="+m) {
			t.Errorf("no warning for %s:\n%s", m, out)
		}
	}
	if strings.Contains(out, "method=notifications/message") {
		t.Errorf("a warning for the declared logging capability:\n%s", out)
	}
}

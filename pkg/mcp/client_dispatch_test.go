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
	"time"
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

// TestNotifyQueueBounds: while the handler is busy, every offer within the
// bounds is queued (a repeated level trigger too); past the message bound
// or the byte bound offers are dropped and counted, except a level
// trigger that finds its kind waiting, which coalesces with it (not
// counted); pushes of the client's own are never dropped, and the
// DroppedHandler runs once for a burst.
func TestNotifyQueueBounds(t *testing.T) {
	var dropRuns []int64
	c := &Client{log: slog.New(slog.DiscardHandler), handlers: map[string][]NotificationHandler{}}
	c.opts.MaxQueuedNotifications, c.opts.MaxQueuedBytes = 4, 10_000
	c.opts.DroppedHandler = func(ctx context.Context, cs *ClientSession, n int64) { dropRuns = append(dropRuns, n) }
	var got []string
	c.AddNotificationHandler("", func(ctx context.Context, cs *ClientSession, method string, params json.RawMessage) {
		got = append(got, method+string(params))
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := &ClientSession{c: c, ctx: ctx, queue: newNotifyQueue(c.log, 4, 10_000), progress: map[string]ProgressFunc{},
		init: &InitializeResult{Capabilities: &ServerCapabilities{Logging: &struct{}{}, Resources: &ResourcesCapability{Subscribe: true}}}}
	block, started := make(chan struct{}), make(chan struct{})
	cs.queue.push(func() { close(started); <-block })
	<-started
	n := func(method, params string) {
		cs.handleIncoming(&Message{JSONRPC: "2.0", Method: method, Params: json.RawMessage(params)})
	}
	n("notifications/message", `{"level":"info","data":1}`)
	n("notifications/resources/updated", `{"uri":"a://1"}`)
	n("notifications/resources/updated", `{"uri":"a://1"}`)                                 // within the bounds: queued
	n("notifications/message", `{"level":"info","data":"`+strings.Repeat("x", 10_000)+`"}`) // over the bytes
	n("notifications/message", `{"level":"info","data":2}`)
	n("notifications/message", `{"level":"info","data":3}`) // over the count
	n("notifications/resources/updated", `{"uri":"a://1"}`) // over the count, a://1 waits: coalesces
	n("notifications/resources/updated", `{"uri":"a://2"}`) // over the count
	if d, co := cs.queue.stats(); d != 3 || co != 1 {
		t.Errorf("dropped %d, coalesced %d; want 3, 1", d, co)
	}
	cs.queue.push(func() {}) // the client's own: never dropped
	close(block)
	if err := cs.queue.barrier(ctx); err != nil {
		t.Fatal(err)
	}
	n("notifications/resources/updated", `{"uri":"a://1"}`) // room again: queued
	cs.queue.close()
	want := []string{
		`notifications/message{"level":"info","data":1}`,
		`notifications/resources/updated{"uri":"a://1"}`,
		`notifications/resources/updated{"uri":"a://1"}`,
		`notifications/message{"level":"info","data":2}`,
		`notifications/resources/updated{"uri":"a://1"}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("handled\n%q\nwant\n%q", got, want)
	}
	if cs.Dropped() != 3 || !slices.Equal(dropRuns, []int64{3}) {
		t.Errorf("Dropped() = %d, DroppedHandler runs %v; want 3, [3]", cs.Dropped(), dropRuns)
	}
}

// TestClientBackoff: the server's retry is raised to MinRetryDelay and
// capped at 10 minutes, and doubles per failure up to MaxRetryDelay (or
// the server's retry when longer).
func TestClientBackoff(t *testing.T) {
	c := NewClient(&Implementation{Name: "t"}, nil)
	cs := &ClientSession{c: c}
	for _, tc := range []struct {
		retry    time.Duration
		failures int
		want     time.Duration
	}{
		{time.Millisecond, 0, 500 * time.Millisecond},
		{time.Millisecond, 1, time.Second},
		{time.Millisecond, 3, 4 * time.Second},
		{time.Millisecond, 10, 10 * time.Second},
		{0, 0, time.Second},
		{2 * time.Second, 0, 2 * time.Second},
		{time.Minute, 3, time.Minute},
		{100 * time.Hour, 0, 10 * time.Minute},
	} {
		if got := cs.backoff(tc.retry, tc.failures); got != tc.want {
			t.Errorf("backoff(%v, %d) = %v, want %v", tc.retry, tc.failures, got, tc.want)
		}
	}
}

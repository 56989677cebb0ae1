package mcp

import (
	"bytes"
	"context"
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
	q := newNotifyQueue(log)
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

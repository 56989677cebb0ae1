package testutil

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestQueue: Drain runs the waiting tasks in order and those they
// enqueue; held tasks wait apart; Take empties the queue.
func TestQueue(t *testing.T) {
	var q Queue[int]
	q.Enqueue(context.Background(), 1, 2)
	q.Hold(9)
	var ran []int
	q.Drain(t, func(n int) error {
		ran = append(ran, n)
		if n < 3 {
			q.Enqueue(context.Background(), n+2)
		}
		return nil
	})
	if diff := cmp.Diff([]int{1, 2, 3, 4}, ran); diff != "" {
		t.Errorf("Drain ran (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{9}, q.Held()); diff != "" {
		t.Errorf("Held (-want +got):\n%s", diff)
	}
	q.Enqueue(context.Background(), 5, 6)
	if n := q.Len(); n != 2 {
		t.Errorf("Len = %d, want 2", n)
	}
	if diff := cmp.Diff([]int{5, 6}, q.Take()); diff != "" {
		t.Errorf("Take (-want +got):\n%s", diff)
	}
	if n := q.Len(); n != 0 {
		t.Errorf("Len after Take = %d, want 0", n)
	}
}

// TestQueueDrainReports: a task that fails is reported and the drain
// goes on; tasks that make tasks without end fail the test.
func TestQueueDrainReports(t *testing.T) {
	var q Queue[int]
	q.Enqueue(context.Background(), 1, 2)
	rec := &recorder{TB: t}
	q.Drain(rec, func(n int) error {
		if n == 1 {
			return errors.New("boom")
		}
		return nil
	})
	if rec.errors != 1 || rec.fatal {
		t.Errorf("after one failing task: %d errors, fatal %v; want 1, false", rec.errors, rec.fatal)
	}

	rec = &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Enqueue(context.Background(), 0)
		q.Drain(rec, func(n int) error { return q.Enqueue(context.Background(), n+1) })
	}()
	<-done
	if !rec.fatal {
		t.Error("a drain without end did not fail the test")
	}
}

// recorder counts what Drain reports instead of failing the test.
type recorder struct {
	testing.TB
	errors int
	fatal  bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.errors++ }
func (r *recorder) Fatalf(string, ...any) { r.fatal = true; runtime.Goexit() }

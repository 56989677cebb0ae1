package testutil

import (
	"context"
	"sync"
	"testing"
)

// Queue is an in-memory task queue that a test works by hand, such as a
// delivery.Queue whose Enqueue it provides: tasks wait in order until
// Drain runs them or Take hands them out; a held task (Hold) waits apart,
// seen only by Held: a delayed task, which a test sweeps for instead of
// running. The zero value is an empty queue. Safe for concurrent use.
type Queue[T any] struct {
	mu    sync.Mutex
	tasks []T
	held  []T
}

// Enqueue adds tasks at the end of the queue; it never fails.
func (q *Queue[T]) Enqueue(_ context.Context, tasks ...T) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.tasks = append(q.tasks, tasks...)
	return nil
}

// Hold sets tasks apart: Held returns them, Drain and Take do not.
func (q *Queue[T]) Hold(tasks ...T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.held = append(q.held, tasks...)
}

// Held returns the tasks set apart by Hold, in order.
func (q *Queue[T]) Held() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]T(nil), q.held...)
}

// Len returns the number of tasks waiting, not counting the held ones.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.tasks)
}

// Take removes the waiting tasks and returns them, in order.
func (q *Queue[T]) Take() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	tasks := q.tasks
	q.tasks = nil
	return tasks
}

// maxDrain bounds the tasks one Drain runs: more is taken for tasks that
// make tasks without end.
const maxDrain = 10_000

// Drain runs the waiting tasks with run, one at a time in order, and the
// tasks they enqueue, until none is left. An error from run is reported
// with tb.Errorf; more than 10,000 tasks fail the test.
func (q *Queue[T]) Drain(tb testing.TB, run func(T) error) {
	tb.Helper()
	for range maxDrain {
		q.mu.Lock()
		if len(q.tasks) == 0 {
			q.mu.Unlock()
			return
		}
		task := q.tasks[0]
		q.tasks = q.tasks[1:]
		q.mu.Unlock()
		if err := run(task); err != nil {
			tb.Errorf("task %+v: %v", task, err)
		}
	}
	tb.Fatalf("tasks still enqueued after %d", maxDrain)
}

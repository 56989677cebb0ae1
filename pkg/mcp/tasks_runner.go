package mcp

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// The default TaskRunner: localRunner runs tasks in a bounded pool of
// goroutines of this process, and ShutdownTasks fails and stops them when
// the process shuts down. On Lambda, serve.SelfInvokeRunner (package
// serve) starts each task in an invocation of its own instead.

// workerShare is one principal's share of the default runner's workers.
type workerShare struct {
	slots chan struct{}
	users int // tasks of the principal waiting or running here
}

// shutdownFailure is the error of a task whose work ShutdownTasks ended.
func shutdownFailure() *Error {
	return Errorf(CodeInternalError, "internal error: the server running the task shut down before the task's work ended (it was running or waiting for a worker); call the tool again")
}

// localRunner runs tasks in this process, at most Workers at once and
// WorkersPerPrincipal of one principal.
type localRunner struct{ e *taskEngine }

// A task waiting for a worker keeps its lease (it is alive, only queued),
// and leaves the queue if it stops working meanwhile (cancelled), or the
// server shuts down (ShutdownTasks fails it).
func (r localRunner) StartTask(_ context.Context, principal, id string) error {
	e := r.e
	key := taskKey(principal, id)
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return errServerShutdown
	}
	e.local[key] = taskRef{principal: principal, id: id}
	share := e.shares[principal]
	if share == nil {
		share = &workerShare{slots: make(chan struct{}, e.opts.WorkersPerPrincipal)}
		e.shares[principal] = share
	}
	share.users++
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		defer func() {
			e.mu.Lock()
			delete(e.local, key)
			if share.users--; share.users == 0 {
				delete(e.shares, principal)
			}
			e.mu.Unlock()
		}()
		tick := time.NewTicker(e.opts.Lease / 3)
		defer tick.Stop()
		if !r.acquire(share.slots, principal, id, tick.C) {
			return
		}
		defer func() { <-share.slots }()
		if !r.acquire(e.workers, principal, id, tick.C) {
			return
		}
		defer func() { <-e.workers }()
		if e.stop.Err() != nil {
			return // ShutdownTasks fails it
		}
		if err := e.srv.RunTask(e.stop, principal, id); err != nil && e.stop.Err() == nil {
			e.srv.log.ErrorContext(e.stop, "running a task", "task", id, "err", err)
		}
	}()
	return nil
}

// acquire takes a slot of sem for a queued task, renewing its lease
// meanwhile; false when the task stopped working or the server shuts
// down first.
func (r localRunner) acquire(sem chan struct{}, principal, id string, tick <-chan time.Time) bool {
	e := r.e
	for {
		select {
		case sem <- struct{}{}:
			return true
		case <-e.stop.Done():
			return false
		case <-tick:
			t, err := e.modify(e.stop, principal, id, func(t *notify.Task) bool {
				if t.Status != notify.TaskWorking {
					return false
				}
				t.LeaseUntil = e.srv.opts.Now().Add(e.opts.Lease)
				return true
			})
			if err == nil && t.Status != notify.TaskWorking || errors.Is(err, notify.ErrNotFound) {
				return false
			}
		}
	}
}

// ShutdownTasks fails at once every task whose work runs or waits for a
// worker in this process's default runner ("the server running the task
// shut down"), rather than leave it working until its lease reports a
// crash, and stops that work; the default runner starts no work
// afterwards (such tasks fail at once too). It returns once the records
// say so and the work has returned, or when ctx ends (ctx.Err()). The
// local server calls it when it shuts down (SIGTERM, an interrupt).
// Calling it again does nothing more.
func (s *Server) ShutdownTasks(ctx context.Context) error {
	e := s.tasks
	e.mu.Lock()
	e.stopped = true
	tasks := make([]taskRef, 0, len(e.local))
	for _, t := range e.local {
		tasks = append(tasks, t)
	}
	e.mu.Unlock()
	e.stopAll(errServerShutdown)
	// The records first, a few at a time: the work may take a while to
	// notice its context.
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, t := range tasks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			e.finish(ctx, t.principal, t.id, nil, shutdownFailure())
		})
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

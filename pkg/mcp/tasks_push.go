package mcp

import (
	"context"
	"errors"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Push of task status (notifications/tasks): a subscriptions/listen whose
// filter names tasks in taskIds gets the full task, as tasks/get would
// return it, each time its status changes, from whichever process makes
// the change.

// MaxListenTaskIDs bounds the taskIds of one subscriptions/listen.
const MaxListenTaskIDs = 100

// checkListenTaskIDs checks a listen filter's taskIds.
func checkListenTaskIDs(ids []string) *Error {
	if len(ids) > MaxListenTaskIDs {
		return Errorf(CodeInvalidParams, "invalid params: at most %d taskIds", MaxListenTaskIDs)
	}
	for _, id := range ids {
		if id == "" || len(id) > 256 {
			return Errorf(CodeInvalidParams, "invalid params: a task id has 1 to 256 bytes")
		}
	}
	return nil
}

// publish sends notifications/tasks with the task as it is now to every
// listen stream that names it: called by the one writer of each status
// change, so each stream gets each change once. Best effort: a stream
// that misses one still finds the task with tasks/get.
func (e *taskEngine) publish(ctx context.Context, t *notify.Task) {
	ctx = context.WithoutCancel(ctx)
	ids, err := e.srv.store.Subscribers(ctx, taskURI(t.Principal, t.ID))
	if err != nil || len(ids) == 0 {
		if err != nil {
			e.srv.log.WarnContext(ctx, "notifying a task's listeners", "task", t.ID, "err", err)
		}
		return
	}
	msg, err := encodeNotification("notifications/tasks", e.wire(t))
	if err != nil {
		return
	}
	for _, id := range ids {
		if _, _, err := e.srv.store.Append(ctx, id, getStream, [][]byte{msg}, nil); err != nil && !errors.Is(err, notify.ErrNotFound) {
			e.srv.log.WarnContext(ctx, "notifying a task's listener", "task", t.ID, "stream", id, "err", err)
		}
	}
}

// listenTasks is what a listen stream knows of the tasks it names.
type listenTasks struct {
	checked time.Time       // the last checkTaskLeases
	over    map[string]bool // ended or gone: not read again
}

// checkTaskLeases looks, every half lease, at the tasks a listen stream
// names that may still be working (one read each): one whose lease
// expired (its process died) is marked failed, which notifies the
// stream. So a client that only listens learns of a dead task within
// about a lease and a half, as one that polls does.
func (l *listenStream) checkTaskLeases(ctx context.Context) {
	e := l.srv.tasks
	if len(l.filter.TaskIDs) == 0 {
		return
	}
	now := l.srv.opts.Now()
	if now.Sub(l.tasks.checked) < e.opts.Lease/2 {
		return
	}
	l.tasks.checked = now
	for _, id := range l.filter.TaskIDs {
		if l.tasks.over[id] {
			continue
		}
		t, err := e.store.GetTask(ctx, taskOwner(l.principal, id), id)
		if err == nil {
			t, err = e.expire(ctx, t)
		}
		switch {
		case errors.Is(err, notify.ErrNotFound) || err == nil && notify.TaskTerminal(t.Status):
			if l.tasks.over == nil {
				l.tasks.over = map[string]bool{}
			}
			l.tasks.over[id] = true
		case err != nil && ctx.Err() == nil:
			l.srv.log.WarnContext(ctx, "checking a listened task's lease", "task", id, "err", err)
		}
	}
}

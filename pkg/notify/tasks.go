package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// TaskStatus is the status of a task (the tasks extension of MCP
// 2026-07-28, SEP-2663), spelled as on the wire and in the store.
type TaskStatus string

// Task statuses.
const (
	TaskWorking       TaskStatus = "working"
	TaskInputRequired TaskStatus = "input_required"
	TaskCompleted     TaskStatus = "completed"
	TaskFailed        TaskStatus = "failed"
	TaskCancelled     TaskStatus = "cancelled"
)

// ParseTaskStatus parses a task status as the wire and the stores spell
// it; anything else is an error wrapping ErrInvalid that names it.
func ParseTaskStatus(s string) (TaskStatus, error) {
	switch st := TaskStatus(s); st {
	case TaskWorking, TaskInputRequired, TaskCompleted, TaskFailed, TaskCancelled:
		return st, nil
	}
	return "", fmt.Errorf("%w: task status %q: want %q, %q, %q, %q or %q", ErrInvalid, s,
		TaskWorking, TaskInputRequired, TaskCompleted, TaskFailed, TaskCancelled)
}

// TaskTerminal reports whether status is a terminal status (completed,
// failed, cancelled): a task in one never changes again.
func TaskTerminal(status TaskStatus) bool {
	return status == TaskCompleted || status == TaskFailed || status == TaskCancelled
}

// Task is the durable record of one MCP task: a tools/call that runs
// outside the request that started it, on any process. It is visible
// only under its principal: every TaskStore method takes the principal
// with the id, so one principal can neither read nor count another's.
type Task struct {
	Principal string // who created it; "" is the anonymous principal
	ID        string // at least 128 random bits, URL-safe

	Status        TaskStatus // TaskWorking, TaskInputRequired, or a terminal status
	StatusMessage string

	// Request is what the work needs to run (anywhere): the request that
	// created the task, as the server encodes it.
	Request json.RawMessage
	// InputRequests are the outstanding input requests (a JSON object by
	// key) while the status is TaskInputRequired; nil otherwise.
	InputRequests json.RawMessage
	// Input is what the work carries between rounds of input: the answers
	// so far, its state. Opaque to the store.
	Input json.RawMessage
	// Result is the result of a completed task, Error the JSON-RPC error
	// of a failed one.
	Result json.RawMessage
	Error  json.RawMessage

	CreatedAt time.Time
	UpdatedAt time.Time
	ExpiresAt time.Time // the task is not found from then on
	// LeaseUntil is when the work, while the status is TaskWorking, is
	// presumed dead unless the process running it renews the lease;
	// while the status is TaskInputRequired, when the task stops waiting
	// for input. Either way the task stops counting as live then
	// (LiveUntil).
	LeaseUntil time.Time

	// Version is the optimistic-concurrency token of UpdateTask; set by
	// the store.
	Version int64
}

// LiveUntil is until when t counts as live (TaskStore.CountTasks): never
// once its status is terminal; otherwise until LeaseUntil (ExpiresAt if
// it is zero), and never past ExpiresAt. So the task of a process that
// died stops counting against its principal's bound when its lease
// ends, whether or not anyone reads it.
func (t *Task) LiveUntil() time.Time {
	if TaskTerminal(t.Status) {
		return time.Time{}
	}
	if t.LeaseUntil.IsZero() || t.LeaseUntil.After(t.ExpiresAt) {
		return t.ExpiresAt
	}
	return t.LeaseUntil
}

// TaskStore keeps task records, shared by every process of a deployment.
// Both stores implement it; it is a capability beside Store that
// mcp.Store requires. Safe for concurrent use by many processes.
//
// The record of a task, encoded, is at most MaxItemBytes (ErrTooLarge);
// an empty principal is allowed, an empty id is ErrInvalid.
type TaskStore interface {
	// CreateTask stores a new task with Version 1. ErrExists if (principal,
	// id) is taken by a task that has not expired.
	CreateTask(ctx context.Context, t *Task) error
	// GetTask returns the task; ErrNotFound when there is none under
	// principal, or it expired.
	GetTask(ctx context.Context, principal, id string) (*Task, error)
	// UpdateTask writes t if the stored Version still equals t.Version,
	// and then increments t.Version. ErrConflict when it changed,
	// ErrNotFound when the task is gone.
	UpdateTask(ctx context.Context, t *Task) error
	// CountTasks counts the principal's live tasks (Task.LiveUntil after
	// now), no further than limit (a Live of limit means "limit or
	// more"), and the bytes of the records of all its tasks that have not
	// expired, ended ones included. A limit < 1 is ErrInvalid.
	CountTasks(ctx context.Context, principal string, limit int) (TaskCount, error)
}

// TaskCount is what a principal's tasks hold in a store (CountTasks).
type TaskCount struct {
	Live  int   // live tasks, at most the limit asked for
	Bytes int64 // the encoded records (CheckTask) of the unexpired tasks
}

// CheckTask validates a task record the same way for every store (an id,
// bounded sizes, a known status), and returns its encoding.
func CheckTask(t *Task) ([]byte, error) {
	switch {
	case t == nil || t.ID == "":
		return nil, fmt.Errorf("%w: task needs an id", ErrInvalid)
	case len(t.Principal) > MaxURIBytes:
		return nil, fmt.Errorf("%w: principal of %d bytes, limit %d", ErrTooLarge, len(t.Principal), MaxURIBytes)
	case len(t.ID) > MaxURIBytes:
		return nil, fmt.Errorf("%w: task id of %d bytes, limit %d", ErrTooLarge, len(t.ID), MaxURIBytes)
	}
	if _, err := ParseTaskStatus(string(t.Status)); err != nil {
		return nil, err
	}
	b, err := json.Marshal(taskBody{
		Status: t.Status, StatusMessage: t.StatusMessage, Request: t.Request,
		InputRequests: t.InputRequests, Input: t.Input, Result: t.Result, Error: t.Error,
		CreatedAt: UnixNanos(t.CreatedAt), UpdatedAt: UnixNanos(t.UpdatedAt),
		ExpiresAt: UnixNanos(t.ExpiresAt), LeaseUntil: UnixNanos(t.LeaseUntil),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: encoding task: %v", ErrInvalid, err)
	}
	if len(b) > MaxItemBytes {
		return nil, fmt.Errorf("%w: task record of %d bytes, limit %d", ErrTooLarge, len(b), MaxItemBytes)
	}
	return b, nil
}

// DecodeTask is the inverse of CheckTask, for stores.
func DecodeTask(principal, id string, version int64, b []byte) (*Task, error) {
	var body taskBody
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, fmt.Errorf("decoding task %q: %w", id, err)
	}
	if _, err := ParseTaskStatus(string(body.Status)); err != nil {
		return nil, fmt.Errorf("decoding task %q: %w", id, err)
	}
	return &Task{
		Principal: principal, ID: id, Version: version,
		Status: body.Status, StatusMessage: body.StatusMessage, Request: body.Request,
		InputRequests: body.InputRequests, Input: body.Input, Result: body.Result, Error: body.Error,
		CreatedAt: FromUnixNanos(body.CreatedAt), UpdatedAt: FromUnixNanos(body.UpdatedAt),
		ExpiresAt: FromUnixNanos(body.ExpiresAt), LeaseUntil: FromUnixNanos(body.LeaseUntil),
	}, nil
}

// CheckCountTasks validates the arguments of TaskStore.CountTasks.
func CheckCountTasks(principal string, limit int) error {
	return CheckCountSessions(principal, limit)
}

// taskBody is the stored encoding of a task's fields.
type taskBody struct {
	Status        TaskStatus      `json:"s"`
	StatusMessage string          `json:"m,omitempty"`
	Request       json.RawMessage `json:"q,omitempty"`
	InputRequests json.RawMessage `json:"ir,omitempty"`
	Input         json.RawMessage `json:"in,omitempty"`
	Result        json.RawMessage `json:"r,omitempty"`
	Error         json.RawMessage `json:"e,omitempty"`
	CreatedAt     int64           `json:"c"`
	UpdatedAt     int64           `json:"u"`
	ExpiresAt     int64           `json:"x"`
	LeaseUntil    int64           `json:"l,omitempty"`
}

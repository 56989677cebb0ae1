package mcp

import (
	"context"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Tasks (the io.modelcontextprotocol/tasks extension of 2026-07-28,
// SEP-2663). A tool declares task support (Tool.Execution); when a client
// that declares the extension in its request's _meta calls such a tool,
// the server answers at once with a CreateTaskResult and the tool runs
// outside the request: the client polls tasks/get, answers the task's
// input requests with tasks/update, and cancels it with tasks/cancel, on
// any process.
//
// The task record (notify.Task) lives in the store, under the principal
// that created it, so every process serves every task and no principal
// sees another's. The work runs where a TaskRunner starts it: by default
// a bounded pool of goroutines in the process that created the task (or
// that received its last input), and on Lambda an invocation of its own
// (package serve). While it runs it holds a lease on the record that it
// renews; a reader that finds the lease of a working task expired (its
// process died, its invocation timed out) marks the task failed. The
// running work reads its record every TaskOptions.CheckInterval: that is
// how a tasks/cancel received by any process reaches it.
//
// Input inside a task works like a multi round-trip request: the handler
// returns an *InputRequired (directly, or through Elicit, CreateMessage
// and ListRoots); the task becomes input_required with those requests;
// tasks/update answers them (a subset at a time if the client wants); when
// none is outstanding the handler runs again from the start, wherever the
// last answer arrived, with every answer so far in InputResponses.
//
// This file is the public API; the engine (a record from create to
// finish) is tasks_engine.go, the default runner and ShutdownTasks
// tasks_runner.go, the push of task status tasks_push.go.

// TasksExtension is the extension id of tasks.
const TasksExtension = "io.modelcontextprotocol/tasks"

// Task support of a tool (Tool.Execution.TaskSupport).
const (
	// TaskForbidden: the tool always runs in the request (the default).
	TaskForbidden = "forbidden"
	// TaskOptional: the tool runs as a task when the client declares the
	// extension, and in the request otherwise.
	TaskOptional = "optional"
	// TaskRequired: the tool runs only as a task; a client that does not
	// declare the extension gets -32021.
	TaskRequired = "required"
)

// ToolExecution describes how a tool runs.
type ToolExecution struct {
	// TaskSupport is TaskForbidden (or ""), TaskOptional or TaskRequired.
	TaskSupport string `json:"taskSupport,omitempty"`
}

// resultTask is the resultType of a CreateTaskResult.
const resultTask = "task"

// TaskOptions configure how a Server runs tasks. Zero fields mean the
// defaults. Bounds on what a client may make the server hold are in
// Limits (MaxTasksPerPrincipal, MaxTaskBytesPerPrincipal,
// MaxTaskResultBytes, MaxTaskInputRounds, TaskTTL).
type TaskOptions struct {
	// Runner starts the work of a task. Nil: a pool of Workers goroutines
	// in this process.
	Runner TaskRunner
	// Workers bounds the tasks the default runner runs at once in this
	// process; more wait for a worker, renewing their lease meanwhile.
	// Default: 32.
	Workers int
	// WorkersPerPrincipal bounds the workers one principal's tasks take
	// at once in this process (for anonymous clients: one address's), so
	// that one principal cannot keep every worker from the others; its
	// other tasks wait, renewing their lease. Default: half of Workers
	// (at least 1); at most Workers.
	WorkersPerPrincipal int
	// Lease is how long a working task is presumed alive without a sign
	// of life from the process running it; the process renews it well
	// before. A task whose process dies is reported failed within Lease
	// (plus the next tasks/get). Default: 30s.
	Lease time.Duration
	// CheckInterval is how often running work reads its record, to see a
	// cancellation and to renew its lease. Default: 1s.
	CheckInterval time.Duration
	// PollInterval is the pollIntervalMs a client is told. Default: 500ms.
	PollInterval time.Duration
	// Timeout bounds a task's work, counted from the task's creation
	// (input rounds included): work still running then is stopped and
	// the task fails, saying so, while its record is still readable.
	// Default: half of Limits.TaskTTL; at most nine tenths of it.
	Timeout time.Duration
}

// TaskRunner starts the work of a task, which Server.RunTask does; it
// returns once the work is started (or handed on), not when it is done.
// An error fails the task. Implementations must be safe for concurrent
// use.
type TaskRunner interface {
	StartTask(ctx context.Context, principal, id string) error
}

// TaskToolOptions configure a task tool (AddTaskTool).
type TaskToolOptions struct {
	// Support is TaskOptional (the default) or TaskRequired.
	Support string
	// Prepare, when set, runs in the tools/call request before a task is
	// created: it may ask the client for input with an *InputRequired
	// (a multi round-trip request, resolved before the task exists), and
	// returns nil to have the task created. The answers it got are the
	// task's first InputResponses. Any other error fails the request as
	// a tool handler's error would.
	Prepare func(ctx context.Context, req *CallToolRequest) error
}

// AddTaskTool registers a tool that runs as a task for clients that
// declare the tasks extension: h runs outside the request, in a task.
func (s *Server) AddTaskTool(t *Tool, h ToolHandler, opts *TaskToolOptions) {
	var o TaskToolOptions
	if opts != nil {
		o = *opts
	}
	if o.Support == "" {
		o.Support = TaskOptional
	}
	t.Execution = &ToolExecution{TaskSupport: o.Support}
	s.AddTool(t, h)
	s.mu.Lock()
	s.tools[t.Name].prepare = o.Prepare
	s.mu.Unlock()
}

// SetTaskStatus sets the statusMessage of the task that ctx runs in (a
// task tool's handler's ctx), for clients to show while it works. Outside
// a task it does nothing.
func SetTaskStatus(ctx context.Context, message string) error {
	c := callFrom(ctx)
	if c == nil || c.task == nil {
		return nil
	}
	e := c.sess.srv.tasks
	_, err := e.modify(ctx, c.task.principal, c.task.id, func(t *notify.Task) bool {
		if t.Status != notify.TaskWorking || t.StatusMessage == message {
			return false
		}
		t.StatusMessage = message
		return true
	})
	return err
}

// TaskID returns the id of the task that ctx runs in (a task tool's
// handler's ctx), or "" outside a task.
func TaskID(ctx context.Context) string {
	if c := callFrom(ctx); c != nil && c.task != nil {
		return c.task.id
	}
	return ""
}

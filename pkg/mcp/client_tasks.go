package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Tasks, client side (2026 era). A client in the 2026 era declares the
// tasks extension on every request; CallTool follows a task that the
// server answers with to its end (StartTool and AwaitTask separately),
// polling tasks/get at the task's pollIntervalMs, answering its input
// requests with the client's handlers (tasks/update), and cancelling it
// (tasks/cancel) when ctx ends first.

// Task is a task as the server reports it: a CreateTaskResult, a
// tasks/get result.
type Task struct {
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage,omitempty"`
	CreatedAt      string                     `json:"createdAt,omitempty"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt,omitempty"`
	TTLMs          *int64                     `json:"ttlMs,omitempty"`
	PollIntervalMs int64                      `json:"pollIntervalMs,omitempty"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests,omitempty"`
	Result         json.RawMessage            `json:"result,omitempty"`
	Error          *Error                     `json:"error,omitempty"`
}

// Terminal reports whether the task has ended (completed, failed,
// cancelled).
func (t *Task) Terminal() bool {
	return notify.TaskTerminal(notify.TaskStatus(t.Status))
}

// maxClientPoll bounds the interval between two tasks/get of AwaitTask,
// whatever the server suggests.
const maxClientPoll = 30 * time.Second

// StartTool calls the tool name with args and returns its result, or
// the task the server created for it (2026 era, when the server runs the
// tool as a task): exactly one of the two is non-nil. progress, if not
// nil, receives the progress of a call that runs in the request, as in
// CallTool.
func (cs *ClientSession) StartTool(ctx context.Context, name string, args any, progress ProgressFunc) (*CallToolResult, *Task, error) {
	p := &CallToolParams{Name: name}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, nil, fmt.Errorf("mcp: tools/call %s: arguments: %w", name, err)
		}
		p.Arguments = b
	}
	var raw json.RawMessage
	if err := cs.call(ctx, "tools/call", p, &raw, progress); err != nil {
		return nil, nil, err
	}
	return decodeCallResult(raw)
}

// decodeCallResult decodes a tools/call result: a CallToolResult or a
// CreateTaskResult.
func decodeCallResult(raw json.RawMessage) (*CallToolResult, *Task, error) {
	var kind struct {
		ResultType string `json:"resultType"`
	}
	_ = json.Unmarshal(raw, &kind)
	if kind.ResultType == resultTask {
		var t Task
		if err := json.Unmarshal(raw, &t); err != nil || t.TaskID == "" {
			return nil, nil, fmt.Errorf("mcp: tools/call: a task result without a taskId: %s", clipText(string(raw), 256))
		}
		return nil, &t, nil
	}
	var res CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, nil, fmt.Errorf("mcp: tools/call: decoding result: %w", err)
	}
	return &res, nil, nil
}

// GetTask returns the task id as the server reports it now (tasks/get).
func (cs *ClientSession) GetTask(ctx context.Context, id string) (*Task, error) {
	var t Task
	if err := cs.Call(ctx, "tasks/get", map[string]string{"taskId": id}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// CancelTask asks the server to cancel the task id (tasks/cancel); the
// task may still end otherwise if its work ended first.
func (cs *ClientSession) CancelTask(ctx context.Context, id string) error {
	return cs.Call(ctx, "tasks/cancel", map[string]string{"taskId": id}, nil)
}

// AwaitTask follows the task id of a tools/call to its end and returns
// the tool's result. It polls tasks/get at the task's pollIntervalMs,
// calls onStatus (if not nil) with the task whenever its status or
// status message changes, and answers input requests with the client's
// handlers (ClientOptions: elicitation, sampling, roots). A failed task
// is its *Error; a cancelled one ErrTaskCancelled. When ctx ends first it
// cancels the task, best effort, and returns ctx's error.
func (cs *ClientSession) AwaitTask(ctx context.Context, id string, onStatus func(*Task)) (*CallToolResult, error) {
	answered := map[string]bool{}
	var last string
	for {
		t, err := cs.GetTask(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				cs.cancelAbandoned(id)
			}
			return nil, err
		}
		if onStatus != nil && t.Status+"\x00"+t.StatusMessage != last {
			last = t.Status + "\x00" + t.StatusMessage
			onStatus(t)
		}
		switch notify.TaskStatus(t.Status) {
		case notify.TaskCompleted:
			var res CallToolResult
			if err := json.Unmarshal(t.Result, &res); err != nil {
				return nil, fmt.Errorf("mcp: task %s: decoding result: %w", id, err)
			}
			return &res, nil
		case notify.TaskFailed:
			if t.Error != nil {
				return nil, t.Error
			}
			return nil, fmt.Errorf("mcp: task %s failed: %s", id, t.StatusMessage)
		case notify.TaskCancelled:
			return nil, ErrTaskCancelled
		case notify.TaskInputRequired:
			responses := map[string]any{}
			for key, raw := range t.InputRequests {
				if answered[key] {
					continue // keys are never reused: answered already
				}
				var req struct {
					Method string          `json:"method"`
					Params json.RawMessage `json:"params"`
				}
				if err := json.Unmarshal(raw, &req); err != nil {
					return nil, fmt.Errorf("mcp: task %s: input request %q: %w", id, key, err)
				}
				res, err := cs.serveRequest(ctx, req.Method, req.Params)
				if err != nil {
					cs.cancelAbandoned(id)
					return nil, fmt.Errorf("mcp: task %s: answering input request %q (%s): %w", id, key, req.Method, err)
				}
				responses[key] = res
			}
			if len(responses) > 0 {
				if err := cs.Call(ctx, "tasks/update", map[string]any{"taskId": id, "inputResponses": responses}, nil); err != nil {
					return nil, err
				}
				for key := range responses {
					answered[key] = true
				}
				continue // look again at once
			}
		}
		wait := min(max(time.Duration(t.PollIntervalMs)*time.Millisecond, 50*time.Millisecond), maxClientPoll)
		select {
		case <-ctx.Done():
			cs.cancelAbandoned(id)
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// cancelAbandoned cancels a task its caller stopped waiting for, best
// effort, within a few seconds.
func (cs *ClientSession) cancelAbandoned(id string) {
	ctx, cancel := context.WithTimeout(cs.ctx, 5*time.Second)
	defer cancel()
	if err := cs.CancelTask(ctx, id); err != nil {
		cs.c.log.Warn("mcp client: cancelling an abandoned task", "task", id, "err", err)
	}
}

package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// The task engine: a task's record from creation to its end. maybeTask
// turns a tools/call of a task tool into a task (create); dispatchTasks
// serves tasks/get, tasks/update and tasks/cancel (lookup, expire,
// update); RunTask runs the work where a TaskRunner starts it (watch,
// run) up to its next status: input_required (askInput) or an end
// (finish). Every change to a record goes through modify. The default
// runner and ShutdownTasks are in tasks_runner.go, the public API in
// tasks.go.

// taskEngine is a Server's tasks.
type taskEngine struct {
	srv    *Server
	store  notify.TaskStore
	opts   TaskOptions
	limits Limits

	workers chan struct{}

	// stop ends the work of the default runner (ShutdownTasks).
	stop    context.Context
	stopAll context.CancelCauseFunc
	wg      sync.WaitGroup // the default runner's goroutines

	mu      sync.Mutex
	running map[string]context.CancelFunc // by taskKey: work running here
	local   map[string]taskRef            // by taskKey: the default runner's tasks, queued or running
	shares  map[string]*workerShare       // by principal: its share of the workers
	stopped bool
}

func newTaskEngine(s *Server) *taskEngine {
	ts := s.store
	o := s.opts.Tasks
	if o.Workers <= 0 {
		o.Workers = 32
	}
	if o.WorkersPerPrincipal <= 0 {
		o.WorkersPerPrincipal = max(o.Workers/2, 1)
	}
	o.WorkersPerPrincipal = min(o.WorkersPerPrincipal, o.Workers)
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 500 * time.Millisecond
	}
	if ttl := s.opts.Limits.TaskTTL; o.Timeout <= 0 || o.Timeout > ttl*9/10 {
		if o.Timeout <= 0 {
			o.Timeout = ttl / 2
		} else {
			o.Timeout = ttl * 9 / 10
		}
	}
	e := &taskEngine{srv: s, store: ts, opts: o, limits: s.opts.Limits, workers: make(chan struct{}, o.Workers),
		running: map[string]context.CancelFunc{}, local: map[string]taskRef{}, shares: map[string]*workerShare{}}
	e.stop, e.stopAll = context.WithCancelCause(context.Background())
	if e.opts.Runner == nil {
		e.opts.Runner = localRunner{e}
	}
	return e
}

func taskKey(principal, id string) string { return principal + "\x00" + id }

// anonTaskSep ends the random part of the id of a task that an anonymous
// client created; the tag of the client's address follows (addressTag).
// The task is stored and counted under "addr:" and the tag, so that each
// address gets the per-principal bounds (as sessions and listen streams
// do: quotaPrincipal), while the id alone finds it, from any address.
const anonTaskSep = "."

// addressTag is the tag of an anonymous client's quota principal in the
// ids of its tasks: 72 bits of its SHA-256 (no address in the id).
func addressTag(quota string) string {
	sum := sha256.Sum256([]byte(quota))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// taskOwner is the principal the task id of a request of principal is
// stored under: principal itself, or for an anonymous request the
// address tag's ("" for a task of before the tags).
func taskOwner(principal, id string) string {
	if principal != "" {
		return principal
	}
	if i := strings.LastIndex(id, anonTaskSep); i >= 0 {
		return addressPrefix + id[i+len(anonTaskSep):]
	}
	return ""
}

// requestPrincipal is the principal of the request that created the task
// stored under owner: "" for an anonymous client's.
func requestPrincipal(owner, id string) string {
	if strings.HasPrefix(owner, addressPrefix) && taskOwner("", id) == owner {
		return ""
	}
	return owner
}

// taskRequest is what a task's record keeps of the request that created
// it: everything needed to run the tool anywhere.
type taskRequest struct {
	Params             json.RawMessage `json:"params"`
	ProtocolVersion    string          `json:"protocolVersion"`
	ClientCapabilities json.RawMessage `json:"clientCapabilities,omitempty"`
	// Claims are the caller's claims that access rules read
	// (ruleClaims), for the work's own checks (a tool's rule, a topic's).
	Claims notify.Claims `json:"claims,omitempty"`
}

// taskInput is what a task carries between rounds of input.
type taskInput struct {
	Answers map[string]json.RawMessage `json:"answers,omitempty"`
	State   []byte                     `json:"state,omitempty"`
	Rounds  int                        `json:"rounds,omitempty"`
}

// taskWire is a Task on the wire: a CreateTaskResult (with resultType
// "task"), a tasks/get result and a notifications/tasks params.
type taskWire struct {
	ResultType     string            `json:"resultType,omitempty"`
	TaskID         string            `json:"taskId"`
	Status         notify.TaskStatus `json:"status"`
	StatusMessage  string            `json:"statusMessage,omitempty"`
	CreatedAt      string            `json:"createdAt"`
	LastUpdatedAt  string            `json:"lastUpdatedAt"`
	TTLMs          int64             `json:"ttlMs"`
	PollIntervalMs int64             `json:"pollIntervalMs,omitempty"`
	InputRequests  json.RawMessage   `json:"inputRequests,omitempty"`
	Result         json.RawMessage   `json:"result,omitempty"`
	Error          json.RawMessage   `json:"error,omitempty"`
}

// wire renders t as a DetailedTask.
func (e *taskEngine) wire(t *notify.Task) *taskWire {
	w := &taskWire{
		TaskID:         t.ID,
		Status:         t.Status,
		StatusMessage:  t.StatusMessage,
		CreatedAt:      t.CreatedAt.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt:  t.UpdatedAt.UTC().Format(time.RFC3339Nano),
		TTLMs:          t.ExpiresAt.Sub(t.CreatedAt).Milliseconds(),
		PollIntervalMs: max(e.opts.PollInterval.Milliseconds(), 1),
	}
	switch t.Status {
	case notify.TaskInputRequired:
		w.InputRequests = t.InputRequests
	case notify.TaskCompleted:
		w.Result = t.Result
	case notify.TaskFailed:
		w.Error = t.Error
	}
	return w
}

// clientDeclaresTasks reports whether the request declared the tasks
// extension in its client capabilities.
func clientDeclaresTasks(ss *ServerSession) bool {
	if !ss.era2026 {
		return false
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	_ = json.Unmarshal(ss.state.ClientCapabilities, &caps)
	_, ok := caps.Extensions[TasksExtension]
	return ok
}

// missingTasksCapability is the -32021 error of a request that needs the
// tasks extension.
func missingTasksCapability(why string) *Error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: struct{}{}}}})
	return &Error{Code: CodeMissingRequiredClientCapability, Message: "Missing required client capability: extensions." + TasksExtension + " (" + why + ")", Data: data}
}

// maybeTask handles a tools/call of a task tool: it returns handled ==
// false when the call runs in the request as usual.
func (s *Server) maybeTask(ctx context.Context, ss *ServerSession, m *Message) (result any, handled bool, err error) {
	p, err := decodeParams[*CallToolParams](m.Params)
	if err != nil || p == nil {
		return nil, false, nil // callTool reports it
	}
	s.mu.RLock()
	t := s.tools[p.Name]
	s.mu.RUnlock()
	if t == nil || t.tool.Execution == nil || !s.permitsTool(ctx, ActionToolsCall, p.Name, nil, t) {
		return nil, false, nil // callTool answers (a forbidden tool: as an unknown one)
	}
	support := t.tool.Execution.TaskSupport
	if support != TaskOptional && support != TaskRequired {
		return nil, false, nil
	}
	e := s.tasks
	if !clientDeclaresTasks(ss) {
		if support == TaskRequired {
			return nil, true, missingTasksCapability("tool " + p.Name + " runs only as a task")
		}
		return nil, false, nil
	}
	if effectiveTool(t.tool, s.toolOverlay(ctx)[p.Name]) == nil {
		return nil, true, Errorf(CodeInvalidParams, "tool %q is disabled", p.Name)
	}
	in := taskInput{}
	if c := callFrom(ctx); c != nil {
		if t.prepare != nil {
			req := &CallToolRequest{Session: ss, Params: p, InputResponses: c.inputResponses, State: c.state}
			if err := t.prepare(ctx, req); err != nil {
				var rpcErr *Error
				var ir *InputRequired
				if errors.As(err, &rpcErr) || errors.As(err, &ir) || ctx.Err() != nil || isInternal(err) {
					return nil, true, err
				}
				return errorResult(err.Error()), true, nil
			}
		}
		// The answers of the multi round-trip phase are the task's first.
		if len(c.answers)+len(c.inputResponses) > 0 {
			in.Answers = map[string]json.RawMessage{}
			for k, v := range c.answers {
				in.Answers[k] = v
			}
			for k, v := range c.inputResponses {
				in.Answers[k] = v
			}
		}
	}
	w, err := e.create(ctx, ss, m.Params, in)
	return w, true, err
}

// create stores a new working task and starts its work.
func (e *taskEngine) create(ctx context.Context, ss *ServerSession, params json.RawMessage, in taskInput) (*taskWire, error) {
	principal, tag := ss.Principal(), ""
	if principal == "" && strings.HasPrefix(ss.quota, addressPrefix) {
		tag = addressTag(ss.quota)
		principal = addressPrefix + tag
	}
	c, err := e.store.CountTasks(ctx, principal, e.limits.MaxTasksPerPrincipal)
	if err != nil {
		return nil, fmt.Errorf("counting tasks: %w", err)
	}
	who := "principal"
	if tag != "" {
		who = "client address (without authentication)"
	}
	if c.Live >= e.limits.MaxTasksPerPrincipal {
		return nil, Errorf(CodeInvalidRequest, "too many tasks: %d are working or waiting for input, limit %d per %s; wait for one to end or cancel one (tasks/cancel)", c.Live, e.limits.MaxTasksPerPrincipal, who)
	}
	if c.Bytes >= int64(e.limits.MaxTaskBytesPerPrincipal) {
		return nil, Errorf(CodeInvalidRequest, "too many task bytes stored: this %s's tasks, ended ones included, hold %d bytes in the store, limit %d; ended tasks are kept for their ttlMs (%v) after their creation", who, c.Bytes, e.limits.MaxTaskBytesPerPrincipal, e.limits.TaskTTL)
	}
	req, _ := json.Marshal(taskRequest{Params: params, ProtocolVersion: ss.ProtocolVersion(), ClientCapabilities: ss.state.ClientCapabilities, Claims: e.srv.ruleClaims(ctx)})
	input, _ := json.Marshal(in)
	now := e.srv.opts.Now()
	t := &notify.Task{
		Principal: principal, Status: notify.TaskWorking,
		Request: req, Input: input,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(e.limits.TaskTTL), LeaseUntil: now.Add(e.opts.Lease),
	}
	for attempt := 0; ; attempt++ {
		t.ID = e.srv.opts.NewSessionID()
		if tag != "" {
			t.ID += anonTaskSep + tag
		}
		err = e.store.CreateTask(ctx, t)
		if err == nil {
			break
		}
		if errors.Is(err, notify.ErrTooLarge) {
			return nil, Errorf(CodeInvalidParams, "invalid params: the tools/call is too large to keep as a task (%v)", err)
		}
		if !errors.Is(err, notify.ErrExists) || attempt == 3 {
			return nil, fmt.Errorf("creating a task: %w", err)
		}
	}
	e.start(ctx, t)
	w := e.wire(t)
	w.ResultType = resultTask
	return w, nil
}

// start hands a working task to the runner; a runner that cannot start it
// fails it.
func (e *taskEngine) start(ctx context.Context, t *notify.Task) {
	if err := e.opts.Runner.StartTask(context.WithoutCancel(ctx), t.Principal, t.ID); err != nil {
		e.srv.log.ErrorContext(ctx, "starting a task", "task", t.ID, "err", err)
		e.finish(ctx, t.Principal, t.ID, nil, Errorf(CodeInternalError, "internal error: the task could not be started: %v", err))
	}
}

// modify applies f to the stored task until the write succeeds (f
// returning false writes nothing) and returns the task as stored.
func (e *taskEngine) modify(ctx context.Context, principal, id string, f func(t *notify.Task) bool) (*notify.Task, error) {
	for attempt := 0; ; attempt++ {
		t, err := e.store.GetTask(ctx, principal, id)
		if err != nil {
			return nil, err
		}
		before := t.Status
		if !f(t) {
			return t, nil
		}
		t.UpdatedAt = e.srv.opts.Now()
		err = e.store.UpdateTask(ctx, t)
		if err == nil {
			if t.Status != before {
				e.publish(ctx, t)
			}
			return t, nil
		}
		if !errors.Is(err, notify.ErrConflict) || attempt == 20 {
			return nil, err
		}
	}
}

// lookup reads a task for a tasks/* request: unknown and expired tasks
// are invalid params; a working task whose lease expired is marked failed
// first.
func (e *taskEngine) lookup(ctx context.Context, ss *ServerSession, raw json.RawMessage) (*notify.Task, json.RawMessage, error) {
	var p struct {
		TaskID         string          `json:"taskId"`
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, nil, Errorf(CodeInvalidParams, "invalid params: %v", err)
		}
	}
	if p.TaskID == "" {
		return nil, nil, Errorf(CodeInvalidParams, "invalid params: taskId is required")
	}
	if len(p.TaskID) > 256 {
		return nil, nil, Errorf(CodeInvalidParams, "Failed to retrieve task: Task not found")
	}
	t, err := e.store.GetTask(ctx, taskOwner(ss.Principal(), p.TaskID), p.TaskID)
	if errors.Is(err, notify.ErrNotFound) {
		return nil, nil, Errorf(CodeInvalidParams, "Failed to retrieve task: Task not found (unknown, expired after its ttlMs, or not yours)")
	}
	if err != nil {
		return nil, nil, err
	}
	if t, err = e.expire(ctx, t); err != nil {
		return nil, nil, err
	}
	return t, p.InputResponses, nil
}

// expire marks failed a working task whose lease expired, and one that
// waits for input past its execution timeout, and returns
// the task as it is then. (Neither counted against the quota since:
// notify.Task.LiveUntil.)
func (e *taskEngine) expire(ctx context.Context, t *notify.Task) (*notify.Task, error) {
	over := func(t *notify.Task) bool {
		switch t.Status {
		case notify.TaskWorking:
			return !t.LeaseUntil.IsZero() && e.srv.opts.Now().After(t.LeaseUntil)
		case notify.TaskInputRequired:
			return e.srv.opts.Now().After(t.CreatedAt.Add(e.opts.Timeout))
		}
		return false
	}
	if !over(t) {
		return t, nil
	}
	return e.modify(ctx, t.Principal, t.ID, func(t *notify.Task) bool {
		if !over(t) {
			return false
		}
		if t.Status == notify.TaskWorking {
			t.StatusMessage = "the task's work stopped: the process or invocation running it ended (lease expired at " + t.LeaseUntil.UTC().Format(time.RFC3339) + ")"
		} else {
			t.StatusMessage = "the task waited for input longer than " + e.opts.Timeout.String() + " after its creation, the tasks' execution timeout (MCPUSH_TASK_TIMEOUT)"
		}
		t.Status, t.InputRequests, t.Input = notify.TaskFailed, nil, nil
		t.Error, _ = json.Marshal(Errorf(CodeInternalError, "internal error: %s", t.StatusMessage))
		return true
	})
}

// dispatchTasks serves tasks/get, tasks/update and tasks/cancel.
func (s *Server) dispatchTasks(ctx context.Context, ss *ServerSession, m *Message) (any, error) {
	e := s.tasks
	if !ss.era2026 {
		return nil, Errorf(CodeMethodNotFound, "method not found: %s", m.Method)
	}
	if !clientDeclaresTasks(ss) {
		return nil, missingTasksCapability(m.Method + " needs it")
	}
	t, responses, err := e.lookup(ctx, ss, m.Params)
	if err != nil {
		return nil, err
	}
	switch m.Method {
	case "tasks/get":
		return e.wire(t), nil
	case "tasks/cancel":
		if notify.TaskTerminal(t.Status) {
			return struct{}{}, nil // terminal states stick; cancelling again is fine
		}
		_, err := e.modify(ctx, t.Principal, t.ID, func(t *notify.Task) bool {
			if notify.TaskTerminal(t.Status) {
				return false
			}
			t.Status, t.StatusMessage = notify.TaskCancelled, "cancelled by the client"
			t.InputRequests = nil
			return true
		})
		if err != nil {
			return nil, err
		}
		e.cancelLocal(t.Principal, t.ID)
		return struct{}{}, nil
	default: // tasks/update
		return e.update(ctx, t, responses)
	}
}

// update records a tasks/update's answers: those to outstanding input
// requests are kept, others ignored; when none is outstanding any more
// the work runs again.
func (e *taskEngine) update(ctx context.Context, t *notify.Task, raw json.RawMessage) (any, error) {
	var responses map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &responses) != nil || responses == nil {
		return nil, Errorf(CodeInvalidParams, "invalid params: tasks/update needs inputResponses, an object mapping input request keys to responses")
	}
	for k, v := range responses {
		if len(v) == 0 || v[0] != '{' {
			return nil, Errorf(CodeInvalidParams, "invalid params: inputResponses[%q] must be an object (the result of the input request)", k)
		}
	}
	resumed := false
	stored, err := e.modify(ctx, t.Principal, t.ID, func(t *notify.Task) bool {
		resumed = false
		if t.Status != notify.TaskInputRequired {
			return false
		}
		var pending map[string]json.RawMessage
		_ = json.Unmarshal(t.InputRequests, &pending)
		var in taskInput
		_ = json.Unmarshal(t.Input, &in)
		changed := false
		for k, v := range responses {
			if _, ok := pending[k]; !ok {
				continue // not outstanding: ignored
			}
			if in.Answers == nil {
				in.Answers = map[string]json.RawMessage{}
			}
			in.Answers[k] = v
			delete(pending, k)
			changed = true
		}
		if !changed {
			return false
		}
		t.Input, _ = json.Marshal(in)
		if len(pending) == 0 {
			t.Status, t.InputRequests, t.StatusMessage = notify.TaskWorking, nil, ""
			t.LeaseUntil = e.srv.opts.Now().Add(e.opts.Lease)
			resumed = true
		} else {
			t.InputRequests, _ = json.Marshal(pending)
		}
		return true
	})
	if errors.Is(err, notify.ErrTooLarge) {
		return nil, Errorf(CodeInvalidParams, "invalid params: these inputResponses would make the task's stored record larger than %d bytes (the request and every answer so far)", notify.MaxItemBytes)
	}
	if err != nil {
		return nil, err
	}
	if resumed {
		e.start(ctx, stored)
	}
	return struct{}{}, nil
}

// cancelLocal stops the task's work if it runs in this process.
func (e *taskEngine) cancelLocal(principal, id string) {
	e.mu.Lock()
	cancel := e.running[taskKey(principal, id)]
	e.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// RunTask runs the work of a working task to its next status, in the
// calling goroutine: what a TaskRunner starts, on whatever process or
// invocation it chooses. While it runs it renews the task's lease and
// stops when the task is cancelled. When ctx ends first (the process
// stops, a Lambda invocation nears its deadline) the task fails, saying
// so. A task that is not working (waiting for input, ended, expired) is
// left alone. It returns an error only when the store fails.
func (s *Server) RunTask(ctx context.Context, principal, id string) error {
	e := s.tasks
	claimed, err := e.modify(ctx, principal, id, func(t *notify.Task) bool {
		if t.Status != notify.TaskWorking {
			return false
		}
		t.LeaseUntil = s.opts.Now().Add(e.opts.Lease)
		return true
	})
	if errors.Is(err, notify.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if claimed.Status != notify.TaskWorking {
		return nil
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := claimed.CreatedAt.Add(e.opts.Timeout)
	ctx, stop := context.WithDeadlineCause(ctx, deadline, errTaskTimeout)
	defer stop()
	key := taskKey(principal, id)
	e.mu.Lock()
	e.running[key] = cancel
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.running, key)
		e.mu.Unlock()
	}()
	done := make(chan struct{})
	defer close(done)
	go e.watch(ctx, principal, id, cancel, done)

	result, rpcErr := e.run(ctx, claimed)
	if context.Cause(parent) == errServerShutdown {
		e.finish(ctx, principal, id, nil, shutdownFailure())
		return nil
	}
	if parent.Err() != nil {
		// The process or invocation ends before the work did (on
		// Lambda: the function timeout is near).
		e.finish(ctx, principal, id, nil, Errorf(CodeInternalError, "internal error: the task's work did not finish before the process running it had to stop (%v); on Lambda, work must end within the function timeout", context.Cause(parent)))
		return nil
	}
	if context.Cause(ctx) == errTaskTimeout {
		e.finish(context.WithoutCancel(ctx), principal, id, nil, Errorf(CodeInternalError,
			"internal error: the task's work ran longer than %v, the tasks' execution timeout (MCPUSH_TASK_TIMEOUT)", e.opts.Timeout))
		return nil
	}
	if ctx.Err() != nil {
		return nil // cancelled: the record says so already
	}
	var ir *InputRequired
	if errors.As(rpcErr, &ir) {
		return e.askInput(ctx, claimed, ir)
	}
	var failure *Error
	if rpcErr != nil && !errors.As(rpcErr, &failure) {
		failure = s.internalError(ctx, "task failed", rpcErr, "task", id)
	}
	e.finish(ctx, principal, id, result, failure)
	return nil
}

// watch renews the lease of running work and cancels it when the task
// is cancelled, expires, or leaves the working status.
func (e *taskEngine) watch(ctx context.Context, principal, id string, cancel context.CancelFunc, done <-chan struct{}) {
	tick := time.NewTicker(e.opts.CheckInterval)
	defer tick.Stop()
	renewed := e.srv.opts.Now()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t, err := e.modify(ctx, principal, id, func(t *notify.Task) bool {
			if t.Status != notify.TaskWorking || t.LeaseUntil.Sub(e.srv.opts.Now()) > e.opts.Lease*2/3 {
				return false
			}
			t.LeaseUntil = e.srv.opts.Now().Add(e.opts.Lease)
			return true
		})
		switch {
		case errors.Is(err, notify.ErrNotFound):
			cancel()
			return
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			e.srv.log.WarnContext(ctx, "renewing a task's lease", "task", id, "err", err)
			if e.srv.opts.Now().Sub(renewed) > e.opts.Lease {
				// The lease is gone: another process may report the
				// task failed at any moment, so the work stops.
				cancel()
				return
			}
		case t.Status != notify.TaskWorking:
			cancel()
			return
		default:
			renewed = e.srv.opts.Now()
		}
	}
}

// run runs the tool of a task once.
func (e *taskEngine) run(ctx context.Context, t *notify.Task) (result any, err error) {
	var req taskRequest
	var in taskInput
	if err := json.Unmarshal(t.Request, &req); err != nil {
		return nil, fmt.Errorf("decoding the task's request: %w", err)
	}
	_ = json.Unmarshal(t.Input, &in)
	ss := &ServerSession{srv: e.srv, era2026: true, state: &notify.Session{
		Principal: requestPrincipal(t.Principal, t.ID), ProtocolVersion: req.ProtocolVersion, ClientCapabilities: req.ClientCapabilities,
	}}
	c := &call{sess: ss, out: discardSink{}, method: "tools/call", task: &taskRef{principal: t.Principal, id: t.ID},
		inputResponses: in.Answers, answers: in.Answers, state: in.State}
	ctx = withIdentity(context.WithValue(ctx, callKey{}, c), t.Principal, req.Claims)
	defer func() {
		if v := recover(); v != nil {
			e.srv.log.ErrorContext(ctx, "task handler panicked", "task", t.ID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			result, err = nil, Errorf(CodeInternalError, "internal error: the tool's handler panicked")
		}
	}()
	return e.srv.callTool(ctx, ss, req.Params)
}

// askInput parks a task as input_required with the handler's requests.
func (e *taskEngine) askInput(ctx context.Context, t *notify.Task, ir *InputRequired) error {
	var caps map[string]json.RawMessage
	var req taskRequest
	_ = json.Unmarshal(t.Request, &req)
	_ = json.Unmarshal(req.ClientCapabilities, &caps)
	var failure *Error
	var missing []string
	for key, r := range ir.Requests {
		capName, ok := inputMethods[r.Method]
		if !ok {
			failure = e.srv.internalError(ctx, "task handler asked for input with an unknown method", fmt.Errorf("input request %q: method %q", key, r.Method), "task", t.ID)
			break
		}
		if _, ok := caps[capName]; !ok {
			missing = append(missing, capName)
		}
	}
	if len(ir.Requests) == 0 {
		failure = e.srv.internalError(ctx, "task handler asked for no input", errors.New("input_required without requests"), "task", t.ID)
	}
	if failure == nil && len(missing) > 0 {
		sort.Strings(missing)
		failure = MissingClientCapability(missing...)
	}
	var in taskInput
	_ = json.Unmarshal(t.Input, &in)
	if failure == nil && in.Rounds >= e.limits.MaxTaskInputRounds {
		failure = Errorf(CodeInternalError, "internal error: the task asked for input %d times, limit %d", in.Rounds+1, e.limits.MaxTaskInputRounds)
	}
	if failure != nil {
		e.finish(ctx, t.Principal, t.ID, nil, failure)
		return nil
	}
	requests, err := json.Marshal(ir.Requests)
	if err != nil {
		e.finish(ctx, t.Principal, t.ID, nil, e.srv.internalError(ctx, "encoding a task's input requests", err, "task", t.ID))
		return nil
	}
	_, err = e.modify(ctx, t.Principal, t.ID, func(t *notify.Task) bool {
		if t.Status != notify.TaskWorking {
			return false
		}
		var in taskInput
		_ = json.Unmarshal(t.Input, &in)
		for k, v := range ir.answers {
			if in.Answers == nil {
				in.Answers = map[string]json.RawMessage{}
			}
			in.Answers[k] = v
		}
		in.State = ir.State
		in.Rounds++
		t.Input, _ = json.Marshal(in)
		t.Status, t.InputRequests = notify.TaskInputRequired, requests
		// It waits for its input until its execution timeout: then it
		// fails (expire) and stops counting against the quota.
		t.LeaseUntil = t.CreatedAt.Add(e.opts.Timeout)
		return true
	})
	if errors.Is(err, notify.ErrTooLarge) {
		e.finish(ctx, t.Principal, t.ID, nil, Errorf(CodeInternalError, "internal error: the task's input requests and answers are too large to keep (%v)", err))
		return nil
	}
	return err
}

// finish ends a task: completed with result, or failed with failure. A
// task that ended meanwhile (cancelled) stays as it is.
func (e *taskEngine) finish(ctx context.Context, principal, id string, result any, failure *Error) {
	var raw json.RawMessage
	if failure == nil {
		var err error
		if raw, err = json.Marshal(result); err != nil {
			failure = e.srv.internalError(ctx, "encoding a task's result", err, "task", id)
		} else if len(raw) > e.limits.MaxTaskResultBytes {
			failure = Errorf(CodeInternalError, "internal error: the task's result is %d bytes, limit %d", len(raw), e.limits.MaxTaskResultBytes)
		}
	}
	_, err := e.modify(context.WithoutCancel(ctx), principal, id, func(t *notify.Task) bool {
		if notify.TaskTerminal(t.Status) {
			return false
		}
		t.InputRequests, t.Input = nil, nil
		if failure != nil {
			t.Status, t.StatusMessage = notify.TaskFailed, failure.Message
			t.Error, _ = json.Marshal(failure)
		} else {
			t.Status, t.Result, t.StatusMessage = notify.TaskCompleted, raw, "" // a working message is stale now
		}
		return true
	})
	if errors.Is(err, notify.ErrTooLarge) && failure == nil {
		// The result fits its own limit but not the record with the
		// request: the task fails, saying so, instead of staying
		// working until its lease reports a crash.
		e.finish(ctx, principal, id, nil, Errorf(CodeInternalError,
			"internal error: the task's result (%d bytes) and its request do not fit in one stored record (%d bytes at most)", len(raw), notify.MaxItemBytes))
		return
	}
	if err != nil && !errors.Is(err, notify.ErrNotFound) {
		e.srv.log.ErrorContext(ctx, "ending a task", "task", id, "err", err)
	}
}

// taskRef names the task a call runs in.
type taskRef struct{ principal, id string }

// discardSink drops a task's related messages: tasks have no progress or
// log notifications (statusMessage instead).
type discardSink struct{}

func (discardSink) send(context.Context, []byte) error { return nil }
func (discardSink) detach()                            {}

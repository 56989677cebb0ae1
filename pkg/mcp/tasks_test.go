package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// headerPrincipal authenticates a request as its X-Principal header.
type headerPrincipal struct{}

func (headerPrincipal) Authenticate(r *http.Request) (string, error) {
	return r.Header.Get("X-Principal"), nil
}

// taskProc is one server process of the task tests.
type taskProc struct {
	url string
	srv *mcp.Server
	// started receives the task id of every run of "block" in this
	// process; cancelled the ids whose run saw its ctx cancelled.
	started, cancelled chan string
}

// idleRunner never starts a task: the process that created it dies
// before the work begins.
type idleRunner struct{}

func (idleRunner) StartTask(context.Context, string, string) error { return nil }

func newTaskProc(t *testing.T, db string, limits mcp.Limits, topts mcp.TaskOptions) *taskProc {
	t.Helper()
	store, err := sqlitestore.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if topts.CheckInterval == 0 {
		topts.CheckInterval = 50 * time.Millisecond
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, store, &mcp.ServerOptions{Limits: limits, Tasks: topts, PollInterval: 20 * time.Millisecond})
	p := &taskProc{started: make(chan string, 64), cancelled: make(chan string, 64)}
	idOf := func(ctx context.Context) string { return mcp.TaskID(ctx) }
	srv.AddTaskTool(&mcp.Tool{Name: "block", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := mcp.SetTaskStatus(ctx, "blocking"); err != nil {
				return nil, err
			}
			p.started <- idOf(ctx)
			<-ctx.Done()
			p.cancelled <- idOf(ctx)
			return nil, ctx.Err()
		}, nil)
	srv.AddTaskTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		}, nil)
	srv.AddTaskTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var answers []string
			for _, q := range []string{"a", "b"} {
				r, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: q + "?", RequestedSchema: map[string]any{"type": "object"}})
				if err != nil {
					return nil, err
				}
				answers = append(answers, q+"="+r.Content["v"].(string))
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(answers, ",")}}}, nil
		}, nil)
	srv.AddTaskTool(&mcp.Tool{Name: "only-task", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
		}, &mcp.TaskToolOptions{Support: mcp.TaskRequired})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, KeepAlive: time.Hour, Authenticator: headerPrincipal{}})
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.ShutdownTasks(ctx)
		h.Close()
		ts.Close()
		store.Close()
	})
	p.url, p.srv = ts.URL, srv
	return p
}

const tasksCaps = `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`

// taskCall sends a 2026-era request as principal who.
func taskCall(t *testing.T, url, who, method, name, params, caps string) *rpcReply {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params
	if params != "" {
		body += ","
	}
	body += meta2026(caps) + `}}`
	_, r := call2026(t, url, body, append(headers2026(method, name), "X-Principal", who)...)
	return r
}

func startTask(t *testing.T, url, who, tool, args string) string {
	t.Helper()
	r := taskCall(t, url, who, "tools/call", tool, `"name":"`+tool+`","arguments":`+args, tasksCaps)
	if r.Error != nil || r.Result["resultType"] != "task" {
		t.Fatalf("tools/call %s: %+v %+v, want a CreateTaskResult", tool, r.Result, r.Error)
	}
	id, _ := r.Result["taskId"].(string)
	if len(id) < 22 || r.Result["status"] != "working" || r.Result["ttlMs"] == nil || r.Result["pollIntervalMs"] == nil {
		t.Fatalf("CreateTaskResult %+v: want a 128-bit id, working, ttlMs, pollIntervalMs", r.Result)
	}
	return id
}

func getTask(t *testing.T, url, who, id string) *rpcReply {
	t.Helper()
	return taskCall(t, url, who, "tasks/get", id, `"taskId":"`+id+`"`, tasksCaps)
}

// waitStatus polls tasks/get on url until the task has status.
func waitStatus(t *testing.T, url, who, id, status string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := getTask(t, url, who, id)
		if r.Error != nil {
			t.Fatalf("tasks/get: %+v", r.Error)
		}
		if r.Result["status"] == status {
			return r.Result
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %v, want %s", id, r.Result, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTaskAcrossProcesses: a task created on one process is read,
// answered, cancelled on another; its input rounds run where the last
// answer arrived; another principal cannot see it; a cancellation reaches
// the work on the process that runs it.
func TestTaskAcrossProcesses(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	a, b := newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{}), newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{})

	// Completed with the result inlined, read on the other process.
	id := startTask(t, a.url, "alice", "echo", `{"x":1}`)
	res := waitStatus(t, b.url, "alice", id, "completed")
	if got := res["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]; got != `{"x":1}` {
		t.Errorf("completed task's result text %v, want the arguments", got)
	}
	if r := getTask(t, b.url, "mallory", id); r.Error == nil || r.Error.Code != mcp.CodeInvalidParams {
		t.Errorf("tasks/get of alice's task by mallory: %+v, want -32602", r)
	}

	// Input: two rounds, answered on b, then a.
	id = startTask(t, a.url, "alice", "ask", `{}`)
	res = waitStatus(t, b.url, "alice", id, "input_required")
	reqs, _ := res["inputRequests"].(map[string]any)
	if len(reqs) != 1 || reqs["elicitation/create#1"] == nil {
		t.Fatalf("inputRequests %v, want elicitation/create#1", res["inputRequests"])
	}
	if r := taskCall(t, b.url, "alice", "tasks/update", id, `"taskId":"`+id+`","inputResponses":{"elicitation/create#1":{"action":"accept","content":{"v":"1"}}}`, tasksCaps); r.Error != nil || len(r.Result) != 1 {
		t.Fatalf("tasks/update: %+v %+v, want an empty ack", r.Result, r.Error)
	}
	res = waitStatus(t, a.url, "alice", id, "input_required")
	if _, ok := res["inputRequests"].(map[string]any)["elicitation/create#2"]; !ok {
		t.Fatalf("second round's inputRequests %v, want elicitation/create#2", res["inputRequests"])
	}
	taskCall(t, a.url, "alice", "tasks/update", id, `"taskId":"`+id+`","inputResponses":{"elicitation/create#2":{"action":"accept","content":{"v":"2"}}}`, tasksCaps)
	res = waitStatus(t, b.url, "alice", id, "completed")
	if got := res["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]; got != "a=1,b=2" {
		t.Errorf("result %v, want a=1,b=2", got)
	}

	// Cancellation on b reaches the work on a; the status sticks.
	id = startTask(t, a.url, "alice", "block", `{}`)
	if got := <-a.started; got != id {
		t.Fatalf("a started %s, want %s", got, id)
	}
	res = waitStatus(t, b.url, "alice", id, "working")
	if res["statusMessage"] != "blocking" {
		t.Errorf("statusMessage %v, want blocking", res["statusMessage"])
	}
	for range 2 { // idempotent
		if r := taskCall(t, b.url, "alice", "tasks/cancel", id, `"taskId":"`+id+`"`, tasksCaps); r.Error != nil || len(r.Result) != 1 {
			t.Fatalf("tasks/cancel: %+v %+v, want an empty ack", r.Result, r.Error)
		}
	}
	select {
	case got := <-a.cancelled:
		if got != id {
			t.Errorf("cancelled %s, want %s", got, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancellation did not reach the work on the other process")
	}
	time.Sleep(100 * time.Millisecond)
	waitStatus(t, a.url, "alice", id, "cancelled")
}

// TestTaskLeaseExpiry: a working task whose work is not alive (its
// process died before or while running it) is reported failed once its
// lease expires, by any process.
func TestTaskLeaseExpiry(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	dead := newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{Runner: idleRunner{}, Lease: 300 * time.Millisecond})
	other := newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{})
	id := startTask(t, dead.url, "", "echo", `{}`)
	if r := getTask(t, other.url, "", id); r.Result["status"] != "working" {
		t.Fatalf("before the lease expires: %+v, want working", r.Result)
	}
	time.Sleep(400 * time.Millisecond)
	res := waitStatus(t, other.url, "", id, "failed")
	if msg, _ := res["statusMessage"].(string); !strings.Contains(msg, "lease expired") {
		t.Errorf("statusMessage %q, want one that says the lease expired", msg)
	}
	if e, _ := res["error"].(map[string]any); e == nil || e["code"] != float64(mcp.CodeInternalError) {
		t.Errorf("error %v, want -32603", res["error"])
	}
}

// TestTaskBounds: live tasks per principal, result size, input rounds and
// TTL are bounded, with the errors the README's Limits table names.
func TestTaskBounds(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	p := newTaskProc(t, db, mcp.Limits{MaxTasksPerPrincipal: 2, MaxTaskResultBytes: 100, MaxTaskInputRounds: 1, TaskTTL: 2 * time.Second}, mcp.TaskOptions{})

	// Per principal: a third live task is refused; others are not.
	for range 2 {
		startTask(t, p.url, "alice", "block", `{}`)
	}
	r := taskCall(t, p.url, "alice", "tools/call", "block", `"name":"block","arguments":{}`, tasksCaps)
	if r.Error == nil || r.Error.Code != mcp.CodeInvalidRequest || !strings.Contains(r.Error.Message, "limit 2") {
		t.Errorf("third live task: %+v, want -32600 naming the limit", r.Error)
	}
	startTask(t, p.url, "bob", "echo", `{}`)

	// Result size: the task fails, naming the limit.
	id := startTask(t, p.url, "bob", "echo", `{"big":"`+strings.Repeat("x", 200)+`"}`)
	res := waitStatus(t, p.url, "bob", id, "failed")
	if msg, _ := res["statusMessage"].(string); !strings.Contains(msg, "limit 100") {
		t.Errorf("statusMessage %q, want the result limit", msg)
	}

	// Input rounds: the second round fails the task.
	id = startTask(t, p.url, "bob", "ask", `{}`)
	waitStatus(t, p.url, "bob", id, "input_required")
	taskCall(t, p.url, "bob", "tasks/update", id, `"taskId":"`+id+`","inputResponses":{"elicitation/create#1":{"action":"accept","content":{"v":"1"}}}`, tasksCaps)
	res = waitStatus(t, p.url, "bob", id, "failed")
	if msg, _ := res["statusMessage"].(string); !strings.Contains(msg, "limit 1") {
		t.Errorf("statusMessage %q, want the input rounds limit", msg)
	}
	if res["ttlMs"] != float64(2000) {
		t.Errorf("ttlMs %v, want 2000", res["ttlMs"])
	}

	// TTL: the task is gone after ttlMs.
	time.Sleep(2100 * time.Millisecond)
	if r := getTask(t, p.url, "bob", id); r.Error == nil || r.Error.Code != mcp.CodeInvalidParams {
		t.Errorf("tasks/get after the TTL: %+v, want -32602", r)
	}
}

// TestTaskCapability: without the extension declared in the request's
// _meta a task tool runs in the request (optional) or is refused with
// -32021 naming the extension (required), and tasks/* are refused.
func TestTaskCapability(t *testing.T) {
	p := newTaskProc(t, filepath.Join(t.TempDir(), "tasks.db"), mcp.Limits{}, mcp.TaskOptions{})
	r := taskCall(t, p.url, "", "tools/call", "echo", `"name":"echo","arguments":{"y":2}`, `{}`)
	if r.Error != nil || r.Result["resultType"] != "complete" || r.Result["taskId"] != nil {
		t.Errorf("optional task tool without the extension: %+v %+v, want a plain result", r.Result, r.Error)
	}
	want := `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	r = taskCall(t, p.url, "", "tools/call", "only-task", `"name":"only-task","arguments":{}`, `{}`)
	if r.Error == nil || r.Error.Code != mcp.CodeMissingRequiredClientCapability || string(r.Error.Data) != want {
		t.Errorf("required task tool without the extension: %+v, want -32021 with %s", r.Error, want)
	}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		r := taskCall(t, p.url, "", m, "x", `"taskId":"x","inputResponses":{}`, `{}`)
		if r.Error == nil || r.Error.Code != mcp.CodeMissingRequiredClientCapability {
			t.Errorf("%s without the extension: %+v, want -32021", m, r.Error)
		}
	}
	r = taskCall(t, p.url, "", "tasks/get", "nope", `"taskId":"nope"`, tasksCaps)
	if r.Error == nil || r.Error.Code != mcp.CodeInvalidParams {
		t.Errorf("tasks/get of an unknown task: %+v, want -32602", r.Error)
	}
	for _, m := range []string{"tasks/result", "tasks/list"} {
		if r := taskCall(t, p.url, "", m, "", `"taskId":"x"`, tasksCaps); r.Error == nil || r.Error.Code != mcp.CodeMethodNotFound {
			t.Errorf("%s: %+v, want -32601", m, r.Error)
		}
	}
	// Mcp-Name must be the task id.
	body := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"abc",` + meta2026(tasksCaps) + `}}`
	if status, r := call2026(t, p.url, body, headers2026("tasks/get", "xyz")...); status != http.StatusBadRequest || r.Error == nil || r.Error.Code != mcp.CodeHeaderMismatch {
		t.Errorf("tasks/get with a wrong Mcp-Name: %d %+v, want 400 -32020", status, r.Error)
	}
}

// listenTasks opens a listen stream on url as principal who, naming
// taskIds.
func listenTasks(t *testing.T, ctx context.Context, url, who string, ids ...string) <-chan map[string]any {
	t.Helper()
	b, _ := json.Marshal(ids)
	body := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"taskIds":` + string(b) + `},` + meta2026(tasksCaps) + `}}`
	return streamMessages(t, postListen(t, ctx, url, body, "X-Principal", who))
}

// TestTaskPush: a listen stream naming a task gets notifications/tasks
// with the full task once per status change, made on any process; another
// principal's stream naming the same id gets nothing.
func TestTaskPush(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	a, b := newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{}), newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	id := startTask(t, a.url, "alice", "ask", `{}`)
	waitStatus(t, a.url, "alice", id, "input_required")
	mine, theirs := listenTasks(t, ctx, b.url, "alice", id), listenTasks(t, ctx, b.url, "mallory", id)
	for _, ch := range []<-chan map[string]any{mine, theirs} {
		ack := next(t, ch)
		if ack["method"] != "notifications/subscriptions/acknowledged" {
			t.Fatalf("first message %v, want the acknowledgement", ack)
		}
		if ids := ack["params"].(map[string]any)["notifications"].(map[string]any)["taskIds"]; len(ids.([]any)) != 1 {
			t.Errorf("acknowledged taskIds %v, want [%s]", ids, id)
		}
	}
	// Answered on a: working, then input_required again, each pushed to
	// the stream served by b.
	taskCall(t, a.url, "alice", "tasks/update", id, `"taskId":"`+id+`","inputResponses":{"elicitation/create#1":{"action":"accept","content":{"v":"1"}}}`, tasksCaps)
	for _, want := range []string{"working", "input_required"} {
		m := next(t, mine)
		p, _ := m["params"].(map[string]any)
		if m["method"] != "notifications/tasks" || p["taskId"] != id || p["status"] != want {
			t.Fatalf("notification %v, want notifications/tasks %s for %s", m, want, id)
		}
		if want == "input_required" && p["inputRequests"] == nil {
			t.Errorf("input_required notification without inputRequests: %v", p)
		}
	}
	taskCall(t, b.url, "alice", "tasks/cancel", id, `"taskId":"`+id+`"`, tasksCaps)
	taskCall(t, a.url, "alice", "tasks/cancel", id, `"taskId":"`+id+`"`, tasksCaps) // no change: no notification
	m := next(t, mine)
	if p, _ := m["params"].(map[string]any); p["status"] != "cancelled" {
		t.Fatalf("notification %v, want cancelled", m)
	}
	select {
	case m := <-mine:
		t.Errorf("a second notification for one change: %v", m)
	case m := <-theirs:
		t.Errorf("another principal's stream got %v", m)
	case <-time.After(300 * time.Millisecond):
	}

	// taskIds need the extension declared.
	body := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"taskIds":["x"]},` + meta2026(`{}`) + `}}`
	if status, r := call2026(t, b.url, body, headers2026("subscriptions/listen", "")...); status != http.StatusBadRequest || r.Error == nil || r.Error.Code != mcp.CodeMissingRequiredClientCapability {
		t.Errorf("listen with taskIds without the extension: %d %+v, want 400 -32021", status, r.Error)
	}
}

// TestClientFollowsTask: the Go client in the 2026 era declares the
// extension, follows a task to its end answering its input requests with
// its handlers, reports status messages through the progress callback,
// and cancels a task it stops waiting for.
func TestClientFollowsTask(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	a, b := newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{}), newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{})
	answers := 0
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		Mode:   mcp.ClientMode2026,
		Header: http.Header{"X-Principal": {"carol"}},
		ElicitationHandler: func(ctx context.Context, cs *mcp.ClientSession, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			answers++
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"v": strings.TrimSuffix(p.Message, "?")}}, nil
		},
	})
	cs, err := client.Connect(t.Context(), a.url)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())

	res, err := cs.CallTool(t.Context(), "ask", nil, nil)
	if err != nil || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "a=a,b=b" || answers != 2 {
		t.Fatalf("CallTool(ask) = %+v, %v after %d answers; want a=a,b=b after 2", res, err, answers)
	}

	// Status messages, and a cancellation when the caller gives up.
	var messages []string
	ctx, cancel := context.WithCancel(t.Context())
	_, err = cs.CallTool(ctx, "block", nil, func(p *mcp.ProgressParams) {
		messages = append(messages, p.Message)
		if p.Message == "blocking" {
			cancel() // the caller gives up
		}
	})
	if err == nil {
		t.Fatal("CallTool(block) returned no error after its context ended")
	}
	if !slices.Contains(messages, "blocking") {
		t.Errorf("status messages %q, want blocking", messages)
	}
	<-a.started
	select {
	case <-a.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the abandoned task's work was not cancelled")
	}

	// StartTool, GetTask, CancelTask (on the other process).
	_, task, err := cs.StartTool(t.Context(), "block", nil, nil)
	if err != nil || task == nil || task.Status != "working" {
		t.Fatalf("StartTool(block) = %+v, %v; want a working task", task, err)
	}
	<-a.started
	other, err := client.Connect(t.Context(), b.url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	if err := other.CancelTask(t.Context(), task.TaskID); err != nil {
		t.Fatal(err)
	}
	if got, err := other.GetTask(t.Context(), task.TaskID); err != nil || got.Status != "cancelled" || !got.Terminal() {
		t.Errorf("GetTask after CancelTask = %+v, %v; want cancelled", got, err)
	}
	if _, err := cs.AwaitTask(t.Context(), task.TaskID, nil); err != mcp.ErrTaskCancelled {
		t.Errorf("AwaitTask of a cancelled task: %v, want ErrTaskCancelled", err)
	}
}

// TestTaskStoreRequests counts the store requests of a task's life: what
// it costs on DynamoDB, where each is one request.
func TestTaskStoreRequests(t *testing.T) {
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var c storecount.Counter
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, storecount.Wrap(store, &c), &mcp.ServerOptions{Tasks: mcp.TaskOptions{CheckInterval: time.Hour}})
	srv.AddTaskTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
		}, &mcp.TaskToolOptions{Support: mcp.TaskRequired})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
	ts := httptest.NewServer(h)
	defer func() { h.Close(); ts.Close() }()

	c.Reset()
	id := startTask(t, ts.URL, "", "echo", `{}`)
	waitStatus(t, ts.URL, "", id, "completed")
	// The completing process looks for the task's listeners after it
	// wrote the status that tasks/get just read: wait for that read.
	got := c.Counts()
	for deadline := time.Now().Add(10 * time.Second); got["Subscribers"] == 0 && time.Now().Before(deadline); got = c.Counts() {
		time.Sleep(10 * time.Millisecond)
	}
	// Creation: CountTasks, CreateTask. The run: GetTask+UpdateTask to
	// claim the lease, GetTask+UpdateTask+Subscribers to complete it
	// (the last for notifications/tasks). Then one GetTask per tasks/get.
	gets := got["GetTask"] - 2
	want := storecount.Counts{"CountTasks": 1, "CreateTask": 1, "GetTask": 2 + gets, "UpdateTask": 2, "Subscribers": 1}
	if gets < 1 || !cmp.Equal(want, got) {
		t.Errorf("store requests of one task: %v, want %v", got, want)
	}
	t.Logf("one task, created, run and read %d times: %d store requests (%d reads, %d writes)", gets, got.Total(), got.Reads(), got.Writes())
}

// TestTaskLeaseExpiryPushed: a client that only listens learns that a
// task's process died: the process serving its listen stream finds the
// lease expired and pushes the failed task.
func TestTaskLeaseExpiryPushed(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	lease := 300 * time.Millisecond
	dead := newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{Runner: idleRunner{}, Lease: lease})
	other := newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{Lease: lease})
	id := startTask(t, dead.url, "", "echo", `{}`)
	ch := listenTasks(t, t.Context(), other.url, "", id)
	if ack := next(t, ch); ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v, want the acknowledgement", ack)
	}
	m := next(t, ch)
	p, _ := m["params"].(map[string]any)
	if m["method"] != "notifications/tasks" || p["taskId"] != id || p["status"] != "failed" {
		t.Fatalf("notification %v, want the task failed", m)
	}
}

// TestTaskQueued: a task waiting for a worker of a full pool keeps its
// lease (it is not reported failed) and runs once a worker is free.
func TestTaskQueued(t *testing.T) {
	lease := 300 * time.Millisecond
	p := newTaskProc(t, filepath.Join(t.TempDir(), "tasks.db"), mcp.Limits{}, mcp.TaskOptions{Workers: 1, Lease: lease})
	blocker := startTask(t, p.url, "", "block", `{}`)
	<-p.started
	queued := startTask(t, p.url, "", "echo", `{"q":1}`)
	time.Sleep(3 * lease)
	if r := getTask(t, p.url, "", queued); r.Result["status"] != "working" {
		t.Fatalf("queued task after 3 leases: %v, want still working", r.Result)
	}
	taskCall(t, p.url, "", "tasks/cancel", blocker, `"taskId":"`+blocker+`"`, tasksCaps)
	waitStatus(t, p.url, "", queued, "completed")
}

// TestTaskRecordTooLarge: a result that fits its own limit but not the
// stored record with the request (200 KB of arguments echoed) ends the
// task failed at once, saying why, instead of leaving it working until
// its lease reports a crash; a tasks/update whose answers would not fit
// is -32602 naming the limit, and the task still waits for its input.
func TestTaskRecordTooLarge(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	p := newTaskProc(t, db, mcp.Limits{}, mcp.TaskOptions{Lease: time.Minute})
	big := strings.Repeat("x", 200_000)
	id := startTask(t, p.url, "alice", "echo", `{"big":"`+big+`"}`)
	res := waitStatus(t, p.url, "alice", id, "failed")
	if msg, _ := res["statusMessage"].(string); !strings.Contains(msg, "do not fit in one stored record") {
		t.Errorf("statusMessage %q, want the record bound", msg)
	}

	id = startTask(t, p.url, "alice", "ask", `{}`)
	res = waitStatus(t, p.url, "alice", id, "input_required")
	var key string
	for k := range res["inputRequests"].(map[string]any) {
		key = k
	}
	r := taskCall(t, p.url, "alice", "tasks/update", id, `"taskId":"`+id+`","inputResponses":{"`+key+`":{"action":"accept","content":{"v":"`+strings.Repeat("y", 360_000)+`"}}}`, tasksCaps)
	if r.Error == nil || r.Error.Code != mcp.CodeInvalidParams || !strings.Contains(r.Error.Message, "larger than 358400 bytes") {
		t.Errorf("tasks/update too large: %+v, want -32602 naming the limit", r.Error)
	}
	waitStatus(t, p.url, "alice", id, "input_required")
}

// TestTaskTimeout: work that runs past the execution timeout is stopped
// and its task ends failed, saying so, long before its lifetime ends (it
// used to be cancelled at the lifetime and then not found).
func TestTaskTimeout(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	p := newTaskProc(t, db, mcp.Limits{TaskTTL: time.Minute}, mcp.TaskOptions{Timeout: 300 * time.Millisecond})
	id := startTask(t, p.url, "alice", "block", `{}`)
	<-p.started
	res := waitStatus(t, p.url, "alice", id, "failed")
	if msg, _ := res["statusMessage"].(string); !strings.Contains(msg, "ran longer than 300ms") {
		t.Errorf("statusMessage %q, want the execution timeout", msg)
	}
	select {
	case <-p.cancelled:
	case <-time.After(5 * time.Second):
		t.Error("the work was not stopped")
	}
}

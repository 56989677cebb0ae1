package e2e

// Interop tests: real MCP clients that nobody here wrote — the TypeScript
// SDK 1.x client (interop_ts_test.go) and the official Go SDK client
// (interop_gosdk_test.go) — against three mcpush processes sharing one
// SQLite file behind the round-robin proxy, so that consecutive requests
// of one session land on different processes. This file holds what both
// share: the cluster, publishing through sns-ingest, a recorder of what a
// client observed, and the checks of events, list_changed and resumption.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
)

const (
	// interopInstances is the number of server processes behind the proxy.
	interopInstances = 3
	// interopWait bounds every wait for something a client should observe,
	// and every client call.
	interopWait = 20 * time.Second
	// interopProtocol is the protocol version both clients negotiate: the
	// latest of the 2025 era, with sessions, GET streams and resumption.
	interopProtocol = "2025-11-25"
)

// interopToolDescription is the description a registry change gives
// events_recent.
const interopToolDescription = "Recent events, re-described by the interop test"

// interopBuiltinTools are mcpush's own tools, always listed.
var interopBuiltinTools = []string{"session_info", "topics_list", "events_recent", "events_wait"}

// interopEnv is a cluster of server processes on one SQLite file behind a
// round-robin proxy, and the sns-ingest CLI on the same store.
type interopEnv struct {
	c        *Cluster
	p        *Proxy
	url      string   // the MCP endpoint through the proxy
	ingest   string   // the sns-ingest binary
	storeEnv []string // MCPUSH_STORE=...
	start    time.Time
}

// startInterop starts the cluster, with env added to the processes'
// environment. The processes poll often and trust their registry copy
// briefly, so that pushes arrive quickly.
func startInterop(t *testing.T, env ...string) *interopEnv {
	t.Helper()
	e := &interopEnv{start: time.Now(), storeEnv: SQLiteStore().Env(t)}
	e.ingest = testenv.BuildBinary(t, "./functions/sns-ingest")
	e.c = StartCluster(t, interopInstances, &ClusterOptions{
		Env: append(append(slices.Clone(e.storeEnv),
			"MCPUSH_FIXTURES=conformance",
			"MCPUSH_POLL_INTERVAL=50ms",
			"MCPUSH_REGISTRY_REFRESH=100ms",
			// One requestState key on every process: a 2026-era retry may
			// land on any of them.
			"MCPUSH_STATE_KEYS=interop-test-key-0123456789abcdef",
			interopGORACE()), env...),
		ReadyPath: "/healthz",
	})
	e.p = NewProxy(t, e.c.BaseURLs()...)
	e.url = e.p.URL + "/mcp"
	t.Logf("%d server processes on one SQLite file behind %s, ready after %v",
		interopInstances, e.url, time.Since(e.start).Round(time.Millisecond))
	return e
}

// step runs one flow of an interop test as a subtest, logging its time.
// A failed step stops the test: later steps build on earlier ones.
func (e *interopEnv) step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	start := time.Now()
	ok := t.Run(name, f)
	t.Logf("step %s: %v", name, time.Since(start).Round(time.Millisecond))
	if !ok {
		t.FailNow()
	}
}

// publish runs sns-ingest -topic topic -message msg (msg as JSON) on the
// cluster's store and checks that it accepted the one record.
func (e *interopEnv) publish(t *testing.T, topic string, msg any) {
	t.Helper()
	body, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), interopWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.ingest, "-topic", topic, "-message", string(body))
	cmd.Env = append(append(processEnv(), e.storeEnv...), interopGORACE())
	cmd.SysProcAttr = childProcAttr()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var sum struct {
		Accepted int `json:"accepted"`
	}
	if err != nil || json.Unmarshal(out, &sum) != nil || sum.Accepted != 1 {
		t.Fatalf("sns-ingest -topic %s -message %s: %v\nstdout: %s\nstderr: %s", topic, body, err, out, stderr.String())
	}
}

// interopGORACE returns the GORACE setting for the processes the interop
// tests start: the test's own, plus atexit_sleep_ms=0. A binary built with
// -race (as testenv.BuildBinary builds it under go test -race) otherwise
// sleeps 1s before exiting, which would make every sns-ingest run take a
// second.
func interopGORACE() string {
	return strings.TrimSpace("GORACE=" + os.Getenv("GORACE") + " atexit_sleep_ms=0")
}

// publishEvent publishes event number n (its payload is {"n":n}) on topic.
// On a fresh topic event n gets sequence number n.
func (e *interopEnv) publishEvent(t *testing.T, topic string, n int) {
	t.Helper()
	e.publish(t, topic, map[string]any{"type": "event", "topic": topic, "data": map[string]any{"n": n}})
}

// publishRegistry publishes a registry change.
func (e *interopEnv) publishRegistry(t *testing.T, registry, op string, items ...any) {
	t.Helper()
	e.publish(t, "mcpush-registry", map[string]any{"type": "registry", "registry": registry, "op": op, "items": items})
}

// steerAwayFrom sends requests through the proxy until its next request
// goes to a backend other than k (the round robin sends request number N
// to backend N mod n).
func (e *interopEnv) steerAwayFrom(t *testing.T, k int) {
	t.Helper()
	for int(e.p.Total()%int64(e.c.Len())) == k {
		resp, err := http.Get(e.p.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
}

// requireSessionGone checks that the session no longer exists on any
// process: a request with its id gets 404 (one request per backend).
func (e *interopEnv) requireSessionGone(t *testing.T, sessionID string) {
	t.Helper()
	for range e.c.Len() {
		req, err := http.NewRequest(http.MethodPost, e.url, strings.NewReader(`{"jsonrpc":"2.0","id":99,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sessionID)
		req.Header.Set("Mcp-Protocol-Version", interopProtocol)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("ping with the deleted session's id: status %d, want 404", resp.StatusCode)
		}
	}
}

// interopObs is one thing a client observed. The TypeScript script prints
// these as JSON lines; the Go SDK test records the same from its handlers.
type interopObs struct {
	Kind string `json:"kind"` // "notification", "request", "progress", "http", "error"

	// notification or request from the server
	Method    string          `json:"method,omitempty"` // also the HTTP method
	Params    json.RawMessage `json:"params,omitempty"`
	Unhandled bool            `json:"unhandled,omitempty"` // no handler was set for it

	// progress (of the call with id Call)
	Call     int     `json:"call,omitempty"`
	Progress float64 `json:"progress,omitempty"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"` // also the error message

	// http
	RPC         string `json:"rpc,omitempty"`
	LastEventID string `json:"lastEventId,omitempty"`
	Status      int    `json:"status,omitempty"`
	Gated       bool   `json:"gated,omitempty"`
	Error       string `json:"error,omitempty"`
}

func (o interopObs) String() string {
	b, _ := json.Marshal(o)
	return string(b)
}

// interopRecorder keeps what a client observed, in arrival order. It is
// safe for concurrent use.
type interopRecorder struct {
	mu      sync.Mutex
	obs     []interopObs
	changed chan struct{} // closed and replaced on each add
}

func newInteropRecorder() *interopRecorder {
	return &interopRecorder{changed: make(chan struct{})}
}

func (r *interopRecorder) add(o interopObs) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs = append(r.obs, o)
	close(r.changed)
	r.changed = make(chan struct{})
}

// addNotification records a notification with params marshaled to JSON.
func (r *interopRecorder) addNotification(method string, params any) {
	data, err := json.Marshal(params)
	if err != nil {
		data, _ = json.Marshal(err.Error())
	}
	r.add(interopObs{Kind: "notification", Method: method, Params: data})
}

func (r *interopRecorder) snapshot() ([]interopObs, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.obs), r.changed
}

func (r *interopRecorder) all() []interopObs {
	obs, _ := r.snapshot()
	return obs
}

// waitFor waits until cond holds for the observations, failing t after
// interopWait, and returns them.
func (r *interopRecorder) waitFor(t *testing.T, what string, cond func([]interopObs) bool) []interopObs {
	t.Helper()
	timeout := time.NewTimer(interopWait)
	defer timeout.Stop()
	for {
		obs, changed := r.snapshot()
		if cond(obs) {
			return obs
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("timed out after %v waiting for %s; the client observed:\n%s", interopWait, what, interopDump(obs, 60))
		case <-t.Context().Done():
			t.Fatalf("test ended waiting for %s", what)
		}
	}
}

// interopErrors returns the errors the client reported (the TypeScript
// client's onerror, the Go SDK client's warnings and errors).
func interopErrors(obs []interopObs) []string {
	var out []string
	for _, o := range obs {
		if o.Kind == "error" {
			out = append(out, o.Message)
		}
	}
	return out
}

// interopDump formats the last n observations.
func interopDump(obs []interopObs, n int) string {
	var b strings.Builder
	if len(obs) > n {
		fmt.Fprintf(&b, "\t(%d earlier omitted)\n", len(obs)-n)
		obs = obs[len(obs)-n:]
	}
	for _, o := range obs {
		fmt.Fprintf(&b, "\t%s\n", o)
	}
	return b.String()
}

// interopCount counts the notifications with method.
func interopCount(obs []interopObs, method string) int {
	n := 0
	for _, o := range obs {
		if o.Kind == "notification" && o.Method == method {
			n++
		}
	}
	return n
}

// interopLogMessage is the params of notifications/message.
type interopLogMessage struct {
	Level  string          `json:"level"`
	Logger string          `json:"logger"`
	Data   json.RawMessage `json:"data"`
}

// interopToolLogs returns the data of the notifications/message that are not
// external events (logger events/<topic>): those a tool logged.
func interopToolLogs(obs []interopObs) []string {
	var out []string
	for _, o := range obs {
		if o.Kind != "notification" || o.Method != "notifications/message" {
			continue
		}
		var m interopLogMessage
		json.Unmarshal(o.Params, &m)
		if strings.HasPrefix(m.Logger, "events/") {
			continue
		}
		var s string
		if json.Unmarshal(m.Data, &s) != nil {
			s = string(m.Data)
		}
		out = append(out, m.Level+": "+s)
	}
	return out
}

// interopEvents returns, in arrival order, the events of topic the client
// saw. Each event comes as notifications/resources/updated for
// events://<topic> followed by notifications/message (logger
// events/<topic>); one entry "updated" or "n=N seq=S" is returned per
// notification, so duplicates, losses and reordering all show.
func interopEvents(obs []interopObs, topic string) []string {
	var out []string
	for _, o := range obs {
		if o.Kind != "notification" {
			continue
		}
		switch o.Method {
		case "notifications/resources/updated":
			var p struct {
				URI string `json:"uri"`
			}
			json.Unmarshal(o.Params, &p)
			if p.URI == "events://"+topic {
				out = append(out, "updated")
			}
		case "notifications/message":
			var m interopLogMessage
			json.Unmarshal(o.Params, &m)
			if m.Logger != "events/"+topic {
				continue
			}
			var d struct {
				Topic    string `json:"topic"`
				Sequence int64  `json:"sequence"`
				Payload  struct {
					N int `json:"n"`
				} `json:"payload"`
			}
			json.Unmarshal(m.Data, &d)
			out = append(out, fmt.Sprintf("%s n=%d seq=%d topic=%s", m.Level, d.Payload.N, d.Sequence, d.Topic))
		}
	}
	return out
}

// interopWantEvents is what interopEvents returns for events 1..n of topic.
func interopWantEvents(topic string, n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, "updated", fmt.Sprintf("info n=%d seq=%d topic=%s", i, i, topic))
	}
	return out
}

// interopWaitEvents waits until the client has seen the notifications of n events
// of topic and checks that it saw events 1..n, each exactly once, in order.
func interopWaitEvents(t *testing.T, rec *interopRecorder, topic string, n int) {
	t.Helper()
	want := interopWantEvents(topic, n)
	obs := rec.waitFor(t, fmt.Sprintf("events 1..%d of %s", n, topic), func(obs []interopObs) bool {
		return len(interopEvents(obs, topic)) >= len(want)
	})
	if got := interopEvents(obs, topic); !slices.Equal(got, want) {
		t.Fatalf("notifications for the events of %s:\n\tgot  %q\n\twant %q", topic, got, want)
	}
}

// interopProgress returns the progress values reported for call.
func interopProgress(obs []interopObs, call int) []float64 {
	var out []float64
	for _, o := range obs {
		if o.Kind == "progress" && o.Call == call {
			out = append(out, o.Progress)
		}
	}
	return out
}

// interopRequireIncreasing checks that progress values increase strictly.
func interopRequireIncreasing(t *testing.T, what string, p []float64) {
	t.Helper()
	for i := 1; i < len(p); i++ {
		if p[i] <= p[i-1] {
			t.Errorf("%s progress %v does not increase", what, p)
			return
		}
	}
}

// interopRequireSubscribed checks that a session_info result lists the
// subscription to events://orders.
func interopRequireSubscribed(t *testing.T, res *interopToolResult) {
	t.Helper()
	var info struct {
		Subscriptions []string `json:"subscriptions"`
	}
	res.structured(t, &info)
	if !slices.Equal(info.Subscriptions, []string{"events://orders"}) {
		t.Errorf("session_info subscriptions = %q; want events://orders", info.Subscriptions)
	}
}

// interopToolResult is a tools/call result as JSON.
type interopToolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// structured decodes the structured content into v.
func (r *interopToolResult) structured(t *testing.T, v any) {
	t.Helper()
	if r.IsError || len(r.StructuredContent) == 0 {
		t.Fatalf("tool result %+v: want structuredContent", r)
	}
	if err := json.Unmarshal(r.StructuredContent, v); err != nil {
		t.Fatalf("structuredContent %s: %v", r.StructuredContent, err)
	}
}

// interopRequireWait checks that events_wait returned event 1 of topic waits.
func interopRequireWait(t *testing.T, r *interopToolResult) {
	t.Helper()
	var out struct {
		Event *struct {
			Sequence int64 `json:"sequence"`
			Data     struct {
				N int `json:"n"`
			} `json:"data"`
		} `json:"event"`
		TimedOut bool `json:"timedOut"`
	}
	r.structured(t, &out)
	if out.TimedOut || out.Event == nil || out.Event.Sequence != 1 || out.Event.Data.N != 1 {
		t.Errorf("events_wait returned %s; want event 1 of waits", r.StructuredContent)
	}
}

// interopRequireNames checks that got contains every name in want.
func interopRequireNames(t *testing.T, what string, got, want []string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s %q: missing %s", what, got, w)
		}
	}
}

// interopRequireToolLogs checks the messages of one test_tool_with_logging call.
func interopRequireToolLogs(t *testing.T, logs []string) {
	t.Helper()
	want := []string{"info: Tool execution started", "info: Tool processing data", "info: Tool execution completed"}
	if !slices.Equal(logs, want) {
		t.Errorf("log messages from test_tool_with_logging = %q; want %q (once, at level info)", logs, want)
	}
}

// interopRequireTopicRead checks a resources/read result of events://topic
// (as JSON): the topic's events 1..n.
func interopRequireTopicRead(t *testing.T, topic string, n int, result []byte) {
	t.Helper()
	var res struct {
		Contents []struct {
			URI      string `json:"uri"`
			MimeType string `json:"mimeType"`
			Text     string `json:"text"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(result, &res); err != nil || len(res.Contents) != 1 {
		t.Fatalf("resources/read events://%s = %s (%v); want one content", topic, result, err)
	}
	c := res.Contents[0]
	var body struct {
		Topic  string `json:"topic"`
		Events []struct {
			Sequence int64 `json:"sequence"`
			Data     struct {
				N int `json:"n"`
			} `json:"data"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(c.Text), &body); err != nil {
		t.Fatalf("resources/read events://%s: text %q: %v", topic, c.Text, err)
	}
	var got []string
	for _, ev := range body.Events {
		got = append(got, fmt.Sprintf("n=%d seq=%d", ev.Data.N, ev.Sequence))
	}
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("n=%d seq=%d", i, i))
	}
	if c.URI != "events://"+topic || c.MimeType != "application/json" || body.Topic != topic || !slices.Equal(got, want) {
		t.Errorf("resources/read events://%s: uri %s, mimeType %s, topic %s, events %q; want the uri, application/json, the topic and %q",
			topic, c.URI, c.MimeType, body.Topic, got, want)
	}
}

// interopSamplingPrompt is the prompt the clients are asked to complete
// (by test_sampling); they answer "interop says " and the prompt.
const interopSamplingPrompt = "hello from the interop test"

// interopRequireSampling checks a test_sampling result and that the
// client's handler answered the server's sampling/createMessage, sent
// after mark, once.
func interopRequireSampling(t *testing.T, rec *interopRecorder, mark int, res *interopToolResult) {
	t.Helper()
	want := "LLM response: interop says " + interopSamplingPrompt
	if res.IsError || len(res.Content) != 1 || res.Content[0].Text != want {
		t.Errorf("test_sampling returned %+v; want the text %q", res, want)
	}
	n := 0
	for _, o := range rec.all()[mark:] {
		if o.Kind == "request" && o.Method == "sampling/createMessage" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the client answered %d sampling/createMessage requests; want 1", n)
	}
}

// interopRequireReconnected checks a test_reconnection result, and that
// the client resumed the call's stream, closed by the server mid-call,
// with a GET carrying Last-Event-ID (sent after mark).
func interopRequireReconnected(t *testing.T, rec *interopRecorder, mark int, res *interopToolResult) {
	t.Helper()
	if res.IsError || len(res.Content) != 1 || !strings.HasPrefix(res.Content[0].Text, "Reconnection test completed successfully") {
		t.Errorf("test_reconnection returned %+v; want success", res)
	}
	i := slices.IndexFunc(interopHTTP(rec.all(), mark), func(o interopObs) bool {
		return o.Method == http.MethodGet && o.LastEventID != "" && o.Status == http.StatusOK
	})
	if i < 0 {
		t.Errorf("no GET with Last-Event-ID among %v", interopHTTP(rec.all(), mark))
	}
}

// interopHTTP returns the HTTP exchanges recorded after mark.
func interopHTTP(obs []interopObs, mark int) []interopObs {
	var out []interopObs
	for _, o := range obs[min(mark, len(obs)):] {
		if o.Kind == "http" {
			out = append(out, o)
		}
	}
	return out
}

// interopGate holds back a client's GET requests while closed, so that
// the test decides when, and so on which process, the client opens or
// resumes its standalone GET stream.
type interopGate interface {
	setGate(open bool) error
}

// interopStream is where a client's standalone GET stream is served.
type interopStream struct {
	backend  int // the process serving it
	answered int // the number of GET requests the client had sent by then
}

// interopAnsweredGETs counts the GET requests that got an answer (not those
// held at the gate).
func interopAnsweredGETs(obs []interopObs) int {
	n := 0
	for _, o := range obs {
		if o.Kind == "http" && o.Method == http.MethodGet && !o.Gated {
			n++
		}
	}
	return n
}

// releaseGET waits for the client's GET request held at the gate (sent
// after mark), opens the gate and waits for the answer, which must be 200.
// The client must be sending nothing else: the round robin sends the GET
// to the backend that gets the proxy's next request, which releaseGET
// returns.
func (e *interopEnv) releaseGET(t *testing.T, rec *interopRecorder, gate interopGate, mark int) interopStream {
	t.Helper()
	rec.waitFor(t, "a GET request held at the gate", func(obs []interopObs) bool {
		return slices.ContainsFunc(interopHTTP(obs, mark), func(o interopObs) bool {
			return o.Method == http.MethodGet && o.Gated
		})
	})
	before := e.p.Counts()
	j := int(e.p.Total() % int64(e.c.Len()))
	if err := gate.setGate(true); err != nil {
		t.Fatalf("opening the gate: %v", err)
	}
	var get interopObs
	obs := rec.waitFor(t, "the answer to the GET request", func(obs []interopObs) bool {
		i := slices.IndexFunc(interopHTTP(obs, mark), func(o interopObs) bool {
			return o.Method == http.MethodGet && !o.Gated
		})
		if i >= 0 {
			get = interopHTTP(obs, mark)[i]
		}
		return i >= 0
	})
	if get.Status != http.StatusOK {
		t.Fatalf("GET %s: status %d, error %q; want 200", get.LastEventID, get.Status, get.Error)
	}
	if after := e.p.Counts(); after[j] == before[j] {
		t.Fatalf("requests per backend %v before the GET, %v after; want one more on %d", before, after, j)
	}
	return interopStream{backend: j, answered: interopAnsweredGETs(obs)}
}

// resume kills the process serving the client's GET stream (SIGKILL),
// publishes events on topic and a prompts registry change while it is
// down, lets the client resume its stream with Last-Event-ID through the
// proxy — steered to another process — restarts the killed process and
// publishes more events. The client must see every event of topic exactly
// once, in order, and one prompts list_changed for the change. before is
// the number of events topic had; resume returns the number it has now,
// and where the stream is served.
func (e *interopEnv) resume(t *testing.T, rec *interopRecorder, gate interopGate, stream interopStream, topic string, before int) (int, interopStream) {
	t.Helper()
	if n := interopAnsweredGETs(rec.all()); n != stream.answered {
		t.Fatalf("the client sent %d GET requests, %d of them after its stream was opened on process %d: cannot tell which process serves it",
			n, n-stream.answered, stream.backend)
	}
	k := stream.backend
	t.Logf("the client's GET stream is on process %d; killing it (SIGKILL)", k)
	mark := len(rec.all())
	prompts := interopCount(rec.all(), "notifications/prompts/list_changed")
	if err := gate.setGate(false); err != nil {
		t.Fatalf("closing the gate: %v", err)
	}
	defer gate.setGate(true)
	if err := e.c.Kill(k); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	// Events and changes published while the process is down and no
	// stream is open wait in the session's stream log.
	n := before
	for range 3 {
		n++
		e.publishEvent(t, topic, n)
	}
	e.publishRegistry(t, "prompts", "put", map[string]any{"name": "p2", "messages": []any{map[string]any{"role": "user", "text": "resumed"}}})
	// The round robin must not hand the resuming GET to the dead process
	// (the Go SDK client gives up on a 502).
	e.steerAwayFrom(t, k)
	resumed := e.releaseGET(t, rec, gate, mark)
	t.Logf("the client resumed its GET stream on process %d, %v after the kill", resumed.backend, time.Since(killed).Round(time.Millisecond))
	if resumed.backend == k {
		t.Fatalf("the resuming GET went to the killed process %d", k)
	}
	var gets []interopObs
	for _, o := range interopHTTP(rec.all(), mark) {
		if o.Method == http.MethodGet && !o.Gated {
			gets = append(gets, o)
		}
	}
	if len(gets) != 1 || gets[0].LastEventID == "" {
		t.Fatalf("GET requests after the kill: %v; want one, with Last-Event-ID", gets)
	}
	t.Logf("Last-Event-ID: %s", gets[0].LastEventID)
	interopWaitEvents(t, rec, topic, n)
	rec.waitFor(t, "prompts list_changed for the change made while the stream was down", func(obs []interopObs) bool {
		return interopCount(obs, "notifications/prompts/list_changed") > prompts
	})

	if err := e.c.Restart(k); err != nil {
		t.Fatal(err)
	}
	e.p.CloseIdleConnections()
	for range 2 {
		n++
		e.publishEvent(t, topic, n)
	}
	interopWaitEvents(t, rec, topic, n)
	if got := interopCount(rec.all(), "notifications/prompts/list_changed"); got != prompts+1 {
		t.Errorf("prompts list_changed notifications: %d before the kill, %d now; want one more", prompts, got)
	}
	return n, resumed
}

// listChanged publishes registry changes — one tools change and two
// prompt changes, each waited for before the next so that none coalesce —
// and checks that each fires the client's handler exactly once. After
// each change it calls check with the change's name, for the client to
// list what changed.
func (e *interopEnv) listChanged(t *testing.T, rec *interopRecorder, check func(t *testing.T, change string)) {
	t.Helper()
	changes := []struct {
		name        string
		publish     func()
		wantTools   int
		wantPrompts int
	}{
		{"tools put events_recent", func() {
			e.publishRegistry(t, "tools", "put", map[string]any{"name": "events_recent", "description": interopToolDescription})
		}, 1, 0},
		{"prompts put p1", func() {
			e.publishRegistry(t, "prompts", "put", map[string]any{"name": "p1", "messages": []any{map[string]any{"role": "user", "text": "hi {{x}}"}}})
		}, 1, 1},
		{"prompts delete p1", func() {
			e.publishRegistry(t, "prompts", "delete", map[string]any{"name": "p1"})
		}, 1, 2},
	}
	for _, c := range changes {
		start := time.Now()
		c.publish()
		obs := rec.waitFor(t, "list_changed after "+c.name, func(obs []interopObs) bool {
			return interopCount(obs, "notifications/tools/list_changed") >= c.wantTools &&
				interopCount(obs, "notifications/prompts/list_changed") >= c.wantPrompts
		})
		t.Logf("%s: notified after %v", c.name, time.Since(start).Round(time.Millisecond))
		interopRequireListChanged(t, obs, c.wantTools, c.wantPrompts)
		check(t, c.name)
	}
}

// interopRequireListChanged checks the numbers of list_changed notifications.
func interopRequireListChanged(t *testing.T, obs []interopObs, tools, prompts int) {
	t.Helper()
	got := [3]int{
		interopCount(obs, "notifications/tools/list_changed"),
		interopCount(obs, "notifications/prompts/list_changed"),
		interopCount(obs, "notifications/resources/list_changed"),
	}
	if want := [3]int{tools, prompts, 0}; got != want {
		t.Fatalf("list_changed notifications (tools, prompts, resources) = %v, want %v", got, want)
	}
}

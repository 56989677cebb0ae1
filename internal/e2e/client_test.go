package e2e

// The Go client of pkg/mcp against three mcpush processes sharing one
// SQLite file behind the round-robin proxy: progress in order, SSE stream
// resumption of a request, 500 events (1000 notifications of random kinds)
// handled in arrival order by a handler that panics on every tenth, a
// burst of tools/list_changed coalescing into at most two re-lists, and
// the GET stream resuming after the process holding it is SIGKILLed.
//
// wireTap observes the HTTP exchanges independently of the client: it
// parses the SSE bytes the client reads, so the test can compare what
// arrived with what the handlers saw.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// wireNote is one notification as it arrived on the wire.
type wireNote struct {
	Method string
	Params string // compact JSON
}

// wireTap is an http.RoundTripper that records what the client sends and
// reads: the notifications in complete SSE events, in the order the client
// read them; the GET requests' Last-Event-ID; and the number of requests
// per JSON-RPC method. A gate can hold requests of one method.
type wireTap struct {
	base http.RoundTripper

	mu       sync.Mutex
	notes    []wireNote
	methods  map[string]int
	resumes  []string // Last-Event-ID of GET requests that had one
	gateName string
	gate     chan struct{} // closed: open
}

func newWireTap() *wireTap {
	return &wireTap{base: http.DefaultTransport, methods: map[string]int{}}
}

// hold makes requests of method wait until release.
func (w *wireTap) hold(method string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gateName, w.gate = method, make(chan struct{})
}

func (w *wireTap) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gate != nil {
		close(w.gate)
		w.gate = nil
	}
}

func (w *wireTap) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		if id := req.Header.Get("Last-Event-ID"); id != "" {
			w.mu.Lock()
			w.resumes = append(w.resumes, id)
			w.mu.Unlock()
		}
	}
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(b, &m) == nil && m.Method != "" {
			w.mu.Lock()
			w.methods[m.Method]++
			gate := w.gate
			if w.gateName != m.Method {
				gate = nil
			}
			w.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
		}
	}
	resp, err := w.base.RoundTrip(req)
	if err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	pr, pw := io.Pipe()
	go w.parse(pr)
	resp.Body = &teeBody{rc: resp.Body, w: pw}
	return resp, nil
}

// teeBody copies what the client reads into a pipe.
type teeBody struct {
	rc io.ReadCloser
	w  *io.PipeWriter
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.rc.Read(p)
	if n > 0 {
		t.w.Write(p[:n])
	}
	if err != nil {
		t.w.CloseWithError(err)
	}
	return n, err
}

func (t *teeBody) Close() error {
	t.w.Close()
	return t.rc.Close()
}

// parse records the notifications of complete events; an event cut off
// by the end of the stream is not recorded (the client drops it too).
func (w *wireTap) parse(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			if v, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(v, " "))
			}
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if len(data) > 0 && json.Unmarshal([]byte(strings.Join(data, "\n")), &m) == nil && m.Method != "" && m.ID == nil {
			w.mu.Lock()
			w.notes = append(w.notes, wireNote{m.Method, compact(m.Params)})
			w.mu.Unlock()
		}
		data = nil
	}
	io.Copy(io.Discard, r)
}

func (w *wireTap) snapshot() (notes []wireNote, methods map[string]int, resumes []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.notes), maps(w.methods), slices.Clone(w.resumes)
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// noteLog records the notifications a client's handlers received.
type noteLog struct {
	mu    sync.Mutex
	notes []wireNote
}

func (l *noteLog) add(method string, params json.RawMessage) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notes = append(l.notes, wireNote{method, compact(params)})
	return len(l.notes)
}

func (l *noteLog) all() []wireNote {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.notes)
}

// waitUntil polls cond until it holds or interopWait*mult passes.
func waitUntil(t *testing.T, what string, mult int, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(mult) * interopWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// publishBatch runs sns-ingest -event with one SNS event holding a record
// per message, and checks that all were accepted.
func (e *interopEnv) publishBatch(t *testing.T, topic string, msgs []any) {
	t.Helper()
	type record struct {
		EventSource string `json:"EventSource"`
		SNS         any    `json:"Sns"`
	}
	var recs []record
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, record{"aws:sns", map[string]any{
			"Type": "Notification", "MessageId": fmt.Sprintf("%s-%d-%d", topic, time.Now().UnixNano(), i),
			"TopicArn": "arn:aws:sns:us-east-1:000000000000:" + topic, "Message": string(b),
			"Timestamp": time.Now().UTC().Format(time.RFC3339Nano), "SignatureVersion": "1",
		}})
	}
	b, err := json.Marshal(map[string]any{"Records": recs})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "batch.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*interopWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.ingest, "-event", file)
	cmd.Env = append(append(processEnv(), e.storeEnv...), interopGORACE())
	cmd.SysProcAttr = childProcAttr()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var sum struct {
		Accepted int `json:"accepted"`
	}
	if err != nil || json.Unmarshal(out, &sum) != nil || sum.Accepted != len(msgs) {
		t.Fatalf("sns-ingest -event (%d records): %v\nstdout: %s\nstderr: %s", len(msgs), err, out, tail(stderr.String(), 2000))
	}
}

func (e *interopEnv) client(tap *wireTap, opts *mcp.ClientOptions) *mcp.Client {
	o := *opts
	o.HTTPClient = &http.Client{Transport: tap}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.RetryDelay == 0 {
		o.RetryDelay = 100 * time.Millisecond
		o.MaxRetryDelay = time.Second
	}
	return mcp.NewClient(&mcp.Implementation{Name: "e2e-go-client", Version: "1"}, &o)
}

func TestClient(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the multi-process client test")
	}
	e := startInterop(t)
	ctx := t.Context()

	e.step(t, "progress", func(t *testing.T) {
		tap := newWireTap()
		cs, err := e.client(tap, &mcp.ClientOptions{NoStandaloneStream: true}).Connect(ctx, e.url)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close(ctx)
		var got []string
		res, err := cs.CallTool(ctx, "test_tool_with_progress", nil, func(p *mcp.ProgressParams) {
			got = append(got, fmt.Sprintf("%g/%g %s", p.Progress, p.Total, p.Message))
		})
		if err != nil || res.IsError {
			t.Fatalf("test_tool_with_progress: %v %+v", err, res)
		}
		want := []string{"0/100 Completed step 0 of 100", "50/100 Completed step 50 of 100", "100/100 Completed step 100 of 100"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("progress callbacks (-want +got):\n%s", diff)
		}
		notes, _, _ := tap.snapshot()
		if n := len(notes); n != len(want) {
			t.Errorf("%d notifications on the wire, want %d: %v", n, len(want), notes)
		}

		// test_reconnection closes the request's stream mid-call: the
		// client resumes it with Last-Event-ID (on whichever process).
		res, err = cs.CallTool(ctx, "test_reconnection", nil, nil)
		if err != nil || res.IsError {
			t.Fatalf("test_reconnection: %v %+v", err, res)
		}
		if _, _, resumes := tap.snapshot(); len(resumes) == 0 {
			t.Error("test_reconnection: the client never resumed with Last-Event-ID")
		}
	})

	e.step(t, "ordered handlers", func(t *testing.T) {
		// Property: whatever the mix of notifications, every
		// one that arrives is handled, once, in arrival order, although
		// the handler panics on every tenth.
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, seed>>1))
		const events = 500 // each is resources/updated + notifications/message
		topics := []string{"ord-a", "ord-b", "ord-c"}

		tap := newWireTap()
		logs := &syncWriter{}
		client := e.client(tap, &mcp.ClientOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		handled := &noteLog{}
		client.AddNotificationHandler("", func(ctx context.Context, cs *mcp.ClientSession, method string, params json.RawMessage) {
			if n := handled.add(method, params); n%10 == 0 {
				panic(fmt.Sprintf("handler panics on notification %d", n))
			}
		})
		cs, err := client.Connect(ctx, e.url)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close(ctx)
		if err := cs.SetLoggingLevel(ctx, "info"); err != nil {
			t.Fatal(err)
		}
		for _, tp := range topics {
			if err := cs.Subscribe(ctx, "events://"+tp); err != nil {
				t.Fatal(err)
			}
		}
		var msgs []any
		perTopic := map[string][]int{}
		for i := range events {
			tp := topics[rng.IntN(len(topics))]
			var data any
			switch rng.IntN(4) {
			case 0:
				data = map[string]any{"n": i}
			case 1:
				data = map[string]any{"n": i, "text": strings.Repeat("x", rng.IntN(200))}
			case 2:
				data = map[string]any{"n": i, "list": []int{rng.IntN(10), rng.IntN(10)}}
			default:
				data = map[string]any{"n": i, "nested": map[string]any{"ok": rng.IntN(2) == 0}}
			}
			perTopic[tp] = append(perTopic[tp], i)
			msgs = append(msgs, map[string]any{"type": "event", "topic": tp, "data": data})
		}
		e.publishBatch(t, "ord", msgs)

		waitUntil(t, fmt.Sprintf("%d notifications handled", 2*events), 6, func() bool { return len(handled.all()) >= 2*events })
		// The queue may still be handling; wait for the wire and handlers to agree in length.
		waitUntil(t, "the handlers to catch up with the wire", 1, func() bool {
			notes, _, _ := tap.snapshot()
			return len(handled.all()) == len(notes)
		})
		got := handled.all()
		wire, _, _ := tap.snapshot()
		if diff := cmp.Diff(wire, got); diff != "" {
			t.Fatalf("handled notifications differ from the arrival order (-wire +handled):\n%s", diff)
		}
		counts := map[string]int{}
		seen := map[string][]int{}
		for _, n := range got {
			counts[n.Method]++
			if n.Method != "notifications/message" {
				continue
			}
			var p struct {
				Data struct {
					Topic   string `json:"topic"`
					Payload struct {
						N int `json:"n"`
					} `json:"payload"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(n.Params), &p); err != nil {
				t.Fatal(err)
			}
			seen[p.Data.Topic] = append(seen[p.Data.Topic], p.Data.Payload.N)
		}
		if diff := cmp.Diff(map[string]int{"notifications/message": events, "notifications/resources/updated": events}, counts); diff != "" {
			t.Errorf("notifications handled per method (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(perTopic, seen); diff != "" {
			t.Errorf("events per topic, in order (-published +handled):\n%s", diff)
		}
		if panics := strings.Count(logs.String(), "handler panicked"); panics != len(got)/10 {
			t.Errorf("%d panics logged, want %d", panics, len(got)/10)
		}
		if err := cs.Ping(ctx); err != nil {
			t.Errorf("the session is broken after the panics: %v", err)
		}
	})

	e.step(t, "list_changed burst", func(t *testing.T) {
		// While a re-list is in flight (held at the tap), any
		// number of tools/list_changed coalesce into one more re-list.
		const changes = 50
		tap := newWireTap()
		var mu sync.Mutex
		var lists [][]*mcp.Tool
		client := e.client(tap, &mcp.ClientOptions{
			ToolsChangedHandler: func(ctx context.Context, cs *mcp.ClientSession, tools []*mcp.Tool) {
				mu.Lock()
				lists = append(lists, tools)
				mu.Unlock()
			},
		})
		received := &noteLog{}
		client.AddNotificationHandler("notifications/tools/list_changed", func(ctx context.Context, cs *mcp.ClientSession, method string, params json.RawMessage) {
			received.add(method, params)
		})
		cs, err := client.Connect(ctx, e.url)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close(ctx)
		tap.hold("tools/list")
		desc := func(i int) string { return fmt.Sprintf("burst %d", i) }
		// One change at a time, each waiting for its notification, so
		// that the server sends one per change (it coalesces changes
		// between two of its checks) and all of them arrive while the
		// first re-list is held.
		for i := range changes {
			e.publishRegistry(t, "tools", "put", map[string]any{"name": "events_recent", "description": desc(i)})
			waitUntil(t, fmt.Sprintf("tools/list_changed %d", i+1), 1, func() bool { return len(received.all()) == i+1 })
		}
		tap.release()
		waitUntil(t, "a re-list that sees the last change", 1, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, l := range lists {
				for _, tl := range l {
					if tl.Name == "events_recent" && tl.Description == desc(changes-1) {
						return true
					}
				}
			}
			return false
		})
		time.Sleep(500 * time.Millisecond) // a third re-list would have started by now
		n := len(received.all())
		_, methods, _ := tap.snapshot()
		t.Logf("%d changes published, %d tools/list_changed received, %d re-lists", changes, n, methods["tools/list"])
		if n != changes {
			t.Fatalf("%d tools/list_changed arrived, want %d", n, changes)
		}
		if r := methods["tools/list"]; r < 1 || r > 2 {
			t.Errorf("%d re-lists for %d tools/list_changed, want 1 or 2", r, n)
		}
	})

	e.step(t, "resume after SIGKILL", func(t *testing.T) {
		tap := newWireTap()
		client := e.client(tap, &mcp.ClientOptions{})
		handled := &noteLog{}
		client.AddNotificationHandler("notifications/message", func(ctx context.Context, cs *mcp.ClientSession, method string, params json.RawMessage) {
			handled.add(method, params)
		})
		cs, err := client.Connect(ctx, e.url)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close(ctx)
		if err := cs.SetLoggingLevel(ctx, "info"); err != nil {
			t.Fatal(err)
		}
		if err := cs.Subscribe(ctx, "events://kill"); err != nil {
			t.Fatal(err)
		}
		n := 0
		publish := func() {
			e.publishEvent(t, "kill", n)
			n++
		}
		for i := range e.c.Len() {
			publish()
			waitUntil(t, fmt.Sprintf("event %d", n-1), 1, func() bool { return len(handled.all()) == n })
			// Whichever process holds the GET stream, one of these kills is it.
			if err := e.c.Kill(i); err != nil {
				t.Fatal(err)
			}
			publish()
			if err := e.c.Restart(i); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, fmt.Sprintf("event %d after killing process %d", n-1, i), 2, func() bool { return len(handled.all()) >= n })
		}
		publish()
		waitUntil(t, "the last event", 1, func() bool { return len(handled.all()) >= n })
		time.Sleep(300 * time.Millisecond) // duplicates would arrive meanwhile
		var got []int
		for _, h := range handled.all() {
			var p struct {
				Data struct {
					Payload struct {
						N int `json:"n"`
					} `json:"payload"`
				} `json:"data"`
			}
			json.Unmarshal([]byte(h.Params), &p)
			got = append(got, p.Data.Payload.N)
		}
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events handled across kills (-want +got):\n%s", diff)
		}
		_, _, resumes := tap.snapshot()
		t.Logf("GET stream resumed with Last-Event-ID %q", resumes)
		if len(resumes) == 0 {
			t.Error("the GET stream was never resumed with Last-Event-ID")
		}
	})
}

// syncWriter is a goroutine-safe io.Writer.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
)

// TestInteropTypeScriptSDK runs the TypeScript SDK 1.x client
// (@modelcontextprotocol/sdk: Client + StreamableHTTPClientTransport, in
// Node 22; test/node/interop/client.mjs) against three processes on one
// SQLite file behind the round-robin proxy. Every flow goes through the
// proxy, so consecutive requests of the session land on different
// processes, and the client sees pushes through its own notification
// handlers (setNotificationHandler).
func TestInteropTypeScriptSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping interop tests in -short mode")
	}
	node, script := requireInteropTS(t)
	e := startInterop(t)
	rec := newInteropRecorder()
	ts := startInteropTS(t, node, script, e.url, rec)
	t.Logf("TypeScript SDK %s on Node %s", ts.sdkVersion, ts.nodeVersion)

	var (
		sessionID string
		stream    interopStream
	)
	e.step(t, "initialize", func(t *testing.T) {
		var init struct {
			ServerInfo struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"serverInfo"`
			Capabilities    map[string]map[string]any `json:"capabilities"`
			ProtocolVersion string                    `json:"protocolVersion"`
			SessionID       string                    `json:"sessionId"`
		}
		// The gate holds the client's GET stream until the test knows
		// which process will serve it.
		ts.do(t, "gate", map[string]any{"open": false}, nil)
		ts.do(t, "connect", nil, &init)
		sessionID = init.SessionID
		if init.ServerInfo.Name != "mcpush" || init.ProtocolVersion != interopProtocol || sessionID == "" {
			t.Fatalf("connect: serverInfo %+v, protocol version %q, session %q; want mcpush, %s and a session",
				init.ServerInfo, init.ProtocolVersion, sessionID, interopProtocol)
		}
		interopRequireCaps(t, init.Capabilities)
		// The client opens its GET stream once initialized.
		stream = e.releaseGET(t, rec, ts, 0)
		t.Logf("the client's GET stream is on process %d", stream.backend)
		// A tool call on another process sees the session.
		var res interopToolResult
		ts.do(t, "callTool", map[string]any{"name": "session_info"}, &res)
		var info struct {
			SessionID       string `json:"sessionId"`
			ProtocolVersion string `json:"protocolVersion"`
			ClientName      string `json:"clientName"`
		}
		res.structured(t, &info)
		if info.SessionID != sessionID || info.ClientName != "interop-ts" || info.ProtocolVersion != interopProtocol {
			t.Errorf("session_info = %+v; want session %s, client interop-ts, %s", info, sessionID, interopProtocol)
		}
	})

	e.step(t, "list", func(t *testing.T) {
		var tools struct {
			Tools []struct {
				Name         string         `json:"name"`
				OutputSchema map[string]any `json:"outputSchema"`
			} `json:"tools"`
		}
		ts.do(t, "listTools", nil, &tools)
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
			if slices.Contains(interopBuiltinTools, tool.Name) && tool.OutputSchema == nil {
				t.Errorf("built-in tool %s has no outputSchema", tool.Name)
			}
		}
		interopRequireNames(t, "tools", names, append(slices.Clone(interopBuiltinTools), "test_tool_with_progress", "test_tool_with_logging"))

		var resources struct {
			Resources []struct {
				URI string `json:"uri"`
			} `json:"resources"`
		}
		ts.do(t, "listResources", nil, &resources)
		names = nil
		for _, r := range resources.Resources {
			names = append(names, r.URI)
		}
		interopRequireNames(t, "resources", names, []string{"test://static-text"})

		var templates struct {
			ResourceTemplates []struct {
				URITemplate string `json:"uriTemplate"`
			} `json:"resourceTemplates"`
		}
		ts.do(t, "listResourceTemplates", nil, &templates)
		names = nil
		for _, r := range templates.ResourceTemplates {
			names = append(names, r.URITemplate)
		}
		interopRequireNames(t, "resource templates", names, []string{"events://{topic}"})

		names = interopTSPromptNames(t, ts)
		interopRequireNames(t, "prompts", names, []string{"test_simple_prompt"})
	})

	e.step(t, "progress", func(t *testing.T) {
		id, done := ts.start("callTool", map[string]any{"name": "test_tool_with_progress", "progress": true})
		var res interopToolResult
		ts.wait(t, "callTool test_tool_with_progress", done, &res)
		p := interopProgress(rec.all(), id)
		if len(p) < 2 || p[len(p)-1] != 100 {
			t.Errorf("test_tool_with_progress: progress %v; want at least two values ending with 100", p)
		}
		interopRequireIncreasing(t, "test_tool_with_progress", p)

		// events_wait reports progress while it waits; the event published
		// meanwhile ends the wait.
		id, done = ts.start("callTool", map[string]any{"name": "events_wait", "progress": true,
			"arguments": map[string]any{"topic": "waits", "timeoutSeconds": 15}})
		rec.waitFor(t, "progress from events_wait", func(obs []interopObs) bool {
			return len(interopProgress(obs, id)) > 0
		})
		e.publishEvent(t, "waits", 1)
		ts.wait(t, "callTool events_wait", done, &res)
		interopRequireWait(t, &res)
		interopRequireIncreasing(t, "events_wait", interopProgress(rec.all(), id))
	})

	e.step(t, "logging", func(t *testing.T) {
		// At level warning the tool's info messages are not sent; the
		// level is stored with the session, whichever process serves the
		// next request.
		mark := len(rec.all())
		ts.do(t, "setLoggingLevel", map[string]any{"level": "warning"}, nil)
		ts.do(t, "callTool", map[string]any{"name": "test_tool_with_logging"}, nil)
		// The TypeScript client calls a notification handler before it
		// resolves the response that followed the notification.
		if logs := interopToolLogs(rec.all()[mark:]); len(logs) > 0 {
			t.Errorf("at level warning the client got %q", logs)
		}
		ts.do(t, "setLoggingLevel", map[string]any{"level": "info"}, nil)
		ts.do(t, "callTool", map[string]any{"name": "test_tool_with_logging"}, nil)
		interopRequireToolLogs(t, interopToolLogs(rec.all()[mark:]))
	})

	events := 0
	e.step(t, "subscribe", func(t *testing.T) {
		ts.do(t, "subscribe", map[string]any{"uri": "events://orders"}, nil)
		for events < 3 {
			events++
			e.publishEvent(t, "orders", events)
		}
		interopWaitEvents(t, rec, "orders", events)
		var read json.RawMessage
		ts.do(t, "readResource", map[string]any{"uri": "events://orders"}, &read)
		interopRequireTopicRead(t, "orders", events, read)
	})

	e.step(t, "list_changed", func(t *testing.T) {
		e.listChanged(t, rec, func(t *testing.T, change string) {
			switch change {
			case "tools put events_recent":
				type tool struct {
					Name        string `json:"name"`
					Description string `json:"description"`
				}
				var tools struct {
					Tools []tool `json:"tools"`
				}
				ts.do(t, "listTools", nil, &tools)
				i := slices.IndexFunc(tools.Tools, func(x tool) bool { return x.Name == "events_recent" })
				if i < 0 || tools.Tools[i].Description != interopToolDescription {
					t.Errorf("after the tools change, tools/list has %+v; want events_recent described %q", tools.Tools, interopToolDescription)
				}
			case "prompts put p1":
				interopRequireNames(t, "prompts", interopTSPromptNames(t, ts), []string{"p1"})
				var got struct {
					Messages []struct {
						Content struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"messages"`
				}
				ts.do(t, "getPrompt", map[string]any{"name": "p1", "arguments": map[string]any{"x": "there"}}, &got)
				if len(got.Messages) != 1 || got.Messages[0].Content.Text != "hi there" {
					t.Errorf("prompts/get p1 = %+v; want one message, hi there", got)
				}
			case "prompts delete p1":
				if names := interopTSPromptNames(t, ts); slices.Contains(names, "p1") {
					t.Errorf("after deleting p1, prompts/list has %v", names)
				}
			}
		})
	})

	e.step(t, "resume", func(t *testing.T) {
		events, stream = e.resume(t, rec, ts, stream, "orders", events)
		// One tools and three prompts changes so far (one made while the
		// stream was down), each notified once.
		interopRequireListChanged(t, rec.all(), 1, 3)
		// The session goes on.
		var res interopToolResult
		ts.do(t, "callTool", map[string]any{"name": "session_info"}, &res)
		interopRequireSubscribed(t, &res)
	})

	e.step(t, "sampling", func(t *testing.T) {
		// The server's sampling/createMessage goes out on the call's
		// stream; the client's answer reaches another process, which
		// hands it to the waiting tool through the store.
		mark := len(rec.all())
		var res interopToolResult
		ts.do(t, "callTool", map[string]any{"name": "test_sampling", "arguments": map[string]any{"prompt": interopSamplingPrompt}}, &res)
		interopRequireSampling(t, rec, mark, &res)
	})

	e.step(t, "reconnect", func(t *testing.T) {
		// The server closes the call's stream mid-call (SEP-1699); the
		// client resumes it with Last-Event-ID, on another process.
		mark := len(rec.all())
		var res interopToolResult
		ts.do(t, "callTool", map[string]any{"name": "test_reconnection"}, &res)
		interopRequireReconnected(t, rec, mark, &res)
	})

	e.step(t, "terminate", func(t *testing.T) {
		mark := len(rec.all())
		var term struct {
			SessionID string  `json:"sessionId"`
			After     *string `json:"after"`
		}
		ts.do(t, "terminate", nil, &term)
		if term.SessionID != sessionID || term.After != nil {
			t.Errorf("terminateSession: session %q, afterwards %v; want %s, none", term.SessionID, term.After, sessionID)
		}
		del := slices.IndexFunc(interopHTTP(rec.all(), mark), func(o interopObs) bool { return o.Method == "DELETE" })
		if del < 0 || interopHTTP(rec.all(), mark)[del].Status/100 != 2 {
			t.Errorf("no successful DELETE among %v", interopHTTP(rec.all(), mark))
		}
		e.requireSessionGone(t, sessionID)
		ts.do(t, "close", nil, nil)
	})
	interopRequireListChanged(t, rec.all(), 1, 3)
	interopWaitEvents(t, rec, "orders", events)
	for _, o := range rec.all() {
		if o.Unhandled {
			t.Errorf("the server sent a notification the client has no handler for: %s", o)
		}
	}
	// The client reports the broken GET stream (killed process) and its
	// own abort of the stream on close; nothing else.
	for _, msg := range interopErrors(rec.all()) {
		if !strings.HasPrefix(msg, "SSE stream disconnected: ") {
			t.Errorf("the TypeScript client reported an error: %s", msg)
		}
	}
	t.Logf("the client observed %d notifications and HTTP exchanges; total %v", len(rec.all()), time.Since(e.start).Round(time.Millisecond))
}

// requireInteropTS returns Node 22 and the client script, after checking
// that the TypeScript SDK is installed (testenv.RequireComponent: a skip,
// or a failure under CI=true).
func requireInteropTS(t *testing.T) (node, script string) {
	t.Helper()
	node = testenv.Node22(t)
	sdk := filepath.Join(testenv.NodeDir(t), "node_modules", "@modelcontextprotocol", "sdk", "package.json")
	_, err := os.Stat(sdk)
	testenv.RequireComponent(t, "@modelcontextprotocol/sdk (TypeScript SDK 1.x)", err)
	script = filepath.Join(testenv.RepoRoot(t), "test", "node", "interop", "client.mjs")
	if _, err := os.Stat(script); err != nil {
		t.Fatal(err)
	}
	return node, script
}

// interopTSClient drives test/node/interop/client.mjs: commands on its stdin,
// observations and results on its stdout.
type interopTSClient struct {
	sdkVersion, nodeVersion string

	stdin io.WriteCloser
	rec   *interopRecorder

	mu      sync.Mutex
	nextID  int
	pending map[int]chan interopTSResult
	exited  chan struct{} // closed when stdout ends
	stderr  strings.Builder
}

type interopTSResult struct {
	OK    bool            `json:"ok"`
	Value json.RawMessage `json:"value"`
	Error string          `json:"error"`
}

// startInteropTS starts the script and waits for it to be ready. When the
// test ends it closes the script's stdin and waits for it to exit.
func startInteropTS(t *testing.T, node, script, url string, rec *interopRecorder) *interopTSClient {
	t.Helper()
	c := &interopTSClient{rec: rec, pending: make(map[int]chan interopTSResult), exited: make(chan struct{})}
	cmd := exec.Command(node, script, url)
	cmd.Env = append(processEnv(), testenv.NodeDirEnv+"="+testenv.NodeDir(t))
	cmd.SysProcAttr = childProcAttr()
	cmd.Stderr = &interopLockedWriter{mu: &c.mu, w: &c.stderr}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.stdin = stdin
	ready := make(chan struct{})
	go c.read(stdout, ready)
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("TypeScript client: %v", err)
		}
		if t.Failed() {
			c.mu.Lock()
			t.Logf("TypeScript client stderr:\n%s\nobservations:\n%s", c.stderr.String(), interopDump(rec.all(), 200))
			c.mu.Unlock()
		}
	})
	select {
	case <-ready:
	case <-c.exited:
		c.mu.Lock()
		defer c.mu.Unlock()
		t.Fatalf("TypeScript client exited at start:\n%s", c.stderr.String())
	case <-time.After(interopWait):
		t.Fatal("TypeScript client not ready")
	}
	return c
}

// read parses the script's output lines.
func (c *interopTSClient) read(stdout io.Reader, ready chan struct{}) {
	defer close(c.exited)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line struct {
			Kind       string `json:"kind"`
			ID         int    `json:"id"`
			SDKVersion string `json:"sdkVersion"`
			Node       string `json:"node"`
			interopTSResult
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			c.rec.add(interopObs{Kind: "error", Message: fmt.Sprintf("unparsable output %q", sc.Text())})
			continue
		}
		switch line.Kind {
		case "ready":
			c.sdkVersion, c.nodeVersion = line.SDKVersion, line.Node
			close(ready)
		case "result":
			c.mu.Lock()
			ch := c.pending[line.ID]
			delete(c.pending, line.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- line.interopTSResult
			}
		default:
			var o interopObs
			json.Unmarshal(sc.Bytes(), &o)
			c.rec.add(o)
		}
	}
}

// start sends command op with args and returns its id and a channel for
// its result.
func (c *interopTSClient) start(op string, args map[string]any) (int, <-chan interopTSResult) {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan interopTSResult, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	cmd := map[string]any{}
	for k, v := range args {
		cmd[k] = v
	}
	cmd["id"], cmd["op"] = id, op
	line, _ := json.Marshal(cmd)
	if _, err := c.stdin.Write(append(line, '\n')); err != nil {
		ch <- interopTSResult{Error: "writing the command: " + err.Error()}
	}
	return id, ch
}

// wait waits for a command's result and decodes its value into v (if not
// nil), failing t on an error.
func (c *interopTSClient) wait(t *testing.T, what string, done <-chan interopTSResult, v any) {
	t.Helper()
	if err := c.waitErr(done, v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func (c *interopTSClient) waitErr(done <-chan interopTSResult, v any) error {
	select {
	case r := <-done:
		if !r.OK {
			return errors.New(r.Error)
		}
		if v != nil {
			if err := json.Unmarshal(r.Value, v); err != nil {
				return fmt.Errorf("decoding %s: %v", r.Value, err)
			}
		}
		return nil
	case <-c.exited:
		return errors.New("the TypeScript client exited")
	case <-time.After(interopWait):
		return fmt.Errorf("no result after %v", interopWait)
	}
}

// do runs command op and decodes its value into v.
func (c *interopTSClient) do(t *testing.T, op string, args map[string]any, v any) {
	t.Helper()
	_, done := c.start(op, args)
	c.wait(t, op, done, v)
}

// setGate implements interopGate.
func (c *interopTSClient) setGate(open bool) error {
	_, done := c.start("gate", map[string]any{"open": open})
	return c.waitErr(done, nil)
}

// interopTSPromptNames lists the prompts' names.
func interopTSPromptNames(t *testing.T, ts *interopTSClient) []string {
	t.Helper()
	var prompts struct {
		Prompts []struct {
			Name string `json:"name"`
		} `json:"prompts"`
	}
	ts.do(t, "listPrompts", nil, &prompts)
	var names []string
	for _, p := range prompts.Prompts {
		names = append(names, p.Name)
	}
	return names
}

// interopRequireCaps checks the server's declared capabilities.
func interopRequireCaps(t *testing.T, caps map[string]map[string]any) {
	t.Helper()
	for _, c := range []struct{ cap, key string }{
		{"tools", "listChanged"},
		{"prompts", "listChanged"},
		{"resources", "listChanged"},
		{"resources", "subscribe"},
		{"logging", ""},
	} {
		m, ok := caps[c.cap]
		if !ok || (c.key != "" && m[c.key] != true) {
			t.Errorf("server capabilities %v: want %s %s", caps, c.cap, c.key)
		}
	}
}

// interopLockedWriter serializes writes to w with mu.
type interopLockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *interopLockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

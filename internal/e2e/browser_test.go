package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
)

// The versions test/node/package.json pins.
const (
	inspectorVersion = "2.12.0"
	puppeteerVersion = "25.16.0"
)

// maxEventDelay bounds the time from sns-ingest's exit (the event is
// stored) to the Inspector showing it. An event over it is followed by one
// more, which must make it: a machine shared with other work (CI runs two
// test packages at once) may stall once; both delays are logged.
const maxEventDelay = 2 * time.Second

// browserTools are what the browser tests need: Chromium (Debian's
// chromium; .ci/run installs it), Node 22 and puppeteer-core from
// test/node. Under CI=true a missing one fails the test.
type browserTools struct {
	chromium, node, nodeDir string
}

func requireBrowser(t *testing.T) browserTools {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping browser tests in -short mode")
	}
	b := browserTools{chromium: testenv.Chromium(t), node: testenv.Node22(t), nodeDir: testenv.NodeDir(t)}
	testenv.NodePackage(t, "puppeteer-core", puppeteerVersion)
	return b
}

// startBrowserServer starts one production-built server process on a
// SQLite store with MCPUSH_ALLOWED_ORIGINS=origins and env, and returns it
// with its store.
func startBrowserServer(t *testing.T, origins string, env ...string) (*Cluster, string) {
	t.Helper()
	store := "sqlite:" + filepath.Join(t.TempDir(), "mcpush.db")
	c := StartCluster(t, 1, &ClusterOptions{
		Binary:    testenv.BuildBinary(t, "./functions/mcp"),
		Env:       append([]string{"MCPUSH_STORE=" + store, "MCPUSH_ALLOWED_ORIGINS=" + origins}, env...),
		ReadyPath: "/healthz",
	})
	return c, store
}

// runScript runs a script of test/node/browser with Node 22 and env, and
// returns its last output line (its JSON summary) decoded into out. The
// whole output is logged.
func (b browserTools) runScript(t *testing.T, name string, timeout time.Duration, out any, env ...string) {
	t.Helper()
	script := filepath.Join(testenv.RepoRoot(t), "test", "node", "browser", name)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.node, script)
	cmd.Env = append(processEnv(), testenv.NodeDirEnv+"="+b.nodeDir, "CHROMIUM="+b.chromium, "GORACE=atexit_sleep_ms=0")
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = childProcAttr()
	cmd.WaitDelay = 5 * time.Second
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s (%v):\n%s", name, time.Since(start).Round(time.Millisecond), buf.String())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), out); err != nil {
		t.Fatalf("%s: last line is not its JSON summary: %v", name, err)
	}
}

// syncBuffer is a bytes.Buffer for a process's output read while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// startInspector starts the MCP Inspector's web UI (npm
// @modelcontextprotocol/inspector) for the server at url in the protocol
// era given (legacy: 2025-11-25, modern: 2026-07-28), with an API token
// and a home directory of its own. The function it returns waits until
// the Inspector serves its page and returns the page's URL.
func (b browserTools) startInspector(t *testing.T, url, era string) (ready func() string) {
	t.Helper()
	dir := testenv.NodePackage(t, "@modelcontextprotocol/inspector", inspectorVersion)
	port := testenv.FreePort(t)
	token := make([]byte, 16)
	rand.Read(token)
	home := t.TempDir()
	cmd := exec.Command(b.node, filepath.Join(dir, "clients", "launcher", "build", "index.js"),
		"--web", "--transport", "http", "--server-url", url, "--protocol-era", era)
	cmd.Env = append(processEnv(),
		"HOME="+home, "MCP_STORAGE_DIR="+home,
		"CLIENT_PORT="+strconv.Itoa(port), "MCP_SANDBOX_PORT=0", "MCP_APP_ORIGIN_PORT=0",
		"MCP_INSPECTOR_API_TOKEN="+hex.EncodeToString(token),
		"MCP_AUTO_OPEN_ENABLED=false", "MCP_INSPECTOR_SECRET_STORE=memory")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = childProcAttr()
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the Inspector: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("Inspector (%s) output:\n%s", era, out.String())
		}
	})
	page := fmt.Sprintf("http://127.0.0.1:%d/", port)
	deadline := time.Now().Add(60 * time.Second)
	return func() string {
		t.Helper()
		for {
			if resp, err := http.Get(page); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return page + "?MCP_INSPECTOR_API_TOKEN=" + hex.EncodeToString(token)
				}
			}
			select {
			case err := <-exited:
				t.Fatalf("the Inspector exited: %v\n%s", err, out.String())
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Inspector did not serve %s within 60s:\n%s", page, out.String())
			}
		}
	}
}

// TestBrowserInspector drives the MCP Inspector 2.12.0 (test/node pins it)
// in headless Chromium against a local server (production build, SQLite),
// once per protocol era, as test/node/browser/inspector.mjs says: connect,
// list the tools, call session_info, read and subscribe to
// events://orders, run sns-ingest, and see the event in the Inspector
// within maxEventDelay of sns-ingest's exit: in the 2025 era its Logs show
// the event (notifications/message) and its Protocol view the
// notifications/resources/updated; in the 2026 era (Inspector
// --protocol-era modern: subscriptions/listen) the Protocol view shows the
// notifications/resources/updated and a refresh of the resource the event.
func TestBrowserInspector(t *testing.T) {
	b := requireBrowser(t)
	// The server runs with `make run`'s defaults (streams held until the
	// client leaves). The Inspectors reach it through a proxy that counts
	// their requests: after its first minute an idle Inspector makes at
	// most one request a minute (with the Lambda-style 5 s hold an idle
	// 2025-era GET stream was re-opened every second: 93 requests in 90 s).
	c, store := startBrowserServer(t, "")
	counter := newRequestCounter(t, c.URL(0))
	ingest := testenv.BuildBinary(t, "./functions/sns-ingest")
	eras := []struct{ era, version string }{{"legacy", "2025-11-25"}, {"modern", "2026-07-28"}}
	var ready []func() string
	for _, e := range eras { // both start at once
		ready = append(ready, b.startInspector(t, counter.url(e.era), e.era))
	}
	pages := make([]string, len(eras))
	for i := range eras {
		pages[i] = ready[i]()
	}
	shots := t.ArtifactDir()
	for i, e := range eras {
		t.Run(e.version, func(t *testing.T) {
			var got struct {
				Tools      []string `json:"tools"`
				ToolResult struct {
					ProtocolVersion string `json:"protocolVersion"`
					ClientName      string `json:"clientName"`
					SessionID       string `json:"sessionId"`
				} `json:"toolResult"`
				ConnectedAt        int64                  `json:"connectedAt"`
				IdleEndedAt        int64                  `json:"idleEndedAt"`
				Ingest             struct{ Accepted int } `json:"ingest"`
				ShownAfterIngestMs int64                  `json:"shownAfterIngestMs"`
				DelaysMs           []int64                `json:"delaysMs"`
				SawUpdated         bool                   `json:"sawUpdated"`
			}
			idle := ""
			if e.era == "legacy" { // the era that polled; one idle wait keeps the test short
				idle = "IDLE_MS=" + strconv.FormatInt((idleFirst+idleWindow).Milliseconds(), 10)
			}
			b.runScript(t, "inspector.mjs", 90*time.Second+idleFirst+idleWindow, &got,
				"INSPECTOR_URL="+pages[i], "ERA="+e.era, "SNS_INGEST="+ingest, "MCPUSH_STORE="+store, "SHOT_DIR="+shots, "MAX_DELAY_MS="+strconv.FormatInt(maxEventDelay.Milliseconds(), 10), idle)
			if idle != "" {
				from := time.UnixMilli(got.ConnectedAt).Add(idleFirst)
				to := time.UnixMilli(got.IdleEndedAt)
				n, all := counter.count(e.era, from, to)
				t.Logf("%s: the idle Inspector made %d requests to the server from %v to %v after connecting (%d in all)", e.version, n, idleFirst, to.Sub(time.UnixMilli(got.ConnectedAt)).Round(time.Second), all)
				if got.IdleEndedAt == 0 || to.Sub(from) < idleWindow-time.Second {
					t.Errorf("the Inspector was idle from %v to %v; want a window of %v", from, to, idleWindow)
				} else if n > 1 {
					t.Errorf("an idle Inspector made %d requests in the minute after its first; want at most 1", n)
				}
			}
			for _, tool := range []string{"events_recent", "events_wait", "session_info", "topics_list"} {
				if !strings.Contains(strings.Join(got.Tools, ","), tool) {
					t.Errorf("the Inspector lists tools %q; want %s among them", got.Tools, tool)
				}
			}
			if got.ToolResult.ProtocolVersion != e.version || got.ToolResult.ClientName != "mcp-inspector" || (e.era == "legacy") != (got.ToolResult.SessionID != "") {
				t.Errorf("session_info in the Inspector = %+v; want protocol %s, client mcp-inspector, a session only in 2025-11-25", got.ToolResult, e.version)
			}
			if got.Ingest.Accepted != 1 || !got.SawUpdated {
				t.Errorf("sns-ingest accepted %d, notifications/resources/updated seen %v; want 1 and true", got.Ingest.Accepted, got.SawUpdated)
			}
			delay := time.Duration(got.ShownAfterIngestMs) * time.Millisecond
			t.Logf("%s: the event showed in the Inspector %v after sns-ingest exited (all tries, ms: %v)", e.version, delay, got.DelaysMs)
			if delay > maxEventDelay {
				t.Errorf("the event showed %v after sns-ingest; want within %v", delay, maxEventDelay)
			}
		})
	}
}

// idleFirst and idleWindow: an idle Inspector's requests are counted
// over idleWindow, from idleFirst after it connected.
const (
	idleFirst  = time.Minute
	idleWindow = time.Minute
)

// requestCounter is a reverse proxy in front of the server that records
// when each request arrived, per path prefix (/<name>/mcp).
type requestCounter struct {
	base string
	mu   sync.Mutex
	at   map[string][]time.Time
}

func newRequestCounter(t *testing.T, target string) *requestCounter {
	t.Helper()
	u, err := neturl.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rc := &requestCounter{at: map[string][]time.Time{}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&neturl.URL{Scheme: u.Scheme, Host: u.Host})
			r.Out.URL.Path = u.Path
			r.Out.Host = u.Host
		},
		FlushInterval: -1, // SSE
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		rc.mu.Lock()
		rc.at[name] = append(rc.at[name], time.Now())
		rc.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	rc.base = ts.URL
	return rc
}

// url is the proxied server's URL for the client name.
func (rc *requestCounter) url(name string) string { return rc.base + "/" + name + "/mcp" }

// count returns how many of name's requests arrived from from to to, and
// how many arrived in all.
func (rc *requestCounter) count(name string, from, to time.Time) (n, all int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, at := range rc.at[name] {
		if !at.Before(from) && !at.After(to) {
			n++
		}
	}
	return n, len(rc.at[name])
}

// TestBrowserCORS serves test/node/browser/cors-page.html from three real
// HTTP servers on other ports, and has headless Chromium call the server
// from each with fetch (test/node/browser/cors.mjs): from the origin in
// MCPUSH_ALLOWED_ORIGINS a 2025-11-25 session (initialize with its
// Mcp-Session-Id read, tools/call, DELETE) and a 2026-07-28 stateless
// tools/call (Mcp-Method, Mcp-Name) succeed; from a localhost origin not
// in the list (served, but without CORS headers) and from 127.0.0.2
// (refused with 403) the browser refuses the calls. Without the server's
// CORS support the allowed page fails too (its preflight got 405).
func TestBrowserCORS(t *testing.T) {
	b := requireBrowser(t)
	html, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "test", "node", "browser", "cors-page.html"))
	if err != nil {
		t.Fatal(err)
	}
	serve := func(host string) string {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatalf("listening on %s: %v", host, err)
		}
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write(html)
		})}
		go hs.Serve(ln)
		t.Cleanup(func() { hs.Close() })
		return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	allowed := "http://localhost:" + serve("127.0.0.1")
	unlisted := "http://localhost:" + serve("127.0.0.1")
	foreign := "http://127.0.0.2:" + serve("127.0.0.2")
	c, _ := startBrowserServer(t, allowed)

	pages, _ := json.Marshal([]map[string]any{
		{"name": "allowed", "url": allowed + "/", "allowed": true},
		{"name": "unlisted", "url": unlisted + "/", "allowed": false},
		{"name": "foreign", "url": foreign + "/", "allowed": false},
	})
	var got map[string]struct {
		Origin     string `json:"origin"`
		Error      string `json:"error"`
		ServerName string `json:"serverName"`
		Session    string `json:"session"`
		Session25  struct {
			SessionID  string `json:"sessionId"`
			ClientName string `json:"clientName"`
		} `json:"session2025"`
		DeleteStatus int `json:"deleteStatus"`
		Stateless    struct {
			ProtocolVersion string `json:"protocolVersion"`
			ClientName      string `json:"clientName"`
		} `json:"stateless"`
	}
	b.runScript(t, "cors.mjs", 60*time.Second, &got, "MCP_URL="+c.URL(0), "PAGES="+string(pages))
	a := got["allowed"]
	if a.Origin != allowed || a.ServerName != "mcpush" || a.Session == "" || a.Session25.SessionID != a.Session || a.Session25.ClientName != "cors-page" ||
		a.DeleteStatus/100 != 2 || a.Stateless.ProtocolVersion != "2026-07-28" || a.Stateless.ClientName != "cors-page" {
		t.Errorf("the page on %s got %+v; want a session, its session_info, its DELETE and a 2026-07-28 call", allowed, a)
	}
	for _, name := range []string{"unlisted", "foreign"} {
		if got[name].Error == "" {
			t.Errorf("the page %s (%s) got through: %+v", name, got[name].Origin, got[name])
		}
	}
}

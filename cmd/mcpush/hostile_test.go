//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/hostile"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/internal/testutil"
)

// The tests of this file run the real CLI binary (built without -race,
// whose shadow memory would swamp what is measured) against an
// internal/hostile server and measure the process: its peak RSS (VmHWM
// from /proc, sampled, and ru_maxrss after it exits) and the requests the
// server counted.

// memoryCeiling kills a process measured here past it, to spare the
// shared machine: such a process has failed its bound already.
const memoryCeiling = 600 << 20

// cliProc is a CLI process under measurement.
type cliProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout io.ReadCloser // nil when stdout goes to out
	out    *testutil.LockedBuffer
	stderr *testutil.LockedBuffer
	peak   atomic.Int64 // bytes, the largest VmHWM sampled
	done   chan struct{}
}

// startCLI starts the CLI with args; pipe: the test reads its stdout.
func startCLI(t *testing.T, pipe bool, args ...string) *cliProc {
	t.Helper()
	_, err := os.Stat("/proc/self/status")
	testenv.RequireComponent(t, "/proc (to measure the CLI's memory)", err)
	bin := testenv.BuildBinaryNoRace(t, "./cmd/mcpush")
	p := &cliProc{t: t, out: &testutil.LockedBuffer{}, stderr: &testutil.LockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = []string{"PATH=/usr/bin:/bin"}
	p.cmd.Stderr = p.stderr
	if pipe {
		if p.stdout, err = p.cmd.StdoutPipe(); err != nil {
			t.Fatal(err)
		}
	} else {
		p.cmd.Stdout = p.out
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	go p.sample()
	return p
}

// sample records the process's VmHWM every 50ms until it exits, and kills
// it past memoryCeiling.
func (p *cliProc) sample() {
	path := fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)
	for {
		select {
		case <-p.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
		hwm, err := vmHWM(path)
		if err != nil {
			continue // exited
		}
		if hwm > p.peak.Load() {
			p.peak.Store(hwm)
		}
		if hwm > memoryCeiling {
			p.t.Errorf("the CLI's RSS reached %d MB; killed", hwm>>20)
			p.cmd.Process.Kill()
			return
		}
	}
}

// vmHWM reads the peak resident set size (bytes) from a /proc status file.
func vmHWM(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM")
}

// wait waits at most d for the process to exit and returns its exit code
// and peak RSS in bytes (the larger of the samples and ru_maxrss).
func (p *cliProc) wait(d time.Duration) (code int, peak int64) {
	p.t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-exited
		close(p.done)
		p.t.Fatalf("the CLI did not end within %v; stderr:\n%s", d, tail(p.stderr.String()))
	}
	close(p.done)
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		p.t.Fatal(err)
	}
	peak = p.peak.Load()
	if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		peak = max(peak, ru.Maxrss<<10) // kilobytes on Linux
	}
	return code, peak
}

// withURL puts --url url after the command of args.
func withURL(args []string, url string) []string {
	return append([]string{args[0], "--url", url}, args[1:]...)
}

func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

// TestWatchFloodMemory: a server floods watch with 64 KiB events as fast
// as it reads them, while watch's output is read slowly (200 KB/s), so its
// handler cannot keep up, for 15 s. The client's queue holds at most 1000
// notifications / 32 MiB and drops the rest: watch's peak RSS stays under
// 256 MB (unbounded, it grew past 1.4 GB), and watch says on stderr that
// it dropped notifications.
func TestWatchFloodMemory(t *testing.T) {
	// 15 s: under a full make test on 2 cores, 8 s was at times not
	// long enough for watch's first events_recent read to come back from
	// the flooded server (64 KB printed, no drop reported; 2 of 3 runs
	// on 2026-12-02), though it passes alone and under CPU load.
	const window = 15 * time.Second
	const bound = 256 << 20
	for _, era := range []string{"2025", "2026"} {
		t.Run(era, func(t *testing.T) {
			srv := hostile.Start(t, hostile.Flood, &hostile.Options{Topic: "flood"})
			p := startCLI(t, true, "watch", "--url", srv.URL, "--protocol", era, "--topic", "flood", "--json")
			// Read stdout slowly until the window ends, then at full speed
			// (Close runs what is queued).
			fast := make(chan struct{})
			var read atomic.Int64
			go func() {
				buf := make([]byte, 4<<10)
				for {
					n, err := p.stdout.Read(buf)
					read.Add(int64(n))
					if err != nil {
						return
					}
					select {
					case <-fast:
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()
			time.Sleep(window)
			close(fast)
			p.cmd.Process.Signal(os.Interrupt)
			code, peak := p.wait(60 * time.Second)
			stderr := p.stderr.String()
			t.Logf("%s era: peak RSS %d MB over %v of flood; %d KB of output read; exit %d", era, peak>>20, window, read.Load()>>10, code)
			if peak > bound {
				t.Errorf("peak RSS %d MB, want at most %d MB", peak>>20, bound>>20)
			}
			if !strings.Contains(stderr, "notifications dropped so far") {
				t.Errorf("watch did not report dropped notifications; stderr:\n%s", tail(stderr))
			}
			if read.Load() == 0 {
				t.Errorf("watch printed nothing; stderr:\n%s", tail(stderr))
			}
		})
	}
}

// TestToolsEndlessPages: tools/list pages of 1 MiB with a nextCursor
// each, without end, end with ErrListTooLarge's error after 32 MiB (the
// unbounded client reached 1.48 GB), under 300 MB; a 1 MiB nextCursor
// ends at once.
func TestToolsEndlessPages(t *testing.T) {
	for _, tc := range []struct {
		behavior hostile.Behavior
		want     string
	}{
		{hostile.Pages, "list too large: tools/list: 32 pages hold more than 33554432 bytes (ClientOptions.MaxListBytes)"},
		{hostile.BigCursor, "list too large: tools/list: page 1 has a nextCursor of 1048576 bytes, more than 4096"},
	} {
		t.Run(string(tc.behavior), func(t *testing.T) {
			srv := hostile.Start(t, tc.behavior, nil)
			p := startCLI(t, false, "tools", "--url", srv.URL)
			code, peak := p.wait(60 * time.Second)
			stderr := p.stderr.String()
			t.Logf("exit %d, peak RSS %d MB, %d tools/list requests; stderr: %s", code, peak>>20, srv.Count("POST tools/list"), strings.TrimSpace(stderr))
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, tc.want)
			}
			if peak > 300<<20 {
				t.Errorf("peak RSS %d MB, want under 300 MB", peak>>20)
			}
		})
	}
}

// TestRetryFloor: a server that ends every stream at once with "retry: 1"
// (1 ms) and a new event id. watch reopens its GET stream (2025) no more
// than twice a second (the 500 ms floor), and its listen stream (2026),
// which brings nothing but its acknowledgement, with a doubling delay;
// call, whose response never comes, resumes with a doubling delay and
// ends by --timeout. (Unbounded: 34,027 GETs and 18,721 listens in 30 s.)
func TestRetryFloor(t *testing.T) {
	const window = 10 * time.Second
	for _, tc := range []struct {
		name  string
		args  []string
		count func(*hostile.Server) int
		max   int
	}{
		{"watch 2025", []string{"watch", "--protocol", "2025", "--topic", "t"},
			func(s *hostile.Server) int { return s.Count("GET") + s.Count("GET resume") }, 3 * int(window/time.Second)},
		{"watch 2026", []string{"watch", "--protocol", "2026", "--topic", "t"},
			func(s *hostile.Server) int { return s.Count("POST subscriptions/listen") }, 10},
		{"call 2025", []string{"call", "--timeout", window.String(), "x"},
			func(s *hostile.Server) int { return s.Count("GET resume") }, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := hostile.Start(t, hostile.Retry, nil)
			p := startCLI(t, false, withURL(tc.args, srv.URL)...)
			start := time.Now()
			oneShot := tc.args[0] == "call"
			if !oneShot {
				time.Sleep(window)
				p.cmd.Process.Signal(os.Interrupt)
			}
			code, _ := p.wait(window + 30*time.Second)
			elapsed := time.Since(start)
			n := tc.count(srv)
			t.Logf("%s: %d stream requests in %v (%.1f/s), %d requests in all; exit %d", tc.name, n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), srv.Requests(), code)
			if n > tc.max {
				t.Errorf("%d stream requests in %v, want at most %d", n, elapsed, tc.max)
			}
			if n < 2 {
				t.Errorf("%d stream requests: the stream was not reopened", n)
			}
			if oneShot {
				if stderr := p.stderr.String(); code != 1 || !strings.Contains(stderr, "gave up after --timeout 10s") {
					t.Errorf("exit %d, stderr %q; want 1 and the --timeout error", code, stderr)
				}
			}
		})
	}
}

// TestOneShotBadStreams: tools and call end with an error, without -v,
// when the server answers with SSE events that are not JSON-RPC, or with
// a stream of notifications that never carries the response.
func TestOneShotBadStreams(t *testing.T) {
	for _, tc := range []struct {
		behavior hostile.Behavior
		args     []string
		want     string
	}{
		{hostile.Garbage, []string{"tools"}, "mcpush: mcp: tools/list: mcp: undecodable SSE event"},
		{hostile.Garbage, []string{"tools", "--protocol", "2026"}, "mcpush: mcp: tools/list: mcp: undecodable SSE event"},
		{hostile.Garbage, []string{"call", "x"}, "mcpush: mcp: tools/call: mcp: undecodable SSE event"},
		{hostile.RequestFlood, []string{"tools"}, "mcpush: mcp: tools/list: mcp: too many events on the stream of one request: more than 100000"},
		{hostile.RequestFlood, []string{"call", "--protocol", "2026", "x"}, "mcpush: mcp: tools/call: mcp: too many events on the stream of one request"},
	} {
		t.Run(string(tc.behavior)+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			srv := hostile.Start(t, tc.behavior, nil)
			p := startCLI(t, false, withURL(tc.args, srv.URL)...)
			start := time.Now()
			code, peak := p.wait(60 * time.Second)
			stderr := p.stderr.String()
			t.Logf("exit %d after %v, peak RSS %d MB", code, time.Since(start).Round(time.Millisecond), peak>>20)
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, tail(stderr), tc.want)
			}
		})
	}
}

// TestCrossOriginRedirect: a server that redirects to another origin (a
// second loopback server) does not get the client's --header there: the
// client refuses the redirect and says why. A redirect within the origin
// is followed, with the header.
func TestCrossOriginRedirect(t *testing.T) {
	target := hostile.Start(t, hostile.Normal, nil)
	redirector := hostile.Start(t, hostile.Redirect, &hostile.Options{RedirectTo: target.URL})
	old := strings.TrimSuffix(redirector.URL, "/mcp") + "/old"
	p := startCLI(t, false, "tools", "--url", old, "--header", "X-Api-Key: secret-key")
	code, _ := p.wait(30 * time.Second)
	stderr := p.stderr.String()
	t.Logf("exit %d: %s", code, strings.TrimSpace(stderr))
	if code != 1 || !strings.Contains(stderr, "redirect to another origin refused") {
		t.Errorf("exit %d, stderr %q; want 1 and the refused redirect", code, stderr)
	}
	if n := redirector.Count("POST"); n == 0 {
		t.Error("the redirecting server got no request")
	}
	var leaked int
	for _, h := range target.Headers() {
		if h.Get("X-Api-Key") != "" {
			leaked++
		}
	}
	if leaked > 0 || target.Requests() > 0 {
		t.Errorf("the other origin got %d requests, %d with the X-Api-Key header", target.Requests(), leaked)
	}

	same := hostile.Start(t, hostile.Redirect, nil)
	p = startCLI(t, false, "tools", "--url", strings.TrimSuffix(same.URL, "/mcp")+"/old", "--header", "X-Api-Key: secret-key")
	if code, _ := p.wait(30 * time.Second); code != 0 || !strings.Contains(p.out.String(), "events_recent") {
		t.Fatalf("same-origin redirect: exit %d, stdout %q, stderr %q", code, p.out.String(), p.stderr.String())
	}
	var with int
	for _, h := range same.Headers() {
		if h.Get("X-Api-Key") == "secret-key" {
			with++
		}
	}
	if n := same.Count("POST tools/list"); n != 1 || with != len(same.Headers()) {
		t.Errorf("same origin: %d tools/list, %d of %d requests with the header", n, with, len(same.Headers()))
	}
}

// TestWatchIdleTimeout: a server whose GET stream sends its first event
// and then nothing (a stopped process). watch --idle-timeout 1s cuts the
// silent stream and resumes it with that event's id as Last-Event-ID.
func TestWatchIdleTimeout(t *testing.T) {
	srv := hostile.Start(t, hostile.Stall, nil)
	p := startCLI(t, false, "watch", "--url", srv.URL, "--idle-timeout", "1s", "--topic", "t")
	deadline := time.Now().Add(20 * time.Second)
	for srv.Count("GET resume") < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	p.cmd.Process.Signal(os.Interrupt)
	code, _ := p.wait(30 * time.Second)
	var resumed []string
	for _, h := range srv.Headers() {
		if id := h.Get("Last-Event-ID"); id != "" {
			resumed = append(resumed, id)
		}
	}
	t.Logf("GETs %d, resumed with Last-Event-ID %q; exit %d", srv.Count("GET"), resumed, code)
	if len(resumed) < 2 || !strings.HasPrefix(resumed[0], "g") {
		t.Errorf("the stalled GET stream was resumed with %q, want twice with its event id; stderr:\n%s", resumed, tail(p.stderr.String()))
	}
}

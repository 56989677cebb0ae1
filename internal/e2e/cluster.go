// Package e2e runs mcpush the way it is deployed: several server processes
// sharing one store, behind a round-robin proxy that sends every request to
// the next process, with processes killed and restarted between requests.
// Its tests run the official MCP conformance suites against such clusters.
//
// The harness is plain Go: Cluster starts and restarts server processes,
// Proxy spreads requests over them, and RunConformance runs a conformance
// suite (Node.js, from test/node) and parses its results.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
)

// ServerBinaryEnv names an environment variable that, when set, is the path
// of a prebuilt server binary used instead of building ./functions/mcp.
const ServerBinaryEnv = "MCPUSH_E2E_SERVER"

// ServerBinary returns the server executable the tests run: the binary named
// by MCPUSH_E2E_SERVER (build it with -tags conformance), or ./functions/mcp
// built by testenv.BuildBinary with the conformance fixtures
// (MCPUSH_FIXTURES=conformance), which production builds leave out.
func ServerBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(ServerBinaryEnv); bin != "" {
		return bin
	}
	return testenv.BuildBinary(t, "./functions/mcp", "conformance")
}

// ClusterOptions configure StartCluster. A nil *ClusterOptions means all
// defaults.
type ClusterOptions struct {
	// Binary is the server executable; default ServerBinary(t).
	Binary string
	// Args are the command-line arguments of every process.
	Args []string
	// Env holds KEY=VALUE pairs added to every process's environment: the
	// test's environment without its MCPUSH_* variables, plus MCPUSH_ADDR.
	Env []string
	// ReadyPath, if set, is a path such as "/healthz" that must answer a GET
	// with 200 for a process to be ready; otherwise a process is ready once
	// its port accepts a TCP connection.
	ReadyPath string
	// ReadyTimeout bounds a process's start; default 30s.
	ReadyTimeout time.Duration
	// StopTimeout bounds a process's exit after SIGTERM or SIGKILL;
	// default 10s.
	StopTimeout time.Duration
}

// Cluster is a set of server processes, each on its own fixed port on
// 127.0.0.1, all with the same configuration. A process keeps its port
// across restarts. The output (stdout and stderr) of each process is kept
// for the test and printed when the test fails.
//
// The methods of a Cluster must be called one at a time; they report
// errors instead of failing a test, so subtests may use a cluster that
// their parent started.
type Cluster struct {
	opts  ClusterOptions
	dir   string // working directory of the processes
	procs []*process

	stopped bool
}

// process is one slot of a Cluster: a port and the current OS process.
type process struct {
	index int
	addr  string
	log   *logSink

	// Replaced by each start.
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited and err is set
	err    error         // cmd.Wait's result
	killed bool          // the harness killed it on purpose
}

// StartCluster starts n server processes and waits until all are ready;
// the test fails if they cannot be started. The processes are stopped
// (Stop) when the test ends, failing it if they do not exit cleanly, and
// their logs are printed if it failed.
func StartCluster(t testing.TB, n int, opts *ClusterOptions) *Cluster {
	t.Helper()
	c, err := startCluster(t, n, opts)
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	return c
}

func startCluster(t testing.TB, n int, opts *ClusterOptions) (*Cluster, error) {
	t.Helper()
	c := &Cluster{dir: t.TempDir()}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.Binary == "" {
		c.opts.Binary = ServerBinary(t)
	}
	if c.opts.ReadyTimeout == 0 {
		c.opts.ReadyTimeout = 30 * time.Second
	}
	if c.opts.StopTimeout == 0 {
		c.opts.StopTimeout = 10 * time.Second
	}
	logDir := t.ArtifactDir()
	for i := range n {
		c.procs = append(c.procs, &process{
			index: i,
			addr:  net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t))),
			log:   newLogSink(t, filepath.Join(logDir, fmt.Sprintf("server-%d.log", i))),
		})
	}
	// Cleanups run last-registered first: Stop, then the logs.
	t.Cleanup(func() {
		if t.Failed() {
			c.DumpLogs(t, nil, 300)
		}
	})
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("e2e: %v", err)
		}
	})

	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, p := range c.procs {
		wg.Go(func() { errs[i] = c.start(p) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, p := range c.procs {
			c.kill(p) // already reported
		}
		c.stopped = true
		return nil, fmt.Errorf("starting %d server processes: %w", n, err)
	}
	return c, nil
}

// Len returns the number of processes.
func (c *Cluster) Len() int { return len(c.procs) }

// Pid returns the process id of server process i (its current run).
func (c *Cluster) Pid(i int) int {
	if cmd := c.procs[i].cmd; cmd != nil && cmd.Process != nil {
		return cmd.Process.Pid
	}
	return 0
}

// Addr returns the host:port of process i.
func (c *Cluster) Addr(i int) string { return c.procs[i].addr }

// URL returns the MCP endpoint of process i, http://ADDR/mcp.
func (c *Cluster) URL(i int) string { return "http://" + c.procs[i].addr + "/mcp" }

// PID returns the operating-system process id of process i (0 if it is
// not running).
func (c *Cluster) PID(i int) int {
	if cmd := c.procs[i].cmd; cmd != nil && cmd.Process != nil {
		return cmd.Process.Pid
	}
	return 0
}

// BaseURLs returns http://ADDR of every process, for a Proxy.
func (c *Cluster) BaseURLs() []string {
	urls := make([]string, len(c.procs))
	for i, p := range c.procs {
		urls[i] = "http://" + p.addr
	}
	return urls
}

// Kill sends SIGKILL to process i and waits for it to exit. It reports an
// error if the process had already exited without being killed, or does
// not exit within StopTimeout.
func (c *Cluster) Kill(i int) error {
	return c.kill(c.procs[i])
}

// Terminate sends SIGTERM to process i and waits for it to exit, as Stop
// does: it reports an error if the process does not exit cleanly within
// StopTimeout. Stop does not report the process again; Restart starts it
// again.
func (c *Cluster) Terminate(i int) error {
	p := c.procs[i]
	err := c.stop(p)
	p.killed = true // ended on purpose
	return err
}

// Restart starts process i again on the same port, first killing it
// (SIGKILL) if it is running, and waits until it is ready.
func (c *Cluster) Restart(i int) error {
	p := c.procs[i]
	if err := c.kill(p); err != nil {
		return err
	}
	return c.start(p)
}

// Stop sends SIGTERM to every running process and waits for them to exit.
// It reports an error for each process that does not exit within
// StopTimeout (it is then killed), exits with a non-zero status, or had
// exited on its own before. Stop is idempotent; StartCluster arranges for
// it to run when the test ends and to fail the test on error.
func (c *Cluster) Stop() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	var wg sync.WaitGroup
	errs := make([]error, len(c.procs))
	for i, p := range c.procs {
		wg.Go(func() { errs[i] = c.stop(p) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Mark returns a position in every process's log, for DumpLogs.
func (c *Cluster) Mark() []int {
	marks := make([]int, len(c.procs))
	for i, p := range c.procs {
		marks[i] = p.log.Mark()
	}
	return marks
}

// DumpLogs writes to t's log the output each process produced since marks
// (from Mark; nil means from the start), at most limit lines per process.
func (c *Cluster) DumpLogs(t testing.TB, marks []int, limit int) {
	t.Helper()
	for i, p := range c.procs {
		mark := 0
		if marks != nil {
			mark = marks[i]
		}
		p.log.dump(t, fmt.Sprintf("server process %d (%s)", i, p.addr), mark, limit)
	}
}

func (c *Cluster) start(p *process) error {
	cmd := exec.Command(c.opts.Binary, c.opts.Args...)
	cmd.Dir = c.dir
	cmd.Env = append(processEnv(), "MCPUSH_ADDR="+p.addr)
	cmd.Env = append(cmd.Env, c.opts.Env...)
	cmd.Stdout = p.log
	cmd.Stderr = p.log
	cmd.WaitDelay = 2 * time.Second
	cmd.SysProcAttr = childProcAttr()
	p.log.Printf("starting %s on %s", filepath.Base(c.opts.Binary), p.addr)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("process %d: %w", p.index, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.err, p.killed = cmd, exited, nil, false
	go func() {
		err := cmd.Wait()
		p.log.Printf("exited: %v", exitStatus(err))
		p.err = err // published by close(exited)
		close(exited)
	}()

	start := time.Now()
	deadline := start.Add(c.opts.ReadyTimeout)
	for {
		if c.ready(p) {
			p.log.Printf("ready after %v", time.Since(start).Round(time.Millisecond))
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("process %d on %s exited before it was ready: %s%s",
				p.index, p.addr, exitStatus(p.err), c.tail(p))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d on %s not ready after %v%s",
				p.index, p.addr, c.opts.ReadyTimeout, c.tail(p))
		}
	}
}

// tail formats the last lines of p's log for an error message.
func (c *Cluster) tail(p *process) string {
	lines, _ := p.log.Since(0, 20)
	if len(lines) == 0 {
		return ""
	}
	return "; last output:\n\t" + strings.Join(lines, "\n\t")
}

func (c *Cluster) ready(p *process) bool {
	if c.opts.ReadyPath == "" {
		conn, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+c.opts.ReadyPath, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// kill kills p if it is running and waits for it to exit.
func (c *Cluster) kill(p *process) error {
	if p.cmd == nil {
		return nil
	}
	select {
	case <-p.exited:
		if !p.killed {
			return fmt.Errorf("process %d had exited on its own: %s", p.index, exitStatus(p.err))
		}
		return nil
	default:
	}
	p.killed = true
	p.log.Printf("sending SIGKILL")
	p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.exited:
		return nil
	case <-time.After(c.opts.StopTimeout):
		return fmt.Errorf("process %d did not exit %v after SIGKILL", p.index, c.opts.StopTimeout)
	}
}

// stop terminates p with SIGTERM and checks that it exits cleanly.
func (c *Cluster) stop(p *process) error {
	if p.cmd == nil {
		return nil
	}
	select {
	case <-p.exited:
		if p.killed {
			return nil
		}
		return fmt.Errorf("process %d had exited on its own: %s%s", p.index, exitStatus(p.err), c.tail(p))
	default:
	}
	p.log.Printf("sending SIGTERM")
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(c.opts.StopTimeout):
		p.killed = true
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("process %d did not exit within %v of SIGTERM (killed)%s", p.index, c.opts.StopTimeout, c.tail(p))
	}
	if p.err != nil {
		msg := fmt.Sprintf("process %d exited with %s after SIGTERM, want status 0", p.index, exitStatus(p.err))
		if p.log.Contains("WARNING: DATA RACE") {
			msg += " (the race detector reported a data race; see its log)"
		}
		return fmt.Errorf("%s%s", msg, c.tail(p))
	}
	return nil
}

// exitStatus describes the result of exec.Cmd.Wait.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// processEnv returns the test's environment without MCPUSH_* variables, so
// a developer's own configuration cannot leak into the processes.
func processEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPUSH_") {
			env = append(env, kv)
		}
	}
	return env
}

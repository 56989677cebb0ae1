package e2e

// The mcpush CLI (cmd/mcpush) against three mcpush processes behind the
// round-robin proxy: `mcpush watch --json` prints exactly the events
// published through sns-ingest, once each and in order, while processes
// are killed and the whole server is down and restarted.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/testenv"
)

// lineCollector keeps the lines a process prints.
type lineCollector struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineCollector) collect(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l.mu.Lock()
		l.lines = append(l.lines, sc.Text())
		l.mu.Unlock()
	}
}

func (l *lineCollector) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func TestCLIWatch(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the multi-process CLI test")
	}
	// 2025: the GET stream resumes with Last-Event-ID. 2026: the listen
	// stream replays nothing, and watch reads what it missed from
	// events_recent.
	for _, protocol := range []string{"2025", "2026"} {
		t.Run(protocol, func(t *testing.T) { testCLIWatch(t, protocol) })
	}
}

func testCLIWatch(t *testing.T, protocol string) {
	e := startInterop(t)
	cli := testenv.BuildBinary(t, "./cmd/mcpush")
	ctx, cancel := context.WithTimeout(t.Context(), 10*interopWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "-v", "watch", "--protocol", protocol, "--json", "--topic", "w1", "--topic", "w2")
	cmd.Env = append(processEnv(), "MCPUSH_URL="+e.url, interopGORACE())
	cmd.SysProcAttr = childProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out, errs := &lineCollector{}, &lineCollector{}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); out.collect(stdout) }()
	go func() { defer wg.Done(); errs.collect(stderr) }()
	defer func() {
		cmd.Process.Signal(syscall.SIGINT)
		wg.Wait()
		cmd.Wait()
		if t.Failed() {
			t.Logf("mcpush watch stderr:\n%s", strings.Join(errs.all(), "\n"))
		}
	}()
	waitUntil(t, "mcpush watch to subscribe", 1, func() bool {
		return strings.Contains(strings.Join(errs.all(), "\n"), "watching")
	})

	type printed struct {
		Type     string `json:"type"`
		Topic    string `json:"topic"`
		Sequence int64  `json:"sequence"`
		Data     struct {
			N int `json:"n"`
		} `json:"data"`
		List string `json:"list"`
	}
	var want []printed
	seq := map[string]int64{}
	n := 0
	publish := func(topic string) {
		e.publishEvent(t, topic, n)
		seq[topic]++
		p := printed{Type: "event", Topic: topic, Sequence: seq[topic]}
		p.Data.N = n
		want = append(want, p)
		n++
	}
	waitPrinted := func(what string) {
		t.Helper()
		waitUntil(t, what, 3, func() bool { return len(out.all()) >= len(want) })
	}

	publish("w1")
	publish("w2")
	publish("w1")
	waitPrinted("the first events")
	// One process, maybe the one holding the stream, dies and comes back.
	for i := range e.c.Len() {
		if err := e.c.Kill(i); err != nil {
			t.Fatal(err)
		}
		publish("w2")
		if err := e.c.Restart(i); err != nil {
			t.Fatal(err)
		}
		waitPrinted(fmt.Sprintf("the events after killing process %d", i))
	}
	// The whole server goes down; events published meanwhile are not lost.
	for i := range e.c.Len() {
		if err := e.c.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	publish("w1")
	publish("w2")
	for i := range e.c.Len() {
		if err := e.c.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	publish("w1")
	waitPrinted("the events published while the server was down")
	e.publishRegistry(t, "tools", "put", map[string]any{"name": "events_recent", "description": "changed by the CLI test"})
	tools := printed{Type: "list_changed", List: "tools"}
	want = append(want, tools)
	waitPrinted("tools/list_changed")
	time.Sleep(500 * time.Millisecond) // anything printed twice would show by now

	var got []printed
	for _, line := range out.all() {
		var p printed
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("not one JSON object per line: %q: %v", line, err)
		}
		got = append(got, p)
	}
	// Each topic's events in order, each once; the order across topics
	// is the server's to choose.
	byTopic := func(ps []printed) map[string][]printed {
		m := map[string][]printed{}
		for _, p := range ps {
			m[p.Type+" "+p.Topic+p.List] = append(m[p.Type+" "+p.Topic+p.List], p)
		}
		return m
	}
	if diff := cmp.Diff(byTopic(want), byTopic(got)); diff != "" {
		t.Errorf("mcpush watch --json output by topic (-published +printed):\n%s", diff)
	}
	if len(got) != len(want) {
		t.Errorf("%d lines printed, want %d:\n%s", len(got), len(want), strings.Join(out.all(), "\n"))
	}
}

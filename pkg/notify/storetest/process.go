package storetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// The parent passes a child its work in the environment:
// envChild=<role>:<dsn> and envArgs=<JSON of childArgs>.
const (
	envChild = "MCPUSH_STORETEST_CHILD"
	envArgs  = "MCPUSH_STORETEST_ARGS"

	roleWriter = "writer"

	// Lines a child writes to stdout for the parent start with linePrefix.
	linePrefix  = "storetest-child: "
	lineReady   = linePrefix + "ready"
	lineResult  = linePrefix + "result "
	childCount  = 40 // appends of each kind per child
	childProcs  = 3
	childTimout = 60 * time.Second
)

type childArgs struct {
	ID      int    `json:"id"`
	Session string `json:"session"`
	Topic   string `json:"topic"`
	Count   int    `json:"count"`
}

// childResult reports which of the races a child won.
type childResult struct {
	CASAppended  bool `json:"casAppended"`
	PutCreated   bool `json:"putCreated"`
	TopicCreated bool `json:"topicCreated"`
}

// RunChild must be called first thing from TestMain of an implementation's
// test package: when the process was started by the suite as a child
// writer, it does the child's work and exits; otherwise it returns.
//
// A child opens the backing database with open, tells the parent it is
// ready, waits for the parent's go-ahead on stdin, and then appends to one
// session's stream and to one topic, and races the other children in a
// NotifiedHash CAS, a PutMessage, an AppendTopicEvent with a shared message
// id and an ApplyRegistry. It inherits the parent's environment.
func RunChild(open Opener) {
	v, ok := os.LookupEnv(envChild)
	if !ok {
		return
	}
	role, dsn, _ := strings.Cut(v, ":")
	var err error
	switch role {
	case roleWriter:
		err = runWriter(open, dsn)
	default:
		err = fmt.Errorf("unknown role %q in %s", role, envChild)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "storetest child (%s): %v\n", v, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runWriter(open Opener, dsn string) (err error) {
	var args childArgs
	if err := json.Unmarshal([]byte(os.Getenv(envArgs)), &args); err != nil {
		return fmt.Errorf("decoding %s: %w", envArgs, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), childTimout)
	defer cancel()
	st, err := open(dsn)
	if err != nil {
		return fmt.Errorf("open(%q): %w", dsn, err)
	}
	defer func() { err = errors.Join(err, st.Close()) }()

	fmt.Println(lineReady)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the parent: %w", err)
	}

	var res childResult
	me := fmt.Sprintf("c%d", args.ID)
	for j := range args.Count {
		if j == args.Count/2 {
			_, res.CASAppended, err = st.Append(ctx, args.Session, "cas", bytesOf(me), &notify.AppendOptions{
				NotifiedHash: &notify.HashCAS{Registry: notify.RegistryTools, Old: "", New: "h-" + me}})
			if err != nil {
				return fmt.Errorf("Append(cas): %w", err)
			}
			if res.PutCreated, err = st.PutMessage(ctx, args.Session, "shared", []byte(me)); err != nil {
				return fmt.Errorf("PutMessage: %w", err)
			}
			if _, res.TopicCreated, err = st.AppendTopicEvent(ctx, args.Topic, "shared", time.Now(), json.RawMessage(`"`+me+`"`)); err != nil {
				return fmt.Errorf("AppendTopicEvent(shared): %w", err)
			}
			if _, ok, err := st.ApplyRegistry(ctx, notify.RegistryPrompts, notify.OpPut, childItems(me), me); err != nil || !ok {
				return fmt.Errorf("ApplyRegistry = %t, %w", ok, err)
			}
		}
		id := fmt.Sprintf("%s-%d", me, j)
		if _, ok, err := st.Append(ctx, args.Session, "procs", bytesOf(id), nil); err != nil || !ok {
			return fmt.Errorf("Append(%q) = %t, %w", id, ok, err)
		}
		if _, ok, err := st.AppendTopicEvent(ctx, args.Topic, id, time.Now(), json.RawMessage(`{}`)); err != nil || !ok {
			return fmt.Errorf("AppendTopicEvent(%q) = %t, %w", id, ok, err)
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Println(lineResult + string(b))
	return nil
}

func childItems(me string) items {
	return items{me: json.RawMessage(`{"name":"` + me + `"}`)}
}

// child is a child process started by testProcesses.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Scanner
	stderr bytes.Buffer // read only after cmd.Wait
	other  []string     // stdout lines not meant for the parent
	waited bool
	err    error // of cmd.Wait
}

func (c *child) wait() error {
	if !c.waited {
		c.waited = true
		c.err = c.cmd.Wait()
	}
	return c.err
}

// failure describes a child that did not do its part.
func (c *child) failure(what string) string {
	err := c.wait()
	msg := fmt.Sprintf("child %s: %s (exit: %v)\nstderr:\n%s", c.cmd.Env[len(c.cmd.Env)-1], what, err, c.stderr.String())
	if len(c.other) > 0 {
		msg += "stdout:\n" + strings.Join(c.other, "\n")
	}
	return msg
}

// next returns the next line of the child's stdout that starts with
// linePrefix, or false at EOF.
func (c *child) next() (string, bool) {
	for c.stdout.Scan() {
		line := c.stdout.Text()
		if strings.HasPrefix(line, linePrefix) {
			return line, true
		}
		c.other = append(c.other, line)
	}
	return "", false
}

// testProcesses runs childProcs child processes that write to one backing
// database at once, and checks the result as testConcurrent* do.
func testProcesses(t *testing.T, s *suite) {
	st, dsn := s.storeDSN(t)
	ctx := t.Context()
	const session, topic = "proc", "orders"
	createSession(t, st, session)

	cctx, cancel := context.WithTimeout(ctx, childTimout)
	var children []*child
	t.Cleanup(func() {
		cancel()
		for _, c := range children {
			c.wait()
		}
	})
	for i := range childProcs {
		args, err := json.Marshal(childArgs{ID: i, Session: session, Topic: topic, Count: childCount})
		if err != nil {
			t.Fatal(err)
		}
		c := &child{cmd: exec.CommandContext(cctx, os.Args[0], "-test.run=^$", "-test.count=1")}
		c.cmd.Env = append(os.Environ(), envChild+"="+roleWriter+":"+dsn, envArgs+"="+string(args))
		c.cmd.Stderr = &c.stderr
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		stdout, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.stdout = bufio.NewScanner(stdout)
		if err := c.cmd.Start(); err != nil {
			t.Fatalf("starting child %d: %v", i, err)
		}
		children = append(children, c)
	}
	for _, c := range children {
		if line, ok := c.next(); !ok || line != lineReady {
			t.Fatal(c.failure("exited before it was ready; does TestMain call storetest.RunChild first?"))
		}
	}
	for _, c := range children {
		io.WriteString(c.stdin, "go\n")
		c.stdin.Close()
	}
	results := make([]childResult, len(children))
	for i, c := range children {
		line, ok := c.next()
		if !ok || !strings.HasPrefix(line, lineResult) {
			t.Fatal(c.failure("exited without a result"))
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, lineResult)), &results[i]); err != nil {
			t.Fatalf("child %d: bad result %q: %v", i, line, err)
		}
		for c.stdout.Scan() {
			c.other = append(c.other, c.stdout.Text())
		}
		if err := c.wait(); err != nil {
			t.Fatal(c.failure("failed"))
		}
	}

	// The stream: 1..N, each child's events in its order.
	total := childProcs * childCount
	evs := readEvents(t, st, session, "procs", 0, total+10)
	if len(evs) != total {
		t.Fatalf("ReadEvents(procs): %d events, want %d", len(evs), total)
	}
	next := make(map[string]int) // child -> next j
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("ReadEvents(procs): event %d has Seq %d, want %d", i, ev.Seq, i+1)
		}
		me, j, _ := strings.Cut(string(ev.Data), "-")
		if want := fmt.Sprint(next[me]); j != want {
			t.Errorf("event %d is %q, want %s-%s next", ev.Seq, ev.Data, me, want)
		}
		next[me]++
	}

	// Exactly one winner of each race, and its write is the one stored.
	winner := func(what string, won func(childResult) bool) string {
		var winners []string
		for i, r := range results {
			if won(r) {
				winners = append(winners, fmt.Sprintf("c%d", i))
			}
		}
		if len(winners) != 1 {
			t.Errorf("%s: winners %q, want exactly one", what, winners)
			return ""
		}
		return winners[0]
	}
	casWinner := winner("NotifiedHash CAS", func(r childResult) bool { return r.CASAppended })
	if diff := cmp.Diff(events(1, casWinner), readEvents(t, st, session, "cas", 0, 10), cmpOpts); diff != "" {
		t.Errorf("CAS stream mismatch (-want +got):\n%s", diff)
	}
	if got := getSession(t, st, session).NotifiedHashes[notify.RegistryTools]; got != "h-"+casWinner {
		t.Errorf("NotifiedHashes[tools] = %q, want %q", got, "h-"+casWinner)
	}
	putWinner := winner("PutMessage", func(r childResult) bool { return r.PutCreated })
	if got, err := st.GetMessage(ctx, session, "shared"); err != nil || string(got) != putWinner {
		t.Errorf("GetMessage(shared) = %q, %v; want %q", got, err, putWinner)
	}
	winner("AppendTopicEvent(shared)", func(r childResult) bool { return r.TopicCreated })

	// The topic: 1..N+1, every message id once.
	tevs, err := st.ReadTopicEvents(ctx, topic, 0, total+10)
	if err != nil {
		t.Fatal(err)
	}
	if len(tevs) != total+1 {
		t.Fatalf("ReadTopicEvents: %d events, want %d", len(tevs), total+1)
	}
	ids := make(map[string]bool)
	for i, ev := range tevs {
		if ev.Seq != int64(i+1) || ids[ev.MessageID] {
			t.Fatalf("ReadTopicEvents: event %d is Seq %d, message id %q (seen before: %t)", i, ev.Seq, ev.MessageID, ids[ev.MessageID])
		}
		ids[ev.MessageID] = true
	}

	// The registry: every child's put.
	want := make(items)
	for i := range childProcs {
		for k, v := range childItems(fmt.Sprintf("c%d", i)) {
			want[k] = v
		}
	}
	reg, err := st.GetRegistry(ctx, notify.RegistryPrompts)
	if err != nil {
		t.Fatal(err)
	}
	checkRegistry(t, "GetRegistry(prompts)", reg, notify.RegistryPrompts, want)
}

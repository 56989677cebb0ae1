package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// docCommand is how the docs run the ingest CLI: from the repository
// root, with go run.
const docCommand = "go run ./functions/sns-ingest"

// docCommands returns the shell commands of the sh code blocks of the
// Markdown text md that run docCommand: each from its line (with any
// VAR=value before it) to the line that closes its last single quote.
func docCommands(md string) []string {
	var cmds []string
	in := false
	var cur []string
	for line := range strings.Lines(md) {
		line = strings.TrimRight(line, "\n")
		switch {
		case !in && strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case in && strings.HasPrefix(line, "```"):
			in, cur = false, nil
			continue
		case !in:
			continue
		}
		if cur == nil && !strings.Contains(line, docCommand) {
			continue
		}
		cur = append(cur, line)
		if cmd := strings.Join(cur, "\n"); strings.Count(cmd, "'")%2 == 0 {
			cmds = append(cmds, cmd)
			cur = nil
		}
	}
	return cmds
}

// TestEventsDocCommands: every `go run ./functions/sns-ingest` command of
// docs/events.md runs as written (its environment prefix included) from
// a fresh directory without MCPUSH_STORE, as from a checkout with `make
// run`'s default store, exits 0 with its record accepted, and the store
// then holds the event type order.created and the events on topic orders.
func TestEventsDocCommands(t *testing.T) {
	root := testenv.RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "functions", "sns-ingest", "main.go")); err != nil {
		t.Fatalf("%s names no main package: %v", docCommand, err)
	}
	md, err := os.ReadFile(filepath.Join(root, "docs", "events.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := docCommands(string(md))
	if len(cmds) < 3 {
		t.Fatalf("docs/events.md: %d %s commands; the extraction is broken", len(cmds), docCommand)
	}
	dir := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPUSH_") {
			env = append(env, kv)
		}
	}
	events := 0
	for _, c := range cmds {
		script := strings.Replace(c, docCommand, "env SNS_INGEST_TEST_MAIN=1 '"+os.Args[0]+"'", 1)
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var sum struct {
			Accepted, Rejected, Failed int
		}
		if err != nil || json.Unmarshal(out, &sum) != nil || sum.Accepted != 1 || sum.Rejected+sum.Failed != 0 {
			t.Errorf("%s\n: %v, stdout %s\nstderr:\n%s", c, err, out, stderr.String())
		}
		if strings.Contains(c, "-topic orders") {
			events++
		}
	}
	store, err := sqlitestore.New(filepath.Join(dir, ".mcpush", "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	reg, err := store.GetRegistry(ctx, notify.RegistryEvents)
	if err != nil || reg.Items["order.created"] == nil {
		t.Errorf("the event type: %+v, %v", reg, err)
	}
	evs, err := store.ReadTopicEvents(ctx, "orders", 0, 100)
	if err != nil || len(evs) != events || events == 0 {
		t.Errorf("topic orders: %d events (%v), want %d", len(evs), err, events)
	}
}

// TestDocCommands: the extraction takes multi-line quoted commands whole,
// with their environment prefix, and nothing outside sh blocks.
func TestDocCommands(t *testing.T) {
	md := "go run ./functions/sns-ingest -topic x -message m\n" +
		"```sh\n" +
		"mcpush events list\n" +
		"go run ./functions/sns-ingest -topic a -message '{\n  \"b\": 1}'\n" +
		"X=1 go run ./functions/sns-ingest -topic c -message 'd'   # a comment\n" +
		"```\n"
	got := docCommands(md)
	want := []string{
		"go run ./functions/sns-ingest -topic a -message '{\n  \"b\": 1}'",
		"X=1 go run ./functions/sns-ingest -topic c -message 'd'   # a comment",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("docCommands:\n%q\nwant\n%q", got, want)
	}
}

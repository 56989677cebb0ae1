package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpush/mcpush/internal/testenv"
)

// shellWords splits a command line as sh would for the simple lines of
// the docs: words separated by blanks, '…' and "…" quoting (variables
// stay as written), a # that starts a word begins a comment.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// checkParses runs the mcpush command line with --help added: every flag
// it names must be one its command takes (an unknown command or flag is a
// usage error), and the command's help is printed.
func checkParses(t *testing.T, where, line string) {
	t.Helper()
	words := shellWords(line)
	if len(words) < 2 || words[0] != "mcpush" {
		t.Errorf("%s: %q is not an mcpush command", where, line)
		return
	}
	e, out, errb := testEnv("")
	if code := run(context.Background(), append(words[1:], "--help"), e); code != 0 || !strings.HasPrefix(out.String(), "usage:") {
		t.Errorf("%s: %q does not parse: exit %d, %s", where, line, code, errb)
	}
}

// TestDocsCommandsParse: the mcpush commands of the runnable walkthroughs
// (docs/events.md, docs/chatgpt.md), the examples of docs/cli.md that are
// not a synopsis, and every example of the per-command help name commands
// and flags that exist.
func TestDocsCommandsParse(t *testing.T) {
	root := testenv.RepoRoot(t)
	n := 0
	for _, doc := range []string{"events.md", "chatgpt.md", "cli.md"} {
		md, err := os.ReadFile(filepath.Join(root, "docs", doc))
		if err != nil {
			t.Fatal(err)
		}
		in := false
		for line := range strings.Lines(string(md)) {
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, "```"):
				in = !in && strings.HasPrefix(line, "```sh")
				continue
			case !in || !strings.HasPrefix(line, "mcpush ") || strings.HasSuffix(line, "\\"):
				continue
			case doc == "cli.md" && strings.ContainsAny(line, "[…"):
				continue // a synopsis, not a command
			}
			checkParses(t, doc, line)
			n++
		}
	}
	for _, c := range commands {
		checkParses(t, "help "+c.name, c.example)
		n++
	}
	if n < 25 {
		t.Errorf("%d commands checked; the extraction is broken", n)
	}
	t.Logf("%d mcpush command lines parse", n)
}

func TestShellWords(t *testing.T) {
	got := shellWords(`mcpush login --url "$MCP_URL" --message '{"a": 1}' x#y   # comment`)
	want := []string{"mcpush", "login", "--url", "$MCP_URL", "--message", `{"a": 1}`, "x#y"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("shellWords: %q, want %q", got, want)
	}
}

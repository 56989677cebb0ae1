//go:build linux || darwin

package main

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"
	"github.com/mcpush/mcpush/internal/testenv"
)

// TestCallProgressBarOnTerminal runs the built CLI under a pseudo-terminal:
// on a terminal, progress is a bar (progressbar/v3's "|█...|" with a
// percentage), not lines.
func TestCallProgressBarOnTerminal(t *testing.T) {
	url := newTestServer(t)
	bin := testenv.BuildBinary(t, "./cmd/mcpush")
	cmd := exec.CommandContext(t.Context(), bin, "call", "--url", url, "count", "steps=3")
	cmd.Env = []string{"TERM=xterm", "PATH=/usr/bin:/bin"}
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	_, err = io.Copy(&out, f)
	// Linux reports the end of a pseudo-terminal as EIO.
	if err != nil && !errors.Is(err, syscall.EIO) {
		t.Fatalf("reading the terminal: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mcpush call: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"█", "|", "100%", `"counted": 3`} {
		if !strings.Contains(s, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, s)
		}
	}
	if strings.Contains(s, "progress: 1/3") {
		t.Errorf("progress lines on a terminal:\n%q", s)
	}
}

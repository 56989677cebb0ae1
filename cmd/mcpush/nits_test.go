package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// TestUsageErrorsBrief: a flag error prints one line and a hint, not the
// whole usage; `help` prints the usage (with tools --json and
// --redirect-host) and exits 0.
func TestUsageErrorsBrief(t *testing.T) {
	e, _, errb := testEnv("")
	if code := run(t.Context(), []string{"tools", "--bogus"}, e); code != 2 {
		t.Errorf("tools --bogus: exit %d, want 2", code)
	}
	if got := errb.String(); strings.Count(got, "\n") != 2 || !strings.Contains(got, "bogus") || !strings.Contains(got, "mcpush help") {
		t.Errorf("tools --bogus: stderr %q; want the error and a hint, two lines", got)
	}
	e, out, errb := testEnv("")
	if code := run(t.Context(), []string{"help"}, e); code != 0 || errb.String() != "" {
		t.Errorf("help: exit %d, stderr %q", code, errb)
	}
	for _, want := range []string{"tools [--json]", "--redirect-host", "help "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help does not mention %q", want)
		}
	}
}

// TestCallJSONAndHints: call --json is accepted (call prints JSON
// anyway); an unknown tool's error hints at `mcpush tools`.
func TestCallJSONAndHints(t *testing.T) {
	url := newTestServer(t)
	e, out, errb := testEnv(url)
	if code := run(t.Context(), []string{"call", "--json", "count", "steps:=1"}, e); code != 0 || !strings.Contains(out.String(), `"counted"`) {
		t.Errorf("call --json: exit %d, stdout %q, stderr %q", code, out, errb)
	}
	e, _, errb = testEnv(url)
	if code := run(t.Context(), []string{"call", "nope"}, e); code != 1 || !strings.Contains(errb.String(), "hint: 'mcpush tools'") {
		t.Errorf("call of an unknown tool: exit %d, stderr %q", code, errb)
	}
}

func TestHints(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("initialize: %w", &mcp.HTTPError{Status: 401}), "mcpush login"},
		{fmt.Errorf("call: %w", &mcp.Error{Code: mcp.CodeMissingRequiredClientCapability, Message: "tasks"}), "capability"},
		{&mcp.Error{Code: mcp.CodeInvalidParams, Message: `unknown tool "x"`}, "mcpush tools"},
		{errors.New("other"), ""},
	} {
		if got := hint(tc.err); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("hint(%v) = %q, want one with %q", tc.err, got, tc.want)
		}
	}
}

// TestPercentNeverAbove100: progress past its total reads 100%, and 100%
// only once the total is reached.
func TestPercentNeverAbove100(t *testing.T) {
	for _, tc := range []struct {
		p, total float64
		want     string
	}{{101, 100, "100%"}, {99.6, 100, "99%"}, {100, 100, "100%"}, {1, 3, "33%"}, {-1, 3, "0%"}} {
		if got := percent(tc.p, tc.total); got != tc.want {
			t.Errorf("percent(%v, %v) = %s, want %s", tc.p, tc.total, got, tc.want)
		}
	}
}

// TestInterruptedExits130: an interrupted command exits 130 whatever the
// error the interruption caused.
func TestInterruptedExits130(t *testing.T) {
	url := newTestServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	e, _, errb := testEnv(url)
	go func() {
		time.Sleep(3 * progressGap) // mid-call
		cancel()
	}()
	if code := run(ctx, []string{"--protocol", "2026", "call", "count", "steps:=20"}, e); code != 130 {
		t.Errorf("interrupted: exit %d, want 130; stderr %q", code, errb)
	}
}

// TestNoWaitNotIgnored: --no-wait in the 2025 era (no tasks) is a usage
// error, and in the 2026 era a tool that ran in the request says so.
func TestNoWaitNotIgnored(t *testing.T) {
	url := newTestServer(t)
	e, _, errb := testEnv(url)
	if code := run(t.Context(), []string{"call", "--no-wait", "count", "steps:=1"}, e); code != 2 || !strings.Contains(errb.String(), "--protocol 2026") {
		t.Errorf("--no-wait in the 2025 era: exit %d, stderr %q", code, errb)
	}
	e, out, errb := testEnv(url)
	if code := run(t.Context(), []string{"--protocol", "2026", "call", "--no-wait", "count", "steps:=1"}, e); code != 0 ||
		!strings.Contains(errb.String(), "not as a task") || !strings.Contains(out.String(), `"counted"`) {
		t.Errorf("--no-wait of a tool without tasks: exit %d, stdout %q, stderr %q", code, out, errb)
	}
}

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
)

func TestParseScenarioList(t *testing.T) {
	tests := []struct {
		file       string
		n          int
		first      string
		last       []string
		notPresent []string
	}{
		{
			file:       "list-0.1.16.txt",
			n:          32,
			first:      "server-initialize",
			last:       []string{"prompts-get-with-image", "dns-rebinding-protection"},
			notPresent: []string{"initialize", "tools_call", "sse-retry"},
		},
		{
			file:       "list-0.2.0-alpha.12.txt",
			n:          33,
			first:      "server-initialize",
			last:       []string{"dns-rebinding-protection", "server-session-lifecycle", "json-schema-2020-12", "server-sse-polling"},
			notPresent: []string{"initialize", "auth/dpop", "json-schema-2020-12-preservation"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			out, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			names, err := parseScenarioList(string(out))
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != tt.n || names[0] != tt.first || !slices.Equal(names[len(names)-len(tt.last):], tt.last) {
				t.Errorf("parseScenarioList = %d names %v\nwant %d, first %s, last %v", len(names), names, tt.n, tt.first, tt.last)
			}
			for _, name := range tt.notPresent {
				if slices.Contains(names, name) {
					t.Errorf("parseScenarioList includes %q, which is not a server scenario", name)
				}
			}
		})
	}
	if _, err := parseScenarioList("Usage: conformance list\n"); err == nil {
		t.Error("parseScenarioList accepted output without scenarios")
	}
}

// TestReportProblems builds a result directory like the CLI's and checks
// what Problems makes of it.
func TestReportProblems(t *testing.T) {
	dir := t.TempDir()
	write := func(scenario, checks string) {
		d := filepath.Join(dir, "server-"+scenario+"-2026-11-22T02-20-33-683Z")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if checks != "" {
			if err := os.WriteFile(filepath.Join(d, "checks.json"), []byte(checks), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("ping", `[{"id":"ping","name":"Ping","description":"Server responds to ping","status":"SUCCESS","timestamp":"t"}]`)
	write("tools-list", `[{"id":"tools-list","name":"ToolsList","description":"Server lists tools","status":"FAILURE","timestamp":"t","errorMessage":"boom","details":{"a": 1}},
		{"id":"w","name":"W","description":"should","status":"WARNING","timestamp":"t","errorMessage":"meh"}]`)
	write("server-sse-polling", "") // threw: no checks.json
	output := "Running requirements 2025-11-25 (4 scenarios) against http://x/mcp\n\n\n" +
		"=== Running scenario: ping ===\nok\n" +
		"=== Running scenario: tools-list ===\nsome output\n" +
		"=== Running scenario: server-sse-polling ===\nFailed to run scenario server-sse-polling: Error: kaput\n" +
		"\n\n=== SUMMARY ===\n\nNot scored for 2025-11-25: 1 scenario(s) run, 1 failing. These do not affect conformance.\n" +
		"  \u2717 server-sse-polling (pending)\n"
	r := &Report{Announced: -1, Dir: dir, Output: output}
	if err := r.parse(); err != nil {
		t.Fatal(err)
	}
	if r.Announced != 4 || len(r.Scenarios) != 3 || r.Unscored["server-sse-polling"] != "pending" {
		t.Fatalf("parsed Announced %d, %d scenarios, Unscored %v; want 4, 3, server-sse-polling pending", r.Announced, len(r.Scenarios), r.Unscored)
	}
	problems := r.Problems()
	want := []string{
		"the CLI announced 4 scenarios but started 3",
		"tools-list: check tools-list (Server lists tools) FAILED: boom\n\tdetails: {\"a\":1}",
		"server-sse-polling [not scored by the suite: pending]: no results",
	}
	if len(problems) != len(want) {
		t.Fatalf("Problems() = %q, want %d problems", problems, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(problems[i], want[i]) {
			t.Errorf("problem %d = %q, want prefix %q", i, problems[i], want[i])
		}
	}
	if !strings.Contains(problems[2], "kaput") {
		t.Errorf("problem for a scenario without results lacks its output: %q", problems[2])
	}
	if w := r.Warnings(); len(w) != 1 || !strings.Contains(w[0], "meh") {
		t.Errorf("Warnings() = %q, want the one WARNING check", w)
	}
}

// TestHarness runs the real conformance CLI through the whole harness (a
// cluster of stand-in processes, the proxy, a restart) on the one scenario
// the stand-in can pass, and checks that a whole run against it reports
// the scenarios it fails.
func TestHarness(t *testing.T) {
	for _, suite := range Suites() {
		t.Run(suite.Name, func(t *testing.T) {
			if testing.Short() {
				t.Skip("skipping the conformance CLI in -short mode")
			}
			testenv.Node22(t)
			testenv.Conformance(t, suite.Version)
			c := StartCluster(t, 3, helperOptions(t))
			p := NewProxy(t, c.BaseURLs()...)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()

			if err := c.Restart(0); err != nil {
				t.Fatal(err)
			}
			p.CloseIdleConnections()
			r := RunConformance(ctx, t, suite, p.URL+"/mcp", "ping")
			r.Require(t)
			if r.Err != nil || len(r.Scenarios) != 1 || len(r.Scenarios[0].Checks) == 0 {
				t.Errorf("ping: Err %v, scenarios %+v", r.Err, r.Scenarios)
			}
			requireSpread(t, p)

			r = RunConformance(ctx, t, suite, c.URL(1), "")
			t.Log(r.Summary())
			names := ListScenarios(t, suite)
			if r.Announced != len(r.Scenarios) || len(r.Scenarios) < len(names)-2 {
				t.Errorf("whole run: announced %d, started %d scenarios; the list has %d", r.Announced, len(r.Scenarios), len(names))
			}
			if r.Err == nil {
				t.Errorf("whole run against the stand-in: the CLI exited 0, want 1")
			}
			problems := strings.Join(r.Problems(), "\n")
			for _, failing := range []string{"tools-list: check", "prompts-list: check"} {
				if !strings.Contains(problems, failing) {
					t.Errorf("Problems() lacks %q:\n%s", failing, problems)
				}
			}
			for _, sc := range r.Scenarios {
				if sc.Name == "ping" && sc.Failed() {
					t.Errorf("ping failed in the whole run: %+v", sc.Checks)
				}
			}
		})
	}
}

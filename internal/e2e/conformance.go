package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
)

// Suite is one way of running the official MCP conformance suite (npm
// @modelcontextprotocol/conformance) against a server: a package version
// and the flags that choose its scenarios and wire version.
type Suite struct {
	// Name names the suite in test names.
	Name string
	// Version is the npm package version, see testenv.Conformance.
	Version string
	// RunArgs are the flags of a whole-suite run: none for the default
	// (active) suite, or e.g. --requirements 2025-11-25.
	RunArgs []string
	// ScenarioArgs are added to --scenario NAME to run one scenario the way
	// a whole run with RunArgs would (the CLI refuses --requirements with
	// --scenario).
	ScenarioArgs []string
	// ListArgs are the flags of the `list` command that names the server
	// scenarios a whole run runs.
	ListArgs []string
	// NotRequired says why a scenario's failures are reported but do not
	// fail the run ("" for a required scenario). Nil: every scenario is
	// required.
	NotRequired func(scenario string) string
}

// Suite2026 is 0.2.0-alpha.12's requirement set for the 2026 era
// (2026-07-28), every scenario required: the core ones, the tasks
// extension (SEP-2663) and custom x-mcp-header tool headers (SEP-2243).
func Suite2026() Suite {
	return Suite{
		Name:         testenv.Conformance020Alpha12 + "-2026",
		Version:      testenv.Conformance020Alpha12,
		RunArgs:      []string{"--requirements", "2026-07-28"},
		ScenarioArgs: []string{"--spec-version", "2026-07-28", "--force"},
		ListArgs:     []string{"--server", "--requirements", "2026-07-28"},
	}
}

// notRequired is the reason scenario's failures do not fail the run, or "".
func (s Suite) notRequired(scenario string) string {
	if s.NotRequired == nil {
		return ""
	}
	return s.NotRequired(scenario)
}

// NotRequiredResults describes the scenarios of the run that the suite
// does not require, with their outcome: reported, never a problem.
func (r *Report) NotRequiredResults() []string {
	var out []string
	for _, sc := range r.Scenarios {
		reason := r.Suite.notRequired(sc.Name)
		if reason == "" {
			continue
		}
		passed, failed := 0, 0
		for _, c := range sc.Checks {
			switch c.Status {
			case StatusSuccess:
				passed++
			case StatusFailure:
				failed++
			}
		}
		status := "passed"
		if sc.Failed() {
			status = "failed"
		}
		out = append(out, fmt.Sprintf("%s: %s (%d checks passed, %d failed; %s)", sc.Name, status, passed, failed, reason))
	}
	return out
}

// Suites returns the suites that mcpush must pass: 0.1.16's default suite,
// and 0.2.0-alpha.12's requirement set for 2025-11-25 (which also runs, but
// does not score, a few pending and post-release scenarios; the tests here
// require those to pass too).
func Suites() []Suite {
	return []Suite{
		{
			Name:     testenv.Conformance0116,
			Version:  testenv.Conformance0116,
			ListArgs: []string{"--server"},
		},
		{
			Name:         testenv.Conformance020Alpha12,
			Version:      testenv.Conformance020Alpha12,
			RunArgs:      []string{"--requirements", "2025-11-25"},
			ScenarioArgs: []string{"--spec-version", "2025-11-25", "--force"},
			ListArgs:     []string{"--server", "--requirements", "2025-11-25"},
		},
	}
}

// ListScenarios returns the names of the server scenarios that the suite's
// `list` command prints, in its order. For a requirement set these are the
// required ones followed by those it runs without scoring. (For 0.1.16's
// default suite the list also holds the two "pending" scenarios that a
// whole run leaves out.)
func ListScenarios(t testing.TB, s Suite) []string {
	t.Helper()
	node, script := testenv.Node22(t), testenv.Conformance(t, s.Version)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script, "list"}, s.ListArgs...)...)
	cmd.SysProcAttr = childProcAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("conformance %s list: %v\n%s", s.Version, err, out)
	}
	names, err := parseScenarioList(string(out))
	if err != nil {
		t.Fatalf("conformance %s list: %v\n%s", s.Version, err, out)
	}
	return names
}

var listItem = regexp.MustCompile(`^\s+- (\S+)(?: \[([^\]]*)\])?$`)

// parseScenarioList extracts the server scenarios from the output of
// `conformance list --server [--requirements R]`: the items of the section
// "Server scenarios (test against a server):", then the items marked
// [server] under "Run and reported, but never scored:".
func parseScenarioList(out string) ([]string, error) {
	var names []string
	section := ""
	for line := range strings.Lines(stripANSI(out)) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "Server scenarios"):
			section = "server"
			continue
		case strings.HasPrefix(line, "Client scenarios"):
			section = "client"
			continue
		case strings.HasPrefix(line, "Run and reported, but never scored"):
			section = "unscored"
			continue
		}
		m := listItem.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if section == "server" || section == "unscored" && m[2] == "server" {
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no server scenarios in the list (has its format changed?)")
	}
	return names, nil
}

// Report is the outcome of one run of the conformance CLI, read from the
// files it writes with -o DIR (DIR/server-<scenario>-<timestamp>/checks.json,
// a JSON array of checks) and from its standard output (which scenarios it
// started, and their output).
type Report struct {
	Suite    Suite
	URL      string
	Scenario string // the single scenario run, or "" for a whole run

	// Announced is the scenario count a whole run announces ("Running ...
	// (N scenarios) against URL"), or -1.
	Announced int
	// Scenarios are the scenarios the CLI started, in order.
	Scenarios []ScenarioResult
	// Unscored maps scenarios the CLI ran without scoring to the reason it
	// gave (requirement sets only).
	Unscored map[string]string
	// Output is the CLI's standard output and error, colours removed.
	Output string
	// Err reports how the CLI ended when it did not exit 0: an exit status,
	// a timeout or a failure to start.
	Err error
	// Dir is the -o directory holding the results.
	Dir     string
	Elapsed time.Duration
}

// ScenarioResult is one scenario's results.
type ScenarioResult struct {
	Name string
	// Checks are the scenario's checks, nil if it wrote no checks.json
	// (it threw, or the CLI died while it ran).
	Checks []Check
	// Output is the part of the CLI's output that this scenario printed.
	Output string
}

// Check is one conformance check, as the CLI writes it to checks.json.
type Check struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Status       string          `json:"status"` // SUCCESS, FAILURE, WARNING, SKIPPED or INFO
	ErrorMessage string          `json:"errorMessage,omitempty"`
	Details      json.RawMessage `json:"details,omitempty"`
}

// Check statuses that matter here.
const (
	StatusSuccess = "SUCCESS"
	StatusFailure = "FAILURE"
	StatusWarning = "WARNING"
)

// Failed reports whether the scenario failed: a FAILURE check, or no
// results at all.
func (r *ScenarioResult) Failed() bool {
	return len(r.Checks) == 0 || slices.ContainsFunc(r.Checks, func(c Check) bool { return c.Status == StatusFailure })
}

// RunConformance runs suite s against the MCP endpoint url: the whole suite
// when scenario is "", else that one scenario. It returns when the CLI
// exits or ctx is done (the CLI is then killed); Report.Problems says
// whether everything passed.
func RunConformance(ctx context.Context, t testing.TB, s Suite, url, scenario string) *Report {
	t.Helper()
	node, script := testenv.Node22(t), testenv.Conformance(t, s.Version)
	dir, err := os.MkdirTemp(t.ArtifactDir(), "conformance-*")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{script, "server", "--url", url, "-o", dir}
	if scenario == "" {
		args = append(args, s.RunArgs...)
	} else {
		args = append(args, "--scenario", scenario)
		args = append(args, s.ScenarioArgs...)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = childProcAttr()

	r := &Report{Suite: s, URL: url, Scenario: scenario, Announced: -1, Dir: dir}
	start := time.Now()
	runErr := cmd.Run()
	r.Elapsed = time.Since(start)
	r.Output = stripANSI(out.String())
	os.WriteFile(filepath.Join(dir, "output.txt"), []byte(r.Output), 0o644)
	switch {
	case ctx.Err() != nil:
		r.Err = fmt.Errorf("killed after %v: %w", r.Elapsed.Round(time.Millisecond), context.Cause(ctx))
	case runErr != nil:
		r.Err = runErr
	}
	if err := r.parse(); err != nil {
		t.Fatalf("conformance %s: reading results in %s: %v", s.Version, dir, err)
	}
	return r
}

var (
	announceLine = regexp.MustCompile(`(?m)^Running .* \((\d+) scenarios\) against `)
	scenarioLine = regexp.MustCompile(`(?m)^=== Running scenario: (\S+) ===$`)
	unscoredLine = regexp.MustCompile(`^\s+[✓✗] (\S+) \(([^)]*)\)$`)
	resultDir    = regexp.MustCompile(`^server-(.+)-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z)$`)
)

// parse fills r's scenarios from the output and the result directory.
func (r *Report) parse() error {
	if m := announceLine.FindStringSubmatch(r.Output); m != nil {
		r.Announced, _ = strconv.Atoi(m[1])
	}
	if r.Scenario != "" {
		r.Scenarios = []ScenarioResult{{Name: r.Scenario, Output: r.Output}}
	} else {
		locs := scenarioLine.FindAllStringSubmatchIndex(r.Output, -1)
		for i, loc := range locs {
			end := len(r.Output)
			if i+1 < len(locs) {
				end = locs[i+1][0]
			}
			r.Scenarios = append(r.Scenarios, ScenarioResult{
				Name:   r.Output[loc[2]:loc[3]],
				Output: r.Output[loc[0]:end],
			})
		}
	}
	if i := strings.Index(r.Output, "\nNot scored for "); i >= 0 {
		for line := range strings.Lines(r.Output[i+1:]) {
			if m := unscoredLine.FindStringSubmatch(strings.TrimRight(line, "\r\n")); m != nil {
				if r.Unscored == nil {
					r.Unscored = make(map[string]string)
				}
				r.Unscored[m[1]] = m[2]
			}
		}
	}

	entries, err := os.ReadDir(r.Dir)
	if err != nil {
		return err
	}
	files := make(map[string]string) // scenario -> checks.json; names sort by time
	for _, e := range entries {
		if m := resultDir.FindStringSubmatch(e.Name()); e.IsDir() && m != nil {
			files[m[1]] = filepath.Join(r.Dir, e.Name(), "checks.json")
		}
	}
	for i := range r.Scenarios {
		sc := &r.Scenarios[i]
		data, err := os.ReadFile(files[sc.Name])
		if errors.Is(err, os.ErrNotExist) || files[sc.Name] == "" {
			continue // no results: Failed
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &sc.Checks); err != nil {
			return fmt.Errorf("%s: %w", files[sc.Name], err)
		}
	}
	return nil
}

// Problems lists everything that keeps the run from being a pass, one
// entry per failing check or missing result, with the check's error
// message: an empty list means every scenario the CLI announced ran and
// passed every check. It is stricter than the CLI's exit status, which
// ignores a requirement set's unscored scenarios.
func (r *Report) Problems() []string {
	var problems []string
	if r.Announced >= 0 && r.Announced != len(r.Scenarios) {
		problems = append(problems, fmt.Sprintf("the CLI announced %d scenarios but started %d", r.Announced, len(r.Scenarios)))
	}
	if len(r.Scenarios) == 0 {
		problems = append(problems, "the CLI ran no scenarios")
	}
	failed := false
	for _, sc := range r.Scenarios {
		if r.Suite.notRequired(sc.Name) != "" {
			continue
		}
		note := ""
		if reason, ok := r.Unscored[sc.Name]; ok {
			note = fmt.Sprintf(" [not scored by the suite: %s]", reason)
		}
		if len(sc.Checks) == 0 {
			failed = true
			problems = append(problems, fmt.Sprintf("%s%s: no results (the scenario threw or the CLI died); its output:\n%s",
				sc.Name, note, indent(truncate(sc.Output, 3000))))
			continue
		}
		for _, c := range sc.Checks {
			if c.Status != StatusFailure {
				continue
			}
			failed = true
			msg := fmt.Sprintf("%s%s: check %s (%s) FAILED: %s", sc.Name, note, c.ID, c.Description, strings.TrimSpace(c.ErrorMessage))
			if len(c.Details) > 0 && string(c.Details) != "null" {
				msg += "\n\tdetails: " + truncate(compactJSON(c.Details), 600)
			}
			problems = append(problems, msg)
		}
	}
	if r.Err != nil && (!failed && !r.Suite.hasNotRequiredFailure(r) || errors.Is(r.Err, context.DeadlineExceeded) || errors.Is(r.Err, context.Canceled)) {
		msg := fmt.Sprintf("the CLI ended badly: %v", r.Err)
		if n := len(r.Scenarios); n > 0 && r.Scenario == "" {
			msg += fmt.Sprintf(" (last scenario started: %s)", r.Scenarios[n-1].Name)
		}
		msg += "; end of its output:\n" + indent(tail(r.Output, 3000))
		problems = append(problems, msg)
	}
	return problems
}

// hasNotRequiredFailure reports whether a scenario the suite does not
// require failed: then the CLI's non-zero exit is explained.
func (s Suite) hasNotRequiredFailure(r *Report) bool {
	for _, sc := range r.Scenarios {
		if s.notRequired(sc.Name) != "" && sc.Failed() {
			return true
		}
	}
	return false
}

// Warnings lists the WARNING checks (SHOULD-level requirements).
func (r *Report) Warnings() []string {
	var warnings []string
	for _, sc := range r.Scenarios {
		if r.Suite.notRequired(sc.Name) != "" {
			continue
		}
		for _, c := range sc.Checks {
			if c.Status == StatusWarning {
				warnings = append(warnings, fmt.Sprintf("%s: check %s (%s): %s", sc.Name, c.ID, c.Description, strings.TrimSpace(c.ErrorMessage)))
			}
		}
	}
	return warnings
}

// Summary is a one-line account of the run.
func (r *Report) Summary() string {
	passed, checks := 0, 0
	for _, sc := range r.Scenarios {
		if !sc.Failed() {
			passed++
		}
		for _, c := range sc.Checks {
			if c.Status == StatusSuccess || c.Status == StatusFailure {
				checks++
			}
		}
	}
	what := "suite"
	if r.Scenario != "" {
		what = "scenario " + r.Scenario
	}
	return fmt.Sprintf("conformance %s %s %v against %s: %d/%d scenarios passed (%d checks) in %v",
		r.Suite.Version, what, r.args(), r.URL, passed, len(r.Scenarios), checks, r.Elapsed.Round(time.Millisecond))
}

func (r *Report) args() []string {
	if r.Scenario != "" {
		return r.Suite.ScenarioArgs
	}
	return r.Suite.RunArgs
}

// Require logs the summary and fails t listing every problem if there is
// any. A WARNING check (a SHOULD the server misses) is a problem too:
// mcpush meets every SHOULD the suite checks, so a warning is a regression.
func (r *Report) Require(t testing.TB) {
	t.Helper()
	problems := r.Problems()
	for _, w := range r.Warnings() {
		problems = append(problems, "WARNING "+w)
	}
	if len(problems) == 0 {
		t.Log(r.Summary())
	}
	for _, nr := range r.NotRequiredResults() {
		t.Log("not required: " + nr)
	}
	if len(problems) > 0 {
		t.Errorf("%s\n%d problem(s):\n- %s\n(results in %s, kept with go test -artifacts)",
			r.Summary(), len(problems), strings.Join(problems, "\n- "), r.Dir)
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

func stripANSI(s string) string { return ansi.ReplaceAllString(s, "") }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("... [%d more bytes]", len(s)-n)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("[%d bytes before] ...", len(s)-n) + s[len(s)-n:]
}

func indent(s string) string {
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

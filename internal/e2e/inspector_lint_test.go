package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// inspectorLint runs the MCP Inspector's own schema portability check
// (`inspector --cli URL --method tools/list --strict`, the pinned
// Inspector of test/node) against url in the protocol era given, and
// returns its exit code and its findings.
func inspectorLint(t *testing.T, url, era string) (int, []json.RawMessage) {
	t.Helper()
	node := testenv.Node22(t)
	dir := testenv.NodePackage(t, "@modelcontextprotocol/inspector", inspectorVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "clients", "launcher", "build", "index.js"),
		"--cli", url, "--transport", "http", "--protocol-era", era, "--method", "tools/list", "--strict", "--format", "json")
	cmd.Env = append(processEnv(), "HOME="+t.TempDir(), "MCP_STORAGE_DIR="+t.TempDir(), "MCP_INSPECTOR_SECRET_STORE=memory")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("inspector --cli: %v\n%s", err, stderr.String())
	}
	var env struct {
		Result *struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
		SchemaFindings []json.RawMessage `json:"schemaFindings"`
	}
	if err := json.Unmarshal(out, &env); err != nil || env.Result == nil || len(env.Result.Tools) == 0 {
		t.Fatalf("inspector --cli %s (%s): exit %d, no tools in its output (%v):\n%s\n%s", url, era, code, err, out, stderr.String())
	}
	return code, env.SchemaFindings
}

// TestInspectorSchemaCheck: the MCP Inspector's own schema portability
// check (issue 28: it reported an ERROR on events_recent and events_wait
// and warnings on unions) finds nothing in the stock server's tools, in
// both eras. A server with a tool whose schema is a bare `true` and a
// `["null","integer"]` union is its control: the same check fails it
// (exit 6, findings), so a silent check cannot pass for a clean one.
func TestInspectorSchemaCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the Inspector in -short mode")
	}
	c := StartCluster(t, 1, &ClusterOptions{
		Binary:    testenv.BuildBinary(t, "./functions/mcp"),
		Env:       []string{"MCPUSH_STORE=sqlite:" + filepath.Join(t.TempDir(), "mcpush.db")},
		ReadyPath: "/healthz",
	})
	for _, era := range []string{"legacy", "modern"} {
		if code, findings := inspectorLint(t, c.URL(0), era); code != 0 || len(findings) > 0 {
			t.Errorf("the Inspector's schema check (%s) on the stock tools: exit %d, findings:\n%s", era, code, findings)
		}
	}

	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "control.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "control", Version: "1"}, store, nil)
	srv.AddTool(&mcp.Tool{Name: "unportable", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"data": true, "limit": map[string]any{"type": []string{"null", "integer"}},
	}}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
	ts := httptest.NewServer(h)
	defer func() { ts.Close(); h.Close() }()
	if code, findings := inspectorLint(t, ts.URL+"/mcp", "legacy"); code != 6 || len(findings) == 0 {
		t.Errorf("the Inspector's schema check on an unportable tool: exit %d, %d findings; want exit 6 (schema unportable) with findings", code, len(findings))
	}
}

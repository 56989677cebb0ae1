package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoMCPStack: the ingest links neither the MCP server nor its HTTP
// and OAuth layers (it reports its init errors through
// pkg/serve/initerror alone): a smaller binary, and a cold start that
// loads no MCP code.
func TestNoMCPStack(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "github.com/mcpush/mcpush/pkg/serve", "github.com/mcpush/mcpush/pkg/oauth", "github.com/mcpush/mcpush/pkg/mcp":
			t.Errorf("sns-ingest links %s", dep)
		}
	}
}

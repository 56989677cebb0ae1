package webhook

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestImportsNothingOfMcpush: the package links into the SNS ingest
// without the MCP stack, so it imports no mcpush package (and only the
// standard library besides the standard-webhooks library).
func TestImportsNothingOfMcpush(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") && path != "github.com/standard-webhooks/standard-webhooks/libraries/go" {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}

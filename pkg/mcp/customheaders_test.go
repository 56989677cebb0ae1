package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// TestParamHeaders: the Mcp-Param-* headers of x-mcp-header parameters
// must say what the body says (SEP-2243), Base64 form included;
// otherwise 400 with -32020, and the tool does not run.
func TestParamHeaders(t *testing.T) {
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, store, nil)
	ran := 0
	srv.AddTool(&mcp.Tool{Name: "route", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"region":   map[string]any{"type": "string", "x-mcp-header": "Region"},
		"priority": map[string]any{"type": "integer", "x-mcp-header": "Priority"},
		"verbose":  map[string]any{"type": "boolean", "x-mcp-header": "Verbose"},
		"query":    map[string]any{"type": "string"},
	}}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ran++
		return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
	})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
	ts := httptest.NewServer(h)
	defer func() { h.Close(); ts.Close() }()

	for _, tc := range []struct {
		name, args string
		headers    []string
		ok         bool
	}{
		{"plain", `{"region":"eu-west-1","query":"q"}`, []string{"Mcp-Param-Region", "eu-west-1"}, true},
		{"base64", `{"region":"Hello"}`, []string{"Mcp-Param-Region", "=?base64?SGVsbG8=?="}, true},
		{"non-ASCII in base64", `{"region":"Zürich"}`, []string{"Mcp-Param-Region", "=?base64?WsO8cmljaA==?="}, true},
		{"literal without suffix", `{"region":"=?base64?SGVsbG8="}`, []string{"Mcp-Param-Region", "=?base64?SGVsbG8="}, true},
		{"numbers and booleans", `{"priority":42,"verbose":false}`, []string{"Mcp-Param-Priority", "42", "Mcp-Param-Verbose", "false"}, true},
		{"null argument, no header", `{"region":null,"query":"q"}`, nil, true},
		{"unpadded base64", `{"region":"Hello"}`, []string{"Mcp-Param-Region", "=?base64?SGVsbG8?="}, false},
		{"bad base64 characters", `{"region":"Hello"}`, []string{"Mcp-Param-Region", "=?base64?SGVs!!!bG8=?="}, false},
		{"mismatch", `{"region":"eu-west-1"}`, []string{"Mcp-Param-Region", "us-east-1"}, false},
		{"missing header", `{"region":"eu-west-1"}`, nil, false},
		{"header without argument", `{"query":"q"}`, []string{"Mcp-Param-Region", "eu-west-1"}, false},
		{"number mismatch", `{"priority":42}`, []string{"Mcp-Param-Priority", "42.0"}, false},
		{"object argument", `{"region":{"a":1}}`, []string{"Mcp-Param-Region", "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ran
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"route","arguments":` + tc.args + `,` + meta2026(`{}`) + `}}`
			status, r := call2026(t, ts.URL, body, append(headers2026("tools/call", "route"), tc.headers...)...)
			switch {
			case tc.ok && (status != http.StatusOK || r.Error != nil || ran != before+1):
				t.Errorf("status %d, error %+v, ran %d times; want the tool to run", status, r.Error, ran-before)
			case !tc.ok && (status != http.StatusBadRequest || r.Error == nil || r.Error.Code != mcp.CodeHeaderMismatch || ran != before):
				t.Errorf("status %d, error %+v, ran %d times; want 400 -32020 and no run", status, r.Error, ran-before)
			}
		})
	}
}

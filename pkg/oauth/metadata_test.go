package oauth_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpush/mcpush/pkg/oauth"
)

// TestMetadataHandlerCORS: a page on any origin reads the protected
// resource metadata, as a browser-based client's OAuth discovery must
// (the MCP Inspector in a browser): the GET carries
// Access-Control-Allow-Origin "*", and the preflight of a fetch that sets
// MCP-Protocol-Version (the TypeScript SDK's discovery sets it) allows that
// header. Without it the browser fails the preflight and the SDK falls back
// to a second fetch without the header.
func TestMetadataHandlerCORS(t *testing.T) {
	v, err := oauth.New(&oauth.Options{Issuer: "https://as.example", Resource: "https://rs.example/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(v.MetadataHandler())
	defer ts.Close()

	req, _ := http.NewRequest(http.MethodOptions, ts.URL, nil)
	req.Header.Set("Origin", "http://localhost:6274")
	req.Header.Set("Access-Control-Request-Method", "GET")
	req.Header.Set("Access-Control-Request-Headers", "mcp-protocol-version")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("preflight: status %d, want 204", resp.StatusCode)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "*" {
		t.Errorf("preflight: Access-Control-Allow-Origin %q, want *", got)
	}
	if got := resp.Header.Get("Access-Control-Allow-Headers"); !strings.Contains(strings.ToLower(got), "mcp-protocol-version") {
		t.Errorf("preflight: Access-Control-Allow-Headers %q, want it to allow MCP-Protocol-Version", got)
	}

	req, _ = http.NewRequest(http.MethodGet, ts.URL, nil)
	req.Header.Set("Origin", "http://localhost:6274")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("GET: status %d, Access-Control-Allow-Origin %q, want 200 and *", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

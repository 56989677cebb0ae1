package mcp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

const appOrigin = "https://app.example.com"

// corsServer serves a Server on a localhost-only handler that lists
// appOrigin (or origins) in AllowedOrigins.
func corsServer(t *testing.T, auth mcp.Authenticator, origins ...string) string {
	t.Helper()
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, nil)
	if origins == nil {
		origins = []string{appOrigin}
	}
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, AllowedOrigins: origins, Authenticator: auth})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
	return ts.URL
}

func corsDo(t *testing.T, method, url, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// headerList splits a comma-separated header value, lower-cased.
func headerList(h http.Header, name string) []string {
	var out []string
	for _, v := range h.Values(name) {
		for _, s := range strings.Split(v, ",") {
			if s = strings.ToLower(strings.TrimSpace(s)); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func preflight(t *testing.T, url, origin, method, headers string) (*http.Response, string) {
	t.Helper()
	return corsDo(t, http.MethodOptions, url, "", "Origin", origin, "Access-Control-Request-Method", method, "Access-Control-Request-Headers", headers)
}

// TestCORSPreflight: a preflight from a listed origin is answered 204
// with the methods, the MCP request headers (and the Mcp-Param-* headers
// it asks for) and Vary: Origin, without credentials; one from another
// origin is refused with 403 and no CORS header; one from a localhost
// origin that a localhost server accepts without listing gets no CORS
// header, so a browser refuses it. (Before CORS, OPTIONS got 405.)
func TestCORSPreflight(t *testing.T) {
	url := corsServer(t, nil)

	resp, body := preflight(t, url, appOrigin, "POST", "content-type,mcp-protocol-version,mcp-method,mcp-name,Mcp-Param-Region,authorization,mcp-param-region,x-other")
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("preflight from %s: HTTP %d %s, want 204", appOrigin, resp.StatusCode, body)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != appOrigin {
		t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, appOrigin)
	}
	if got := headerList(resp.Header, "Access-Control-Allow-Methods"); !slices.Equal(got, []string{"get", "post", "delete", "options"}) {
		t.Errorf("Access-Control-Allow-Methods = %q", got)
	}
	allowed := headerList(resp.Header, "Access-Control-Allow-Headers")
	for _, want := range []string{"content-type", "accept", "authorization", "mcp-session-id", "mcp-protocol-version", "last-event-id", "mcp-method", "mcp-name", "mcp-param-region"} {
		if !slices.Contains(allowed, want) {
			t.Errorf("Access-Control-Allow-Headers %q lacks %s", allowed, want)
		}
	}
	if n := strings.Count(strings.Join(allowed, ","), "mcp-param-region"); n != 1 || slices.Contains(allowed, "x-other") {
		t.Errorf("Access-Control-Allow-Headers %q: want mcp-param-region once and no x-other", allowed)
	}
	if !slices.Contains(headerList(resp.Header, "Vary"), "origin") || resp.Header.Get("Access-Control-Max-Age") == "" {
		t.Errorf("Vary %q, Access-Control-Max-Age %q; want Origin and a max age", resp.Header.Values("Vary"), resp.Header.Get("Access-Control-Max-Age"))
	}
	if v := resp.Header.Get("Access-Control-Allow-Credentials"); v != "" {
		t.Errorf("Access-Control-Allow-Credentials = %q, want none", v)
	}

	// The preflight of a GET (resumption) and a DELETE too.
	for _, m := range []string{"GET", "DELETE"} {
		if resp, body := preflight(t, url, appOrigin, m, "mcp-session-id,last-event-id"); resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != appOrigin {
			t.Errorf("preflight of %s: HTTP %d ACAO %q %s", m, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), body)
		}
	}

	resp, body = preflight(t, url, "https://evil.example.com", "POST", "content-type")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" || !strings.Contains(body, "Origin https://evil.example.com is not allowed") {
		t.Errorf("preflight from another origin: HTTP %d ACAO %q %s; want 403 without CORS headers", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), body)
	}

	resp, body = preflight(t, url, "http://localhost:3000", "POST", "content-type")
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("preflight from an unlisted localhost origin: HTTP %d ACAO %q ACAM %q %s; want 204 without CORS headers",
			resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Allow-Methods"), body)
	}
}

// TestCORSRequests: the actual requests of a listed origin (initialize,
// a request in the session, its DELETE) carry Access-Control-Allow-Origin
// and expose Mcp-Session-Id; a refused one (another origin) gets 403 and
// no CORS header; an error answer (400) carries them too, so the page can
// read it.
func TestCORSRequests(t *testing.T) {
	url := corsServer(t, nil)
	post := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream", "Origin", appOrigin}

	resp, body := corsDo(t, "POST", url, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`, post...)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize from %s: HTTP %d session %q %s", appOrigin, resp.StatusCode, sid, body)
	}
	checkCORS := func(what string, resp *http.Response) {
		t.Helper()
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != appOrigin {
			t.Errorf("%s: Access-Control-Allow-Origin = %q, want %q", what, got, appOrigin)
		}
		exposed := headerList(resp.Header, "Access-Control-Expose-Headers")
		if !slices.Contains(exposed, "mcp-session-id") || !slices.Contains(exposed, "www-authenticate") {
			t.Errorf("%s: Access-Control-Expose-Headers = %q, want Mcp-Session-Id and WWW-Authenticate", what, exposed)
		}
		if !slices.Contains(headerList(resp.Header, "Vary"), "origin") {
			t.Errorf("%s: Vary = %q, want Origin", what, resp.Header.Values("Vary"))
		}
	}
	checkCORS("initialize", resp)

	inSession := append(slices.Clone(post), "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25")
	resp, body = corsDo(t, "POST", url, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, inSession...)
	if resp.StatusCode != 200 {
		t.Fatalf("tools/list: HTTP %d %s", resp.StatusCode, body)
	}
	checkCORS("tools/list", resp)

	resp, body = corsDo(t, "POST", url, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, post...)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("ping without a session: HTTP %d %s, want 400", resp.StatusCode, body)
	}
	checkCORS("400 answer", resp)

	resp, body = corsDo(t, "POST", url, `{"jsonrpc":"2.0","id":4,"method":"ping"}`, "Content-Type", "application/json", "Accept", "application/json, text/event-stream",
		"Origin", "https://evil.example.com", "Mcp-Session-Id", sid)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Access-Control-Expose-Headers") != "" {
		t.Errorf("ping from another origin: HTTP %d ACAO %q %s; want 403 without CORS headers", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), body)
	}

	resp, body = corsDo(t, "DELETE", url, "", "Origin", appOrigin, "Mcp-Session-Id", sid)
	if resp.StatusCode != 200 && resp.StatusCode != 204 {
		t.Errorf("DELETE: HTTP %d %s", resp.StatusCode, body)
	}
	checkCORS("DELETE", resp)

	// A request without Origin (not a browser) gets no CORS header.
	resp, _ = corsDo(t, "POST", url, `{"jsonrpc":"2.0","id":5,"method":"ping"}`, "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("request without Origin: Access-Control-Allow-Origin %q", resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

// TestCORSAuth: a preflight needs no credentials (a browser sends none),
// and a 401 reaches the page with its WWW-Authenticate readable.
func TestCORSAuth(t *testing.T) {
	url := corsServer(t, refuse{authErr{mcp.ErrUnauthorized, `Bearer resource_metadata="x"`}})
	if resp, body := preflight(t, url, appOrigin, "POST", "authorization,content-type"); resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != appOrigin {
		t.Errorf("preflight on an authenticating server: HTTP %d ACAO %q %s; want 204 for %s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), body, appOrigin)
	}
	resp, body := corsDo(t, "POST", url, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Content-Type", "application/json", "Accept", "application/json, text/event-stream", "Origin", appOrigin)
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != appOrigin || !slices.Contains(headerList(resp.Header, "Access-Control-Expose-Headers"), "www-authenticate") {
		t.Errorf("unauthenticated request: HTTP %d ACAO %q ACEH %q %s; want 401 readable by %s", resp.StatusCode,
			resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Expose-Headers"), body, appOrigin)
	}
}

// TestCORSAnyOrigin: with "*" every origin is allowed and gets its own
// origin back (never "*"); with no list, nothing says CORS or Vary.
func TestCORSAnyOrigin(t *testing.T) {
	url := corsServer(t, nil, "*")
	if resp, body := preflight(t, url, "https://other.example.org", "POST", "content-type"); resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://other.example.org" {
		t.Errorf("preflight with *: HTTP %d ACAO %q %s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), body)
	}
	// Two Origin headers are refused, with or without a list.
	resp, _ := corsDo(t, http.MethodOptions, url, "", "Origin", appOrigin, "Origin", "https://b.example", "Access-Control-Request-Method", "POST")
	if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("two Origin headers: HTTP %d ACAO %q; want 403 without CORS", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}

	url = corsServer(t, nil, []string{}...)
	resp, body := preflight(t, url, "http://localhost:3000", "POST", "content-type")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "" || len(resp.Header.Values("Vary")) != 0 || resp.Header.Get("Allow") == "" {
		t.Errorf("OPTIONS with no AllowedOrigins: HTTP %d ACAO %q Vary %q Allow %q %s; want a plain 204 with Allow",
			resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Values("Vary"), resp.Header.Get("Allow"), body)
	}
}

package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpush/mcpush/internal/oauthtest"
	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/oauth"
)

// newOAuthServer serves a real mcpush server with the event tools as an
// OAuth resource server of as, requiring scope; it returns its MCP URL.
func newOAuthServer(t *testing.T, as *oauthtest.Server, scope string) string {
	t.Helper()
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "cli-oauth-test", Version: "1"}, store, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	eventtools.Add(srv, store, nil)
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	v, err := oauth.New(&oauth.Options{Issuer: as.Issuer, Resource: ts.URL + "/mcp", Scopes: []string{scope}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{Authenticator: v})
	mux.Handle("/mcp", h)
	mux.Handle(oauth.WellKnownPath+"/mcp", v.MetadataHandler())
	t.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
	return ts.URL + "/mcp"
}

// TestLogin: mcpush login runs the authorization-code flow against a real
// authorization server (a scripted browser signs in), keeps the login in
// a 0600 file, and the other commands then use it; --client-id and
// --client-secret run the client-credentials grant instead. Without a
// login the server's 401 is the error.
func TestLogin(t *testing.T) {
	as := oauthtest.Start(t, &oauthtest.Options{
		Scopes: []string{"mcp:tools"},
		Clients: []oauthtest.Client{
			{ID: "robot", Secret: "robot-secret", Scope: "mcp:tools"},
			{ID: "cli", RedirectURIs: []string{"http://127.0.0.1/callback"}},
		},
	})
	url := newOAuthServer(t, as, "mcp:tools")

	for _, tc := range []struct {
		name string
		args []string
		// the browser visits the login asks for
		visits int64
	}{
		{"dynamic registration", nil, 1},
		{"registered client", []string{"--client-id", "cli"}, 1},
		{"client credentials", []string{"--client-id", "robot", "--client-secret", "robot-secret"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, out, errb := testEnv(url)
			e.loginsPath = filepath.Join(t.TempDir(), "mcpush", "logins.json")
			var visits atomic.Int64
			e.openBrowser = oauthtest.Browser("erin", &visits)

			if code := run(t.Context(), []string{"tools"}, e); code != 1 || !strings.Contains(errb.String(), "401") {
				t.Fatalf("tools before login: exit %d, %s; want 1 with the 401", code, errb)
			}
			if code := run(t.Context(), append([]string{"login"}, tc.args...), e); code != 0 {
				t.Fatalf("login: exit %d: %s", code, errb)
			}
			if visits.Load() != tc.visits {
				t.Errorf("%d browser visits, want %d", visits.Load(), tc.visits)
			}
			fi, err := os.Stat(e.loginsPath)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("logins file: %v %v, want mode 0600", fi, err)
			}
			ls, err := oauth.LoadLogins(e.loginsPath)
			if err != nil || ls[url] == nil || ls[url].Token.AccessToken == "" {
				t.Fatalf("logins: %+v %v", ls, err)
			}
			if tc.visits > 0 && ls[url].Token.RefreshToken == "" {
				t.Errorf("the interactive login kept no refresh token")
			}
			if code := run(t.Context(), []string{"tools"}, e); code != 0 || !strings.Contains(out.String(), eventtools.SessionInfo+"\t") {
				t.Errorf("tools after login: exit %d, %s %s", code, out, errb)
			}
			if visits.Load() != tc.visits {
				t.Errorf("tools after login opened the browser again")
			}
		})
	}
}

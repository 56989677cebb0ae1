package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/oauthtest"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/oauth"
	"github.com/mcpush/mcpush/pkg/serve"
)

// TestLambdaOAuth runs the function with MCPUSH_AUTH=oauth (a Function URL
// with AuthType NONE) against a real authorization server
// (internal/oauthtest), in both Lambda modes, without MCPUSH_RESOURCE_URL:
// the resource URL is derived from the Function URL's domain. A request
// without a token gets 401 with the challenge, the metadata names the
// derived resource, a token issued for it serves, bad tokens get 401, a
// token without the scope 403, another subject's session 404; and when
// the authorization server cannot be reached, 503 with Retry-After.
func TestLambdaOAuth(t *testing.T) {
	bin := testenv.BuildBinary(t, "./functions/mcp")
	as := oauthtest.Start(t, &oauthtest.Options{
		Scopes: []string{"mcp:tools", "mcp:other"},
		Clients: []oauthtest.Client{
			{ID: "alice", Secret: "alice-secret", Scope: "mcp:tools"},
			{ID: "bob", Secret: "bob-secret", Scope: "mcp:tools"},
			{ID: "carol", Secret: "carol-secret", Scope: "mcp:other"},
		},
	})
	resource := "https://" + lambdatest.DefaultDomain + "/mcp"
	metaURL := "https://" + lambdatest.DefaultDomain + oauth.WellKnownPath + "/mcp"
	alice := as.Token(t, "alice", "alice-secret", resource, "mcp:tools")
	bob := as.Token(t, "bob", "bob-secret", resource, "mcp:tools")
	carol := as.Token(t, "carol", "carol-secret", resource, "mcp:other")
	initBody := testutil.RPC(1, "initialize", map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"},
	})
	for _, mode := range []serve.Mode{serve.ModeStream, serve.ModeBuffered} {
		t.Run(string(mode), func(t *testing.T) {
			f := lambdatest.StartFunction(t, bin, "MCPUSH_LAMBDA_MODE="+string(mode), "MCPUSH_AUTH=oauth",
				"MCPUSH_OAUTH_ISSUER="+as.Issuer, "MCPUSH_OAUTH_SCOPES=mcp:tools",
				"MCPUSH_STORE=sqlite:"+filepath.Join(t.TempDir(), "mcpush.db"))
			client := &http.Client{Transport: &lambdatest.Transport{Server: f.API,
				Invoke: lambdatest.InvokeOptions{Streaming: mode == serve.ModeStream, Timeout: 30 * time.Second}}}
			url := "https://" + lambdatest.DefaultDomain + "/mcp"
			post := func(token, session, body string) (*http.Response, []byte) {
				hdr := []string{}
				if token != "" {
					hdr = append(hdr, "Authorization", "Bearer "+token)
				}
				if session != "" {
					hdr = append(hdr, "Mcp-Protocol-Version", "2025-11-25")
				}
				return testutil.PostRead(t, client, url, session, body, hdr...)
			}

			resp, body := post("", "", initBody)
			if want := `Bearer resource_metadata="` + metaURL + `", scope="mcp:tools"`; resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != want {
				t.Errorf("no token: %d %q %s; want 401 with %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, want)
			}
			for _, path := range []string{oauth.WellKnownPath, oauth.WellKnownPath + "/mcp"} {
				resp, err := client.Get("https://" + lambdatest.DefaultDomain + path)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var got oauth.ResourceMetadata
				if resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil {
					t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
				}
				want := oauth.ResourceMetadata{Resource: resource, AuthorizationServers: []string{as.Issuer},
					ScopesSupported: []string{"mcp:tools"}, BearerMethodsSupported: []string{"header"}, ResourceName: "mcpush"}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("GET %s (-want +got):\n%s", path, diff)
				}
			}
			for _, bad := range as.BadTokens(t, resource, "mcp:tools") {
				resp, body := post(bad.Token, "", initBody)
				if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
					t.Errorf("%s: %d %q %s; want 401 invalid_token", bad.Name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
				}
			}
			if resp, body := post(carol, "", initBody); resp.StatusCode != 403 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
				t.Errorf("without the scope: %d %q %s; want 403 insufficient_scope", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
			}
			resp, body = post(alice, "", initBody)
			session := resp.Header.Get("Mcp-Session-Id")
			if resp.StatusCode != 200 || session == "" {
				t.Fatalf("initialize with a valid token: %d %s", resp.StatusCode, body)
			}
			list := testutil.RPC(2, "tools/list", nil)
			if resp, body := post(bob, session, list); resp.StatusCode != 404 {
				t.Errorf("another subject's session: %d %s, want 404", resp.StatusCode, body)
			}
			if resp, body := post(alice, session, list); resp.StatusCode != 200 {
				t.Errorf("the subject's own session: %d %s, want 200", resp.StatusCode, body)
			}
		})
	}

	t.Run("authorization server down", func(t *testing.T) {
		f := lambdatest.StartFunction(t, bin, "MCPUSH_AUTH=oauth",
			"MCPUSH_OAUTH_ISSUER=http://127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)),
			"MCPUSH_STORE=sqlite:"+filepath.Join(t.TempDir(), "mcpush.db"))
		client := &http.Client{Transport: &lambdatest.Transport{Server: f.API, Invoke: lambdatest.InvokeOptions{Streaming: true, Timeout: 30 * time.Second}}}
		resp, body := testutil.PostRead(t, client, "https://"+lambdatest.DefaultDomain+"/mcp", "", initBody, "Authorization", "Bearer "+alice)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%d (Retry-After %q) %s; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	})
}

// TestLocalAuthRefused: the local server (no Lambda runtime) refuses at
// start-up an auth mode it cannot enforce, as a new user would run it,
// instead of serving everyone.
func TestLocalAuthRefused(t *testing.T) {
	bin := testenv.BuildBinary(t, "./functions/mcp")
	for _, tc := range []struct{ env, want string }{
		{"MCPUSH_AUTH=oauth", "MCPUSH_OAUTH_ISSUER is not set"},
		{"MCPUSH_AUTH=jwt", `MCPUSH_AUTH=\"jwt\"`},
		{"MCPUSH_AUTH=iam", `MCPUSH_AUTH=\"iam\"`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin)
			cmd.Env = append(os.Environ(), tc.env, "MCPUSH_ADDR=127.0.0.1:0", "AWS_LAMBDA_RUNTIME_API=",
				"MCPUSH_STORE=sqlite:"+filepath.Join(t.TempDir(), "mcpush.db"))
			out, err := cmd.CombinedOutput()
			if err == nil || ctx.Err() != nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("%s: %v (timed out: %v)\n%s\nwant an exit with %s", tc.env, err, ctx.Err() != nil, out, tc.want)
			}
		})
	}
}

package e2e

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/oauth2"

	"github.com/mcpush/mcpush/internal/oauthtest"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/oauth"
)

// oauthScope is the scope the OAuth tests' servers require.
const oauthScope = "mcp:tools"

// TestOAuth runs mcpush with MCPUSH_AUTH=oauth against a real
// authorization server (oidc-provider, internal/oauthtest), as one
// process and as three processes behind the round-robin proxy (on one
// SQLite file, and on one DynamoDB table), in both protocol eras: a request without a token
// gets 401 with the RFC 9728 challenge; the protected resource metadata
// is served at both well-known paths; a token the server issued for the
// resource serves; every kind of bad token gets 401 invalid_token (also
// a good token in the query string); a token without the required scope
// gets 403 insufficient_scope; a 2025 session of one subject is not found
// (404) for another; a rotated signing key is accepted within seconds; a
// flood of tokens with unknown kids costs a bounded number of JWKS fetches
// (counted at the authorization server); and the TypeScript SDK client
// with its client-credentials provider runs the discovery flow, connects
// and lists tools.
func TestOAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the multi-process OAuth test")
	}
	as := oauthtest.Start(t, &oauthtest.Options{
		Scopes: []string{oauthScope, "mcp:other"},
		Clients: []oauthtest.Client{
			{ID: "alice", Secret: "alice-secret", Scope: oauthScope},
			{ID: "bob", Secret: "bob-secret", Scope: oauthScope},
			{ID: "carol", Secret: "carol-secret", Scope: "mcp:other"},
		},
	})
	bin := ServerBinary(t)
	for _, tc := range []struct {
		n     int
		store Store
	}{{1, SQLiteStore()}, {3, SQLiteStore()}, {3, DynamoDBStore()}} {
		t.Run(fmt.Sprintf("%d processes %s", tc.n, tc.store.Name), func(t *testing.T) { testOAuth(t, as, bin, tc.n, tc.store) })
	}
}

// oauthEra sends the first request of a client of one era: a 2025-11-25
// initialize (which creates a session) or a 2026-07-28 tools/list.
type oauthEra struct {
	name  string
	body  string
	hdr   []string
	check func(t *testing.T, resp *http.Response, body []byte)
}

var oauthEras = []oauthEra{
	{
		name: "2025-11-25",
		body: testutil.RPC(1, "initialize", map[string]any{
			"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "oauth-test", "version": "1"},
		}),
		check: func(t *testing.T, resp *http.Response, body []byte) {
			if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
				t.Errorf("initialize: %d %s, want 200 with a session", resp.StatusCode, body)
			}
		},
	},
	{
		name: "2026-07-28",
		body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		hdr:  []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"},
		check: func(t *testing.T, resp *http.Response, body []byte) {
			if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"`+eventtools.SessionInfo+`"`)) {
				t.Errorf("tools/list: %d %s, want 200 with the tools", resp.StatusCode, body)
			}
		},
	},
}

func bearerHeader(hdr []string, token string) []string {
	if token == "" {
		return hdr
	}
	return append(slices.Clone(hdr), "Authorization", "Bearer "+token)
}

func testOAuth(t *testing.T, as *oauthtest.Server, bin string, n int, store Store) {
	env := append(store.Env(t),
		"MCPUSH_AUTH=oauth",
		"MCPUSH_OAUTH_ISSUER="+as.Issuer,
		"MCPUSH_OAUTH_SCOPES="+oauthScope,
		"MCPUSH_STATE_KEYS=oauth-test-key-0123456789abcdef0123456789",
		interopGORACE())
	var l net.Listener
	var resource string
	if n > 1 {
		// The proxy's URL is the resource URL: know it before the
		// processes start.
		var err error
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		resource = "http://" + l.Addr().String() + "/mcp"
		env = append(env, "MCPUSH_RESOURCE_URL="+resource)
	}
	c := StartCluster(t, n, &ClusterOptions{Binary: bin, Env: env, ReadyPath: "/healthz"})
	url := c.URL(0) // one process: the default resource URL, http://$MCPUSH_ADDR/mcp
	if n > 1 {
		url = NewProxyOn(t, l, c.BaseURLs()...).URL + "/mcp"
	}
	resource = url
	base := strings.TrimSuffix(url, "/mcp")
	metaURL := base + "/.well-known/oauth-protected-resource/mcp"
	alice := as.Token(t, "alice", "alice-secret", resource, oauthScope)

	t.Run("metadata", func(t *testing.T) {
		want := oauth.ResourceMetadata{Resource: resource, AuthorizationServers: []string{as.Issuer},
			ScopesSupported: []string{oauthScope}, BearerMethodsSupported: []string{"header"}, ResourceName: "mcpush"}
		for _, u := range []string{metaURL, base + "/.well-known/oauth-protected-resource"} {
			for range n { // every process
				resp, err := http.Get(u)
				if err != nil {
					t.Fatal(err)
				}
				var got oauth.ResourceMetadata
				err = json.NewDecoder(resp.Body).Decode(&got)
				resp.Body.Close()
				if resp.StatusCode != 200 || err != nil {
					t.Fatalf("GET %s: %s %v", u, resp.Status, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("GET %s (-want +got):\n%s", u, diff)
				}
			}
		}
	})

	for _, era := range oauthEras {
		t.Run(era.name, func(t *testing.T) {
			t.Run("no token", func(t *testing.T) {
				for range n {
					resp, body := testutil.PostRead(t, nil, url, "", era.body, era.hdr...)
					want := `Bearer resource_metadata="` + metaURL + `", scope="` + oauthScope + `"`
					if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != want {
						t.Errorf("%d %q %s; want 401 with %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, want)
					}
				}
			})
			t.Run("token in the query string", func(t *testing.T) {
				resp, body := testutil.PostRead(t, nil, url+"?access_token="+alice, "", era.body, era.hdr...)
				if resp.StatusCode != 401 {
					t.Errorf("%d %s; want 401", resp.StatusCode, body)
				}
			})
			for _, bad := range as.BadTokens(t, resource, oauthScope) {
				t.Run(bad.Name, func(t *testing.T) {
					for range n {
						resp, body := testutil.PostRead(t, nil, url, "", era.body, bearerHeader(era.hdr, bad.Token)...)
						h := resp.Header.Get("WWW-Authenticate")
						if resp.StatusCode != 401 || !strings.Contains(h, `error="invalid_token"`) || !strings.Contains(h, `resource_metadata="`+metaURL+`"`) {
							t.Errorf("%d %q %s; want 401 invalid_token with the resource metadata", resp.StatusCode, h, body)
						}
					}
				})
			}
			t.Run("valid token", func(t *testing.T) {
				for range n {
					resp, body := testutil.PostRead(t, nil, url, "", era.body, bearerHeader(era.hdr, alice)...)
					era.check(t, resp, body)
				}
			})
			t.Run("insufficient scope", func(t *testing.T) {
				carol := as.Token(t, "carol", "carol-secret", resource, "mcp:other")
				resp, body := testutil.PostRead(t, nil, url, "", era.body, bearerHeader(era.hdr, carol)...)
				h := resp.Header.Get("WWW-Authenticate")
				if resp.StatusCode != 403 || !strings.Contains(h, `error="insufficient_scope"`) || !strings.Contains(h, `scope="`+oauthScope+`"`) {
					t.Errorf("%d %q %s; want 403 insufficient_scope", resp.StatusCode, h, body)
				}
			})
		})
	}

	t.Run("cross-subject session", func(t *testing.T) {
		bob := as.Token(t, "bob", "bob-secret", resource, oauthScope)
		resp, body := testutil.PostRead(t, nil, url, "", oauthEras[0].body, "Authorization", "Bearer "+alice)
		session := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != 200 || session == "" {
			t.Fatalf("initialize: %d %s", resp.StatusCode, body)
		}
		list := testutil.RPC(2, "tools/list", nil)
		for range n {
			resp, body = testutil.PostRead(t, nil, url, session, list, "Mcp-Protocol-Version", "2025-11-25", "Authorization", "Bearer "+bob)
			if resp.StatusCode != 404 {
				t.Errorf("bob with alice's session: %d %s, want 404", resp.StatusCode, body)
			}
			resp, body = testutil.PostRead(t, nil, url, session, list, "Mcp-Protocol-Version", "2025-11-25", "Authorization", "Bearer "+alice)
			if resp.StatusCode != 200 {
				t.Errorf("alice with her session: %d %s, want 200", resp.StatusCode, body)
			}
		}
	})

	t.Run("key rotation", func(t *testing.T) {
		kid := as.Rotate(t)
		tok := as.Token(t, "alice", "alice-secret", resource, oauthScope)
		start := time.Now()
		ok := 0 // consecutive successes: 2n means every process accepts it
		for ok < 2*n {
			if time.Since(start) > 30*time.Second {
				t.Fatalf("a token of the new key %s is still refused after %v", kid, time.Since(start))
			}
			resp, _ := testutil.PostRead(t, nil, url, "", oauthEras[1].body, bearerHeader(oauthEras[1].hdr, tok)...)
			if resp.StatusCode == 200 {
				ok++
				continue
			}
			ok = 0
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("a token of the rotated key was accepted by every process after %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("JWKS flood", func(t *testing.T) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		before := as.JWKSFetches(t)
		start := time.Now()
		// Longer than the refresh interval, so that every process may
		// refetch once more and the bound is tested, not trivially met.
		sent := 0
		for time.Since(start) < oauth.DefaultRefreshInterval+time.Second {
			tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": as.Issuer, "sub": "flood", "aud": resource,
				"scope": oauthScope, "exp": time.Now().Add(time.Hour).Unix()})
			tok.Header["kid"] = rand.Text()
			s, _ := tok.SignedString(key)
			resp, _ := testutil.PostRead(t, nil, url, "", oauthEras[1].body, bearerHeader(oauthEras[1].hdr, s)...)
			if resp.StatusCode != 401 {
				t.Fatalf("token %d with a random kid: %d, want 401", sent, resp.StatusCode)
			}
			sent++
			time.Sleep(5 * time.Millisecond)
		}
		elapsed := time.Since(start)
		fetches := as.JWKSFetches(t) - before
		// Each process refetches on an unknown kid at most once per
		// oauth.DefaultRefreshInterval.
		bound := n * (1 + 1 + int(elapsed/oauth.DefaultRefreshInterval))
		t.Logf("%d tokens with random kids over %d processes in %v: %d JWKS fetches (bound %d)", sent, n, elapsed.Round(time.Millisecond), fetches, bound)
		if fetches > bound {
			t.Errorf("%d JWKS fetches for %d tokens in %v, want at most %d", fetches, sent, elapsed, bound)
		}
		if fetches < n {
			t.Errorf("%d JWKS fetches in %v over %d processes: unknown kids should still refetch once per interval", fetches, elapsed, n)
		}
	})

	// pkg/mcp's client with a golang.org/x/oauth2 client-credentials
	// token source (RFC 8707 resource) in its HTTP client, both eras.
	for _, mode := range []mcp.ClientMode{mcp.ClientMode2025, mcp.ClientMode2026} {
		t.Run("Go client token source "+string(mode), func(t *testing.T) {
			ctx := t.Context()
			hc := oauth2.NewClient(ctx, as.TokenSource("bob", "bob-secret", resource, oauthScope))
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "oauth-go", Version: "1"}, &mcp.ClientOptions{
				Mode: mode, HTTPClient: hc, NoStandaloneStream: true, Logger: slog.New(slog.DiscardHandler)}).Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close(ctx)
			tools, err := cs.ListTools(ctx)
			if err != nil || !slices.ContainsFunc(tools, func(tl *mcp.Tool) bool { return tl.Name == eventtools.SessionInfo }) {
				t.Errorf("ListTools: %v, %d tools", err, len(tools))
			}
		})
	}

	t.Run("TypeScript SDK client credentials", func(t *testing.T) {
		node := testenv.Node22(t)
		script := filepath.Join(testenv.RepoRoot(t), "test", "node", "oauth", "client.mjs")
		cmd := exec.Command(node, script, url, "bob", "bob-secret", oauthScope, as.Issuer)
		cmd.Env = append(processEnv(), testenv.NodeDirEnv+"="+testenv.NodeDir(t))
		cmd.SysProcAttr = childProcAttr()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		type line struct {
			Kind, Method, URL, Message string
			Status                     int
			Tools                      []string
		}
		var lines []line
		var trace []string
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			var l line
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				lines = append(lines, l)
				if l.Kind == "http" {
					trace = append(trace, fmt.Sprintf("%s %s %d", l.Method, l.URL, l.Status))
				}
			}
		}
		if err != nil || len(lines) == 0 || lines[len(lines)-1].Kind != "result" {
			t.Fatalf("client.mjs: %v\n%s\nstderr: %s", err, out, stderr.String())
		}
		if tools := lines[len(lines)-1].Tools; !slices.Contains(tools, eventtools.SessionInfo) {
			t.Errorf("tools = %v, want %s among them", tools, eventtools.SessionInfo)
		}
		// The discovery flow, in order: the 401, the resource metadata,
		// the authorization server metadata, the token, the retried POST.
		want := []string{
			"POST " + url + " 401",
			"GET " + metaURL + " 200",
			"GET " + as.Issuer + "/.well-known/oauth-authorization-server 200",
			"POST " + as.TokenEndpoint() + " 200",
			"POST " + url + " 200",
		}
		i := 0
		for _, tr := range trace {
			if i < len(want) && tr == want[i] {
				i++
			}
		}
		if i < len(want) {
			t.Errorf("the client's HTTP exchanges lack %q in order:\n%s", want[i], strings.Join(trace, "\n"))
		}
	})
}

// Package oauthtest runs a real OAuth 2.1 authorization server for tests:
// panva's oidc-provider (a certified OpenID provider, installed by
// test/node/package.json) through test/node/oauth/as.mjs, on a free
// loopback port, with the clients and scopes a test asks for. It issues
// JWT access tokens (RFC 9068) for a resource (RFC 8707) through the
// client-credentials and authorization-code grants, serves its metadata
// and JWKS, and can rotate its signing key.
//
// The tests give the server its signing key, so they can also mint tokens
// with it (Mint) for the negative cases a real server would never issue:
// expired, not yet valid, without exp, for another audience or issuer.
package oauthtest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpush/mcpush/internal/testenv"
)

// Client is a client registered with the server. A client-credentials
// token's subject is its ID. Without Secret it is a public client
// (authorization code only; it needs RedirectURIs).
type Client struct {
	ID, Secret string
	// Scope lists the scopes it may get (space-separated).
	Scope string
	// RedirectURIs, if set, register it for the authorization-code grant
	// (with PKCE) as well.
	RedirectURIs []string
}

// Options configure Start.
type Options struct {
	Clients []Client
	// Scopes are the scopes of the MCP resource.
	Scopes []string
	// AccessTokenTTL; default 10 minutes.
	AccessTokenTTL time.Duration
	// ClientIDMetadataDocuments makes the server accept an https URL as
	// client_id and fetch the client's metadata from it; CAFile is a
	// PEM file of the certificates it trusts besides the system's
	// (an httptest TLS server's).
	ClientIDMetadataDocuments bool
	CAFile                    string
}

// Server is a running authorization server. Its methods fail the test on
// errors. Not safe for concurrent use except Token and Mint.
type Server struct {
	// Issuer is the server's issuer identifier (http://127.0.0.1:PORT).
	Issuer string
	key    *ecdsa.PrivateKey
	kid    string
	keys   []json.RawMessage // the JWKS it serves, private, newest first
	n      int

	tokenID, tokenSecret string // the first client
}

// Start starts a server for t; it stops when t ends. Without Node.js 22
// or the npm packages it calls testenv.RequireComponent.
func Start(t testing.TB, opts *Options) *Server {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	node := testenv.Node22(t)
	dir := testenv.NodeDir(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "oidc-provider", "package.json")); err != nil {
		testenv.RequireComponent(t, "oidc-provider (npm, test/node)", err)
	}
	s := &Server{}
	if len(opts.Clients) > 0 {
		s.tokenID, s.tokenSecret = opts.Clients[0].ID, opts.Clients[0].Secret
	}
	s.newKey(t)
	p, err := launch(node, dir, testenv.RepoRoot(t), t.TempDir(), opts, s.keys)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	s.Issuer = p.Issuer
	return s
}

// Process is an authorization server started by Launch.
type Process struct {
	// Issuer is its issuer identifier (http://127.0.0.1:PORT).
	Issuer string
	cmd    *exec.Cmd
	stdin  io.Closer
}

// Launch starts a server outside a test (internal/oauthdev, `make
// run-oauth`), with a fresh signing key, the Node.js and npm packages of
// testenv.LookupNodeDir, and its configuration in dir. Close stops it.
func Launch(dir string, opts *Options) (*Process, error) {
	if opts == nil {
		opts = &Options{}
	}
	nodeDir, err := testenv.LookupNodeDir()
	if err != nil {
		return nil, fmt.Errorf("oauthtest: the npm test dependencies (make deps): %w", err)
	}
	node, err := testenv.LookupNode22(nodeDir)
	if err != nil {
		return nil, fmt.Errorf("oauthtest: Node.js >= %d (make deps): %w", testenv.MinNodeMajor, err)
	}
	root := filepath.Dir(filepath.Dir(nodeDir)) // test/node's repository
	_, _, raw, err := genKey(1)
	if err != nil {
		return nil, err
	}
	return launch(node, nodeDir, root, dir, opts, []json.RawMessage{raw})
}

// Close stops the server: it exits when its stdin closes (killed after
// 5 s).
func (p *Process) Close() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// launch starts test/node/oauth/as.mjs with node, its configuration
// (opts, and keys to sign with, newest first) written to dir, and waits
// until it prints its issuer.
func launch(node, nodeDir, root, dir string, opts *Options, keys []json.RawMessage) (*Process, error) {
	ttl := opts.AccessTokenTTL
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	type clientMeta struct {
		ClientID      string   `json:"client_id"`
		ClientSecret  string   `json:"client_secret,omitempty"`
		GrantTypes    []string `json:"grant_types"`
		ResponseTypes []string `json:"response_types"`
		RedirectURIs  []string `json:"redirect_uris"`
		Scope         string   `json:"scope,omitempty"`
		AppType       string   `json:"application_type,omitempty"`
		AuthMethod    string   `json:"token_endpoint_auth_method,omitempty"`
	}
	clients := []clientMeta{}
	for _, c := range opts.Clients {
		m := clientMeta{ClientID: c.ID, ClientSecret: c.Secret, GrantTypes: []string{"client_credentials"},
			ResponseTypes: []string{}, RedirectURIs: []string{}, Scope: c.Scope}
		if len(c.RedirectURIs) > 0 {
			// A native client (RFC 8252): loopback redirects match on
			// any port.
			m.GrantTypes = append(m.GrantTypes, "authorization_code", "refresh_token")
			m.ResponseTypes = []string{"code"}
			m.RedirectURIs = c.RedirectURIs
			m.AppType = "native"
		}
		if c.Secret == "" {
			m.AuthMethod = "none" // a public client
			m.GrantTypes = m.GrantTypes[1:]
		}
		clients = append(clients, m)
	}
	scopes := opts.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	cfg, _ := json.Marshal(map[string]any{
		"keys": keys, "clients": clients, "scopes": scopes, "accessTokenTTL": int(ttl / time.Second),
		"clientIdMetadataDocuments": opts.ClientIDMetadataDocuments,
	})
	path := filepath.Join(dir, "as.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		return nil, err
	}
	script := filepath.Join(root, "test", "node", "oauth", "as.mjs")
	cmd := exec.Command(node, script, path)
	cmd.Env = append(os.Environ(), testenv.NodeDirEnv+"="+nodeDir)
	if opts.CAFile != "" {
		cmd.Env = append(cmd.Env, "NODE_EXTRA_CA_CERTS="+opts.CAFile)
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("oauthtest: %v", err)
	}
	p := &Process{cmd: cmd, stdin: stdin}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line, ok := <-lines:
		var ready struct{ Issuer string }
		if !ok || json.Unmarshal([]byte(line), &ready) != nil || ready.Issuer == "" {
			p.Close()
			return nil, fmt.Errorf("oauthtest: the authorization server did not start: %q\n%s", line, stderr.String())
		}
		p.Issuer = ready.Issuer
	case <-time.After(30 * time.Second):
		p.Close()
		return nil, fmt.Errorf("oauthtest: the authorization server did not start within 30s\n%s", stderr.String())
	}
	return p, nil
}

// newKey makes a new ES256 signing key the current one, in front of the
// others.
func (s *Server) newKey(t testing.TB) {
	t.Helper()
	s.n++
	key, kid, raw, err := genKey(s.n)
	if err != nil {
		t.Fatal(err)
	}
	s.key, s.kid = key, kid
	s.keys = append([]json.RawMessage{raw}, s.keys...)
}

// genKey makes an ES256 signing key, the n-th of a server, and its
// private JWK.
func genKey(n int) (*ecdsa.PrivateKey, string, json.RawMessage, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, "", nil, err
	}
	kid := fmt.Sprintf("key-%d-%d", n, time.Now().UnixNano())
	j, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{
		Marshal:  jwkset.JWKMarshalOptions{Private: true},
		Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.AlgES256, USE: jwkset.UseSig},
	})
	if err != nil {
		return nil, "", nil, err
	}
	raw, err := json.Marshal(j.Marshal())
	return key, kid, raw, err
}

// Rotate gives the server a new signing key: its JWKS then holds the new
// key and the old ones, and it signs with the new one. It returns the new
// key id.
func (s *Server) Rotate(t testing.TB) string {
	t.Helper()
	s.newKey(t)
	body, _ := json.Marshal(map[string]any{"keys": s.keys})
	resp, err := http.Post(s.Issuer+"/test/rotate", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("oauthtest: rotate: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("oauthtest: rotate: %s", resp.Status)
	}
	return s.kid
}

// KeyID is the id of the current signing key.
func (s *Server) KeyID() string { return s.kid }

// JWKSFetches is how many times the server's JWKS has been fetched.
func (s *Server) JWKSFetches(t testing.TB) int {
	t.Helper()
	resp, err := http.Get(s.Issuer + "/test/stats")
	if err != nil {
		t.Fatalf("oauthtest: stats: %v", err)
	}
	defer resp.Body.Close()
	var st struct{ JWKS int }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("oauthtest: stats: %v", err)
	}
	return st.JWKS
}

// TokenEndpoint is the server's token endpoint.
func (s *Server) TokenEndpoint() string { return s.Issuer + "/token" }

// Token gets an access token for resource from the token endpoint with
// the client-credentials grant (RFC 8707 "resource" parameter).
func (s *Server) Token(t testing.TB, clientID, secret, resource, scope string) string {
	t.Helper()
	tok, err := s.TokenSource(clientID, secret, resource, scope).Token()
	if err != nil {
		t.Fatalf("oauthtest: client-credentials token for %s: %v", clientID, err)
	}
	return tok.AccessToken
}

// TokenSource is a client-credentials token source for resource.
func (s *Server) TokenSource(clientID, secret, resource, scope string) oauth2.TokenSource {
	cfg := &clientcredentials.Config{ClientID: clientID, ClientSecret: secret, TokenURL: s.TokenEndpoint(),
		EndpointParams: map[string][]string{"resource": {resource}}}
	if scope != "" {
		cfg.Scopes = strings.Fields(scope)
	}
	return cfg.TokenSource(context.Background())
}

// Mint signs claims with the server's current key (its kid in the
// header), as the server itself would, for the tokens it would never
// issue. Claims left out stay out.
func (s *Server) Mint(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = s.kid
	tok.Header["typ"] = "at+jwt"
	signed, err := tok.SignedString(s.key)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// PublicKey is the current signing key's public half.
func (s *Server) PublicKey() *ecdsa.PublicKey { return &s.key.PublicKey }

// NamedToken is a token and what is wrong with it.
type NamedToken struct{ Name, Token string }

// BadTokens are tokens for resource that a resource server must refuse
// with 401, one per way a token can be wrong: expired, for another
// audience (issued by the server), from another issuer, unsigned (alg
// none), HMAC-confused (HS256 keyed with the server's public key),
// signed by an unknown key, not yet valid, without exp, malformed. The
// others are signed with the server's own key (Mint).
func (s *Server) BadTokens(t testing.TB, resource, scope string) []NamedToken {
	t.Helper()
	now := time.Now()
	claims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		m := jwt.MapClaims{"iss": s.Issuer, "sub": "mallory", "aud": resource, "scope": scope,
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		if mod != nil {
			mod(m)
		}
		return m
	}
	b64 := base64.RawURLEncoding.EncodeToString
	payload := b64(mustJSON(claims(nil)))
	der, err := x509.MarshalPKIXPublicKey(s.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(nil))
	hs.Header["kid"] = s.kid
	hmacConfused, err := hs.SignedString(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	uk := jwt.NewWithClaims(jwt.SigningMethodES256, claims(nil))
	uk.Header["kid"] = "unknown-" + rand.Text()
	unknownKey, _ := uk.SignedString(other)
	return []NamedToken{
		{"expired", s.Mint(t, claims(func(m jwt.MapClaims) { m["exp"] = now.Add(-5 * time.Minute).Unix() }))},
		{"wrong audience", s.Token(t, s.tokenClient(t), s.tokenSecret, "https://other.example/mcp", scope)},
		{"wrong issuer", s.Mint(t, claims(func(m jwt.MapClaims) { m["iss"] = "https://evil.example" }))},
		{"unsigned", b64([]byte(`{"alg":"none","typ":"at+jwt"}`)) + "." + payload + "."},
		{"HMAC-confused", hmacConfused},
		{"unknown key", unknownKey},
		{"not yet valid", s.Mint(t, claims(func(m jwt.MapClaims) { m["nbf"] = now.Add(10 * time.Minute).Unix() }))},
		{"missing exp", s.Mint(t, claims(func(m jwt.MapClaims) { delete(m, "exp") }))},
		{"malformed", "not.a-jwt"},
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// tokenClient is the first client, used to get real tokens for another
// audience.
func (s *Server) tokenClient(t testing.TB) string {
	t.Helper()
	if s.tokenID == "" {
		t.Fatal("oauthtest: BadTokens needs a client (Options.Clients)")
	}
	return s.tokenID
}

// Browser is a scripted browser for the server's login and consent pages
// (oidc-provider's development interactions): given an authorization
// URL, it signs in as login (any password), consents, and follows the
// redirect to the client's loopback listener, whose answer must be 200.
// Its visits counter, if not nil, counts the URLs it was given.
func Browser(login string, visits *atomic.Int64) func(authURL string) error {
	action := regexp.MustCompile(`action="([^"]+)"`)
	prompt := regexp.MustCompile(`name="prompt" value="([^"]+)"`)
	return func(authURL string) error {
		if visits != nil {
			visits.Add(1)
		}
		jar, _ := cookiejar.New(nil)
		hc := &http.Client{Jar: jar, Timeout: 10 * time.Second}
		resp, err := hc.Get(authURL)
		for step := 0; ; step++ {
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if a, p := action.FindSubmatch(body), prompt.FindSubmatch(body); a != nil && p != nil && step < 4 {
				form := url.Values{"prompt": {string(p[1])}}
				if string(p[1]) == "login" {
					form.Set("login", login)
					form.Set("password", "any")
				}
				target, _ := resp.Request.URL.Parse(html.UnescapeString(string(a[1])))
				resp, err = hc.PostForm(target.String(), form)
				continue
			}
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Request.URL.Host, "127.0.0.1:") && !strings.HasPrefix(resp.Request.URL.Host, "localhost:") {
				return fmt.Errorf("oauthtest: browser ended at %s (%s): %s", resp.Request.URL, resp.Status, regexp.MustCompile(`(?s)<body>.*`).Find(body))
			}
			if resp.Request.URL.Query().Get("code") == "" {
				return fmt.Errorf("oauthtest: browser ended at %s without a code", resp.Request.URL)
			}
			return nil
		}
	}
}

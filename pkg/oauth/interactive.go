package oauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// Interactive is an mcp.Authorizer for people: the authorization-code
// grant with PKCE (S256), the RFC 8707 resource parameter and a loopback
// redirect (RFC 8252): it listens on 127.0.0.1, has OpenBrowser show the
// authorization URL, and takes the code the browser brings back.
//
// The client is, in this order: ClientID (a registered client); the
// ClientIDMetadataURL (a Client ID Metadata Document, when the
// authorization server advertises client_id_metadata_document_supported);
// or a client registered on the spot (RFC 7591 dynamic registration, a
// public "native" client).
type Interactive struct {
	ClientID, ClientSecret string
	// ClientIDMetadataURL is the https URL of the client's metadata
	// document, used as client_id where the server supports it.
	ClientIDMetadataURL string
	// ClientName is the client_name of a dynamic registration; default
	// "mcpush".
	ClientName string
	// Scopes to ask for; default the challenge's, else the resource's.
	Scopes []string
	// RedirectHost and RedirectPort are the loopback listener's
	// (default 127.0.0.1 and a free port; a registered client needs the
	// host and port of its registered redirect URL), RedirectPath its
	// path (default /callback).
	RedirectHost string
	RedirectPort int
	RedirectPath string
	// OpenBrowser shows the user the authorization URL (required).
	OpenBrowser func(authURL string) error
	// Timeout bounds the wait for the browser; default 5 minutes.
	Timeout time.Duration
	// HTTPClient talks to the metadata, registration and token
	// endpoints; default a client with a 10 s timeout.
	HTTPClient *http.Client
	// OnLogin, if set, receives the login (client, endpoints, token)
	// after the grant, and again whenever the token is refreshed, to be
	// kept (SaveLogin).
	OnLogin func(*Login)
}

// Authorize implements mcp.Authorizer.
func (in *Interactive) Authorize(ctx context.Context, c *mcp.AuthChallenge) (oauth2.TokenSource, error) {
	if in.OpenBrowser == nil {
		return nil, errors.New("oauth: Interactive.OpenBrowser is not set")
	}
	hc := in.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	md, err := Discover(ctx, hc, c)
	if err != nil {
		return nil, err
	}
	sm := md.Server
	if sm.AuthorizationEndpoint == "" || sm.TokenEndpoint == "" {
		return nil, fmt.Errorf("oauth: %s has no authorization or token endpoint", sm.Issuer)
	}
	// PKCE is required (OAuth 2.1); a server that lists its methods
	// must list S256.
	if len(sm.CodeChallengeMethodsSupported) > 0 && !slices.Contains(sm.CodeChallengeMethodsSupported, "S256") {
		return nil, fmt.Errorf("oauth: %s does not support PKCE with S256", sm.Issuer)
	}
	host := in.RedirectHost
	if host == "" {
		host = "127.0.0.1"
	}
	path := in.RedirectPath
	if path == "" {
		path = "/callback"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(in.RedirectPort)))
	if err != nil {
		return nil, fmt.Errorf("oauth: the loopback redirect listener: %w", err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	redirect := "http://" + net.JoinHostPort(host, port) + path
	scopes := scopeFor(in.Scopes, c, md)

	clientID, secret := in.ClientID, in.ClientSecret
	switch {
	case clientID != "":
	case in.ClientIDMetadataURL != "" && sm.ClientIDMetadataDocumentSupported:
		clientID = in.ClientIDMetadataURL
	case sm.RegistrationEndpoint != "":
		if clientID, secret, err = in.register(ctx, hc, sm.RegistrationEndpoint, redirect, scopes); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("oauth: %s supports neither Client ID Metadata Documents nor dynamic registration: give a client id", sm.Issuer)
	}
	cfg := &oauth2.Config{
		ClientID: clientID, ClientSecret: secret, RedirectURL: redirect, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: sm.AuthorizationEndpoint, TokenURL: sm.TokenEndpoint},
	}
	if secret == "" {
		cfg.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	}
	resource := oauth2.SetAuthURLParam("resource", md.Resource.Resource)
	verifier := oauth2.GenerateVerifier()
	state := rand.Text()
	authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), resource)

	codes := make(chan callback, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		cb := callback{code: q.Get("code"), state: q.Get("state"), iss: q.Get("iss"), err: q.Get("error"), desc: q.Get("error_description")}
		if cb.state != state {
			http.Error(w, "unexpected state", http.StatusBadRequest)
			return
		}
		select {
		case codes <- cb:
		default:
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if cb.err != "" {
			fmt.Fprintf(w, "Authorization failed: %s. You can close this window.\n", cb.err)
			return
		}
		fmt.Fprintln(w, "Signed in to mcpush. You can close this window.")
	})}
	go srv.Serve(ln)
	defer srv.Close()

	if err := in.OpenBrowser(authURL); err != nil {
		return nil, fmt.Errorf("oauth: opening the browser: %w", err)
	}
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	var cb callback
	select {
	case cb = <-codes:
	case <-time.After(timeout):
		return nil, fmt.Errorf("oauth: no answer from the browser within %v", timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if cb.err != "" {
		return nil, fmt.Errorf("oauth: authorization refused: %s %s", cb.err, cb.desc)
	}
	// RFC 9207: a server that names itself must be the one we asked.
	if cb.iss != "" && cb.iss != sm.Issuer {
		return nil, fmt.Errorf("oauth: the authorization response comes from %q, not %q", cb.iss, sm.Issuer)
	}
	tctx := context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, hc)
	tok, err := cfg.Exchange(tctx, cb.code, oauth2.VerifierOption(verifier), resource)
	if err != nil {
		return nil, fmt.Errorf("oauth: exchanging the code at %s: %w", sm.TokenEndpoint, err)
	}
	l := &Login{Resource: md.Resource.Resource, Issuer: sm.Issuer, AuthorizationEndpoint: sm.AuthorizationEndpoint,
		TokenEndpoint: sm.TokenEndpoint, ClientID: clientID, ClientSecret: secret, Scopes: scopes, Token: tok}
	return l.TokenSource(tctx, hc, in.OnLogin), nil
}

type callback struct{ code, state, iss, err, desc string }

// register registers a public native client for redirect (RFC 7591).
func (in *Interactive) register(ctx context.Context, hc *http.Client, endpoint, redirect string, scopes []string) (id, secret string, err error) {
	name := in.ClientName
	if name == "" {
		name = "mcpush"
	}
	body, _ := json.Marshal(map[string]any{
		"client_name": name, "redirect_uris": []string{redirect}, "application_type": "native",
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": "none", "scope": strings.Join(scopes, " "),
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("oauth: dynamic registration: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("oauth: dynamic registration at %s: %s %s", endpoint, resp.Status, b)
	}
	var reg struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := json.Unmarshal(b, &reg); err != nil || reg.ClientID == "" {
		return "", "", fmt.Errorf("oauth: dynamic registration at %s: no client_id in %s", endpoint, b)
	}
	return reg.ClientID, reg.ClientSecret, nil
}

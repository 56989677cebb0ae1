package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// ClientMetadata is what a client learns from discovery: the protected
// resource metadata of the MCP server and the metadata of its
// authorization server.
type ClientMetadata struct {
	Resource ResourceMetadata
	Server   ServerMetadata
}

// ServerMetadata is the authorization server metadata a client uses
// (RFC 8414; OpenID Connect Discovery).
type ServerMetadata struct {
	ASMetadata
	RegistrationEndpoint          string   `json:"registration_endpoint,omitempty"`
	CodeChallengeMethodsSupported []string `json:"code_challenge_methods_supported,omitempty"`
	GrantTypesSupported           []string `json:"grant_types_supported,omitempty"`
	// ClientIDMetadataDocumentSupported: the server takes an https URL
	// as client_id, the Client ID Metadata Document of the client.
	ClientIDMetadataDocumentSupported bool `json:"client_id_metadata_document_supported,omitempty"`
}

// Discover runs the client side of discovery for the MCP endpoint of c:
// the protected resource metadata (c.ResourceMetadata, else the
// well-known URL with the endpoint's path inserted, else at the root),
// whose resource must be the endpoint or a prefix of it on the same
// origin, then the metadata of its first authorization server (RFC 8414,
// then OpenID Connect), whose issuer must match. hc nil means a client
// with a 10 s timeout.
func Discover(ctx context.Context, hc *http.Client, c *mcp.AuthChallenge) (*ClientMetadata, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	endpoint, err := url.Parse(c.URL)
	if err != nil || endpoint.Host == "" {
		return nil, fmt.Errorf("oauth: MCP URL %q is not absolute", c.URL)
	}
	var candidates []string
	if c.ResourceMetadata != "" {
		candidates = append(candidates, c.ResourceMetadata)
	}
	origin := endpoint.Scheme + "://" + endpoint.Host
	for _, u := range []string{metadataURL(c.URL), origin + WellKnownPath} {
		if !slices.Contains(candidates, u) {
			candidates = append(candidates, u)
		}
	}
	var prm ResourceMetadata
	var errs []error
	for _, u := range candidates {
		if err := checkSameOrigin(u, origin, c.ResourceMetadata == u); err != nil {
			errs = append(errs, err)
			continue
		}
		body, _, err := get(ctx, hc, u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := json.Unmarshal(body, &prm); err != nil {
			return nil, fmt.Errorf("oauth: %s: %w", u, err)
		}
		errs = nil
		break
	}
	if errs != nil {
		return nil, fmt.Errorf("oauth: no protected resource metadata for %s: %w", c.URL, errors.Join(errs...))
	}
	if !resourceCovers(prm.Resource, endpoint) {
		return nil, fmt.Errorf("oauth: the resource metadata names %q, not %s", prm.Resource, c.URL)
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("oauth: the resource metadata of %s names no authorization server", c.URL)
	}
	issuer := prm.AuthorizationServers[0]
	if err := checkURL(issuer, "authorization server"); err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	var sm ServerMetadata
	asm, raw, err := discoverRaw(ctx, hc, issuer)
	if err != nil {
		return nil, fmt.Errorf("oauth: authorization server %s: %w", issuer, err)
	}
	if err := json.Unmarshal(raw, &sm); err != nil {
		return nil, err
	}
	sm.ASMetadata = *asm
	return &ClientMetadata{Resource: prm, Server: sm}, nil
}

// checkSameOrigin refuses a resource metadata URL on another origin than
// the MCP endpoint's, unless the server named it (resource_metadata).
func checkSameOrigin(u, origin string, named bool) error {
	if named {
		return checkURL(u, "resource_metadata")
	}
	if !strings.HasPrefix(u, origin+"/") {
		return fmt.Errorf("%s is not on %s", u, origin)
	}
	return nil
}

// resourceCovers reports whether resource (from the metadata) is the MCP
// endpoint or a prefix of its path on the same origin.
func resourceCovers(resource string, endpoint *url.URL) bool {
	r, err := url.Parse(resource)
	if err != nil || !strings.EqualFold(r.Scheme, endpoint.Scheme) || !strings.EqualFold(r.Host, endpoint.Host) {
		return false
	}
	rp, ep := strings.TrimSuffix(r.Path, "/"), strings.TrimSuffix(endpoint.Path, "/")
	return rp == ep || strings.HasPrefix(ep, rp+"/")
}

// scopeFor chooses the scopes to ask for: the configured ones, else the
// challenge's, else the resource's scopes_supported.
func scopeFor(configured []string, c *mcp.AuthChallenge, md *ClientMetadata) []string {
	switch {
	case len(configured) > 0:
		return configured
	case c.Scope != "":
		return strings.Fields(c.Scope)
	}
	return md.Resource.ScopesSupported
}

// ClientCredentials is an mcp.Authorizer for machines: the
// client-credentials grant of a registered confidential client, with the
// RFC 8707 resource parameter.
type ClientCredentials struct {
	ClientID, ClientSecret string
	// Scopes to ask for; default the challenge's, else the resource's.
	Scopes []string
	// HTTPClient talks to the metadata and token endpoints; default a
	// client with a 10 s timeout.
	HTTPClient *http.Client
	// OnLogin, if set, receives the login after the grant and whenever
	// the token is renewed, to be kept (SaveLogins).
	OnLogin func(*Login)
}

// Authorize implements mcp.Authorizer.
func (cc *ClientCredentials) Authorize(ctx context.Context, c *mcp.AuthChallenge) (oauth2.TokenSource, error) {
	md, err := Discover(ctx, cc.HTTPClient, c)
	if err != nil {
		return nil, err
	}
	if md.Server.TokenEndpoint == "" {
		return nil, fmt.Errorf("oauth: %s has no token endpoint", md.Server.Issuer)
	}
	cfg := &clientcredentials.Config{
		ClientID: cc.ClientID, ClientSecret: cc.ClientSecret, TokenURL: md.Server.TokenEndpoint,
		Scopes:         scopeFor(cc.Scopes, c, md),
		EndpointParams: url.Values{"resource": {md.Resource.Resource}},
	}
	tctx := context.WithoutCancel(ctx)
	if cc.HTTPClient != nil {
		tctx = context.WithValue(tctx, oauth2.HTTPClient, cc.HTTPClient)
	}
	tok, err := cfg.Token(tctx) // fail now, not on the retried request
	if err != nil {
		return nil, fmt.Errorf("oauth: client-credentials grant at %s: %w", md.Server.TokenEndpoint, err)
	}
	l := &Login{Resource: md.Resource.Resource, Issuer: md.Server.Issuer, TokenEndpoint: md.Server.TokenEndpoint,
		ClientID: cc.ClientID, ClientSecret: cc.ClientSecret, ClientCredentials: true, Scopes: cfg.Scopes, Token: tok}
	return l.TokenSource(tctx, cc.HTTPClient, cc.OnLogin), nil
}

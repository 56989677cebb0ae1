package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// Defaults of Options.
const (
	DefaultLeeway          = 30 * time.Second
	DefaultRefreshInterval = 5 * time.Second
	DefaultFetchTimeout    = 3 * time.Second
	DefaultKeyWait         = time.Second
	DefaultMaxStale        = time.Hour
	DefaultMetadataRefresh = time.Hour
	DefaultResourcePath    = "/mcp"
	// MaxTokenBytes bounds an access token; a longer one is refused as
	// malformed without being parsed.
	MaxTokenBytes = 16 << 10
)

// Algorithms are the JWS algorithms a token may be signed with: RSA,
// RSA-PSS, ECDSA and EdDSA. "none" and the HMAC algorithms are never
// accepted.
var Algorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Options configure a Validator.
type Options struct {
	// Issuer is the authorization server's issuer identifier (required):
	// an https URL, or http on a loopback host. Tokens must carry it in
	// "iss" exactly.
	Issuer string
	// Resource is the canonical URI of the MCP endpoint
	// ("https://mcp.example.com/mcp"): the "resource" of the protected
	// resource metadata and the audience tokens must carry. Empty: each
	// request's own, https://{Host}{ResourcePath}, for a server that
	// learns its URL only when called (a Lambda Function URL).
	Resource string
	// ResourcePath is the path of the MCP endpoint when Resource is
	// derived from the request; default DefaultResourcePath.
	ResourcePath string
	// Audiences are further "aud" values accepted besides the resource
	// URL (an authorization server that names resources otherwise).
	Audiences []string
	// Scopes are the scopes every request needs. A valid token without
	// one of them gets 403 insufficient_scope.
	Scopes []string
	// ClientIDs, if set, accept tokens without an "aud" claim whose
	// "client_id" is one of them (Amazon Cognito access tokens; see the
	// package documentation). Tokens without "aud" are refused otherwise.
	ClientIDs []string
	// ResourceName is the human-readable name in the resource metadata.
	ResourceName string
	// Leeway is the clock skew allowed for exp, nbf and iat; default
	// DefaultLeeway.
	Leeway time.Duration
	// RefreshInterval is the least time from the end of one fetch of the
	// authorization server's keys (or of its metadata after a failure)
	// to the start of the next; default DefaultRefreshInterval.
	RefreshInterval time.Duration
	// FetchTimeout bounds one fetch (metadata and JWKS together); default
	// DefaultFetchTimeout. A fetch runs on its own, whatever the requests
	// that wait for it do.
	FetchTimeout time.Duration
	// KeyWait bounds how long a request without a usable key waits for
	// the fetch in flight before it gets mcp.ErrAuthUnavailable (503);
	// default DefaultKeyWait. A request with a usable key never waits.
	KeyWait time.Duration
	// MaxStale is how long keys past their expiry keep serving while
	// refreshes run or fail; default DefaultMaxStale.
	MaxStale time.Duration
	// MetadataRefresh is the age after which the authorization server's
	// metadata is read again, at the next key fetch; default
	// DefaultMetadataRefresh. A token with an unknown key id makes the
	// next fetch read it again too.
	MetadataRefresh time.Duration
	// HTTPClient fetches the metadata and keys; default a client with a
	// 10s timeout. Redirects are followed only to URLs the issuer itself
	// could have (https, or http on a loopback host), at most 3.
	HTTPClient *http.Client
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Validator checks bearer tokens and serves the protected resource
// metadata. It implements mcp.Authenticator. Safe for concurrent use.
type Validator struct {
	opts   Options
	keys   *keySet
	parser *jwt.Parser
}

// Claims are the claims of a valid token a Validator uses.
type Claims struct {
	jwt.RegisteredClaims
	// Scope is the space-separated "scope" claim (RFC 9068), or the
	// "scp" array some servers send instead.
	Scope    scopes `json:"scope,omitempty"`
	SCP      scopes `json:"scp,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	// TokenUse is Cognito's "token_use": "access" or "id".
	TokenUse string `json:"token_use,omitempty"`
	// All are every claim of the token, decoded (the payload as a JSON
	// object), for access rules (notify.Access) and mcp.ServerOptions
	// .Authorize.
	All notify.Claims `json:"-"`
}

// Scopes returns the token's scopes.
func (c *Claims) Scopes() []string { return append(append([]string(nil), c.Scope...), c.SCP...) }

// Principal is the principal of the token: issuer#subject. An issuer
// never contains "#" (RFC 8414 forbids a fragment), so the two parts
// cannot be confused.
func (c *Claims) Principal() string { return c.Issuer + "#" + c.Subject }

// UnmarshalJSON decodes the claims, refusing an "exp", "nbf" or "iat"
// that is not a JSON number (RFC 7519 §2: a NumericDate is a number; a
// numeric string is not one).
func (c *Claims) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	for _, name := range []string{"exp", "nbf", "iat"} {
		if v, ok := raw[name]; ok && !isNumber(v) {
			return fmt.Errorf("claim %q is not a number", name)
		}
	}
	type plain Claims // without this method
	if err := json.Unmarshal(b, (*plain)(c)); err != nil {
		return err
	}
	return json.Unmarshal(b, &c.All)
}

// isNumber reports whether v is a JSON number.
func isNumber(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

// scopes unmarshals from a space-separated string or an array.
type scopes []string

func (s *scopes) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		*s = strings.Fields(str)
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New("scope: want a string or an array of strings")
	}
	*s = list
	return nil
}

// New returns a Validator. It checks the options but fetches nothing:
// the authorization server is contacted when the first token arrives.
func New(opts *Options) (*Validator, error) {
	if opts == nil {
		opts = &Options{}
	}
	o := *opts
	if o.Issuer == "" {
		return nil, fmt.Errorf("%w: MCPUSH_OAUTH_ISSUER is not set", ErrConfig)
	}
	if err := checkURL(o.Issuer, "issuer"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if u, _ := url.Parse(o.Issuer); u.RawQuery != "" {
		return nil, fmt.Errorf("%w: issuer %q has a query", ErrConfig, o.Issuer)
	}
	if o.Resource != "" {
		if err := checkURL(o.Resource, "resource URL"); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	if o.ResourcePath == "" {
		o.ResourcePath = DefaultResourcePath
	}
	if o.Leeway <= 0 {
		o.Leeway = DefaultLeeway
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = DefaultRefreshInterval
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if o.KeyWait <= 0 {
		o.KeyWait = DefaultKeyWait
	}
	if o.MaxStale <= 0 {
		o.MaxStale = DefaultMaxStale
	}
	if o.MetadataRefresh <= 0 {
		o.MetadataRefresh = DefaultMetadataRefresh
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ResourceName == "" {
		o.ResourceName = "mcpush"
	}
	v := &Validator{opts: o}
	v.keys = &keySet{issuer: o.Issuer, client: o.HTTPClient, now: o.Now, interval: o.RefreshInterval,
		timeout: o.FetchTimeout, wait: o.KeyWait, maxStale: o.MaxStale, metaInterval: o.MetadataRefresh, log: o.Logger}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(Algorithms),
		jwt.WithIssuer(o.Issuer),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(o.Leeway),
		jwt.WithTimeFunc(o.Now),
	)
	return v, nil
}

// Authenticate implements mcp.Authenticator: it validates the bearer
// token of r's Authorization header for r's resource and returns its
// principal. Errors are *Error.
func (v *Validator) Authenticate(r *http.Request) (string, error) {
	p, _, err := v.AuthenticateUntil(r)
	return p, err
}

// AuthenticateUntil implements mcp.ExpiringAuthenticator: Authenticate,
// and when the token stops being accepted ("exp" plus Leeway), at which
// the held streams opened with it end (a client that comes back with it
// then is refused, and fetches a fresh one).
func (v *Validator) AuthenticateUntil(r *http.Request) (string, time.Time, error) {
	p, exp, _, err := v.AuthenticateClaims(r)
	return p, exp, err
}

// AuthenticateClaims implements mcp.ClaimsAuthenticator:
// AuthenticateUntil, and the token's claims (Claims.All), which the
// server's access rules read.
func (v *Validator) AuthenticateClaims(r *http.Request) (string, time.Time, notify.Claims, error) {
	resource := v.resource(r)
	meta := metadataURL(resource)
	token, err := bearer(r)
	if err != nil {
		return "", time.Time{}, nil, &Error{Code: "invalid_request", Description: err.Error(), kind: mcp.ErrUnauthorized,
			challenge: challenge("error", "invalid_request", "error_description", err.Error(), "resource_metadata", meta)}
	}
	if token == "" {
		return "", time.Time{}, nil, &Error{Description: "no bearer token in the Authorization header", kind: mcp.ErrUnauthorized,
			challenge: challenge("resource_metadata", meta, "scope", strings.Join(v.opts.Scopes, " "))}
	}
	c, err := v.Validate(r.Context(), token, resource)
	if err != nil {
		return "", time.Time{}, nil, v.refusal(err, meta)
	}
	var exp time.Time
	if c.ExpiresAt != nil {
		exp = c.ExpiresAt.Time.Add(v.opts.Leeway)
	}
	return c.Principal(), exp, c.All, nil
}

// refusal turns a Validate error into an *Error with its challenge.
func (v *Validator) refusal(err error, meta string) *Error {
	scope := strings.Join(v.opts.Scopes, " ")
	desc := describe(err)
	switch {
	case errors.Is(err, mcp.ErrAuthUnavailable):
		return &Error{Description: desc, kind: mcp.ErrAuthUnavailable}
	case errors.Is(err, mcp.ErrInsufficientScope):
		return &Error{Code: "insufficient_scope", Description: desc, kind: mcp.ErrInsufficientScope,
			challenge: challenge("error", "insufficient_scope", "scope", scope, "resource_metadata", meta, "error_description", desc)}
	default:
		return &Error{Code: "invalid_token", Description: desc, kind: mcp.ErrUnauthorized,
			challenge: challenge("error", "invalid_token", "error_description", desc, "resource_metadata", meta, "scope", scope)}
	}
}

// bearer returns the token of the Authorization header ("" without one).
// Tokens in the query string or the body are never read (OAuth 2.1 §5.2).
func bearer(r *http.Request) (string, error) {
	h := r.Header.Values("Authorization")
	if len(h) == 0 {
		return "", nil
	}
	if len(h) > 1 {
		return "", errors.New("more than one Authorization header")
	}
	scheme, token, ok := strings.Cut(h[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", errors.New("the Authorization header is not a Bearer token")
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", errors.New("empty bearer token")
	}
	return token, nil
}

// Validate checks token for resource (Options.Resource when empty) and
// returns its claims. An error wraps mcp.ErrUnauthorized,
// mcp.ErrInsufficientScope or mcp.ErrAuthUnavailable.
func (v *Validator) Validate(ctx context.Context, token, resource string) (*Claims, error) {
	if resource == "" {
		resource = v.opts.Resource
	}
	if len(token) > MaxTokenBytes {
		return nil, fmt.Errorf("%w: token longer than %d bytes", mcp.ErrUnauthorized, MaxTokenBytes)
	}
	c := &Claims{}
	var keyErr error
	_, err := v.parser.ParseWithClaims(token, c, func(t *jwt.Token) (any, error) {
		k, err := v.key(ctx, t)
		keyErr = err
		return k, err
	})
	if err != nil {
		if errors.Is(keyErr, mcp.ErrAuthUnavailable) {
			return nil, keyErr // the kind of failure only: no URL, no upstream answer
		}
		return nil, fmt.Errorf("%w: %v", mcp.ErrUnauthorized, err)
	}
	if c.Subject == "" {
		return nil, fmt.Errorf("%w: token has no subject", mcp.ErrUnauthorized)
	}
	if c.TokenUse != "" && c.TokenUse != "access" {
		return nil, fmt.Errorf("%w: not an access token (token_use %q)", mcp.ErrUnauthorized, c.TokenUse)
	}
	if err := v.checkAudience(c, resource); err != nil {
		return nil, err
	}
	have := c.Scopes()
	var missing []string
	for _, s := range v.opts.Scopes {
		if !contains(have, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: token lacks scope %s", mcp.ErrInsufficientScope, strings.Join(missing, " "))
	}
	return c, nil
}

// checkAudience accepts a token whose aud names resource or one of the
// configured audiences, or, without aud, whose client_id is one of
// ClientIDs.
func (v *Validator) checkAudience(c *Claims, resource string) error {
	if len(c.Audience) == 0 {
		if c.ClientID != "" && contains(v.opts.ClientIDs, c.ClientID) {
			return nil
		}
		return fmt.Errorf("%w: token has no audience", mcp.ErrUnauthorized)
	}
	for _, a := range c.Audience {
		if a == resource || contains(v.opts.Audiences, a) {
			return nil
		}
	}
	return fmt.Errorf("%w: token audience %q does not include %s", mcp.ErrUnauthorized, []string(c.Audience), resource)
}

// key finds the verification key of t in the authorization server's
// JWKS.
func (v *Validator) key(ctx context.Context, t *jwt.Token) (any, error) {
	if crit, ok := t.Header["crit"]; ok {
		// RFC 7515 §4.1.11: a recipient must refuse a token whose
		// critical extensions it does not understand; this one
		// understands none.
		return nil, fmt.Errorf("critical header parameters %v are not understood", crit)
	}
	alg := t.Method.Alg()
	kid, _ := t.Header["kid"].(string)
	k, found, err := v.keys.lookup(ctx, kid)
	if err != nil {
		return nil, err
	}
	if !found && kid == "" {
		// No kid: a JWKS with a single key of the token's family.
		for _, c := range v.keys.all() {
			if usable(c, alg) {
				if found {
					return nil, errors.New("token has no kid and several keys could verify it")
				}
				k, found = c, true
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("no key %q in the authorization server's JWKS", kid)
	}
	if !usable(k, alg) {
		return nil, fmt.Errorf("key %q is not for %s", kid, alg)
	}
	return k.Key(), nil
}

// usable reports whether key k may verify a signature with alg: its alg,
// if it names one, is alg, and its type is alg's family.
func usable(k jwkset.JWK, alg string) bool {
	m := k.Marshal()
	if m.ALG != "" && string(m.ALG) != alg {
		return false
	}
	switch {
	case strings.HasPrefix(alg, "RS"), strings.HasPrefix(alg, "PS"):
		return m.KTY == jwkset.KtyRSA
	case strings.HasPrefix(alg, "ES"):
		return m.KTY == jwkset.KtyEC
	case alg == "EdDSA":
		return m.KTY == jwkset.KtyOKP
	}
	return false
}

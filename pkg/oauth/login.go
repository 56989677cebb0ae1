package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Login is what a client keeps of an authorization to use one MCP server:
// the client, the authorization server's endpoints and the token (with
// its refresh token). A login of the client-credentials grant has no
// refresh token and a ClientSecret: its TokenSource asks for a new token.
type Login struct {
	Resource              string        `json:"resource"`
	Issuer                string        `json:"issuer"`
	AuthorizationEndpoint string        `json:"authorization_endpoint,omitempty"`
	TokenEndpoint         string        `json:"token_endpoint"`
	ClientID              string        `json:"client_id"`
	ClientSecret          string        `json:"client_secret,omitempty"`
	ClientCredentials     bool          `json:"client_credentials,omitempty"`
	Scopes                []string      `json:"scopes,omitempty"`
	Token                 *oauth2.Token `json:"token"`
}

// TokenSource returns a token source that starts from l.Token and gets a
// new one when it expires (refresh token; client credentials), calling
// onLogin (if set) with the updated login each time the token changes.
// hc talks to the token endpoint. Safe for concurrent use.
func (l *Login) TokenSource(ctx context.Context, hc *http.Client, onLogin func(*Login)) oauth2.TokenSource {
	if hc != nil {
		ctx = context.WithValue(ctx, oauth2.HTTPClient, hc)
	}
	var base oauth2.TokenSource
	if l.ClientCredentials {
		cfg := &clientcredentials.Config{ClientID: l.ClientID, ClientSecret: l.ClientSecret, TokenURL: l.TokenEndpoint,
			Scopes: l.Scopes, EndpointParams: url.Values{"resource": {l.Resource}}}
		base = oauth2.ReuseTokenSource(l.Token, cfg.TokenSource(ctx))
	} else {
		cfg := &oauth2.Config{ClientID: l.ClientID, ClientSecret: l.ClientSecret, Scopes: l.Scopes,
			Endpoint: oauth2.Endpoint{AuthURL: l.AuthorizationEndpoint, TokenURL: l.TokenEndpoint}}
		if l.ClientSecret == "" {
			cfg.Endpoint.AuthStyle = oauth2.AuthStyleInParams
		}
		base = cfg.TokenSource(ctx, l.Token)
	}
	ls := &loginSource{base: base, login: *l, onLogin: onLogin}
	if onLogin != nil {
		onLogin(l)
	}
	return ls
}

type loginSource struct {
	base    oauth2.TokenSource
	onLogin func(*Login)
	mu      sync.Mutex
	login   Login
}

func (s *loginSource) Token() (*oauth2.Token, error) {
	tok, err := s.base.Token()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.login.Token == nil || tok.AccessToken != s.login.Token.AccessToken {
		s.login.Token = tok
		if s.onLogin != nil {
			l := s.login
			s.onLogin(&l)
		}
	}
	return tok, nil
}

// Logins are the logins a client keeps, by MCP server URL.
type Logins map[string]*Login

// LoadLogins reads the logins file at path; a missing file is no logins.
// A file others can read is refused: it holds tokens.
func LoadLogins(path string) (Logins, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Logins{}, nil
	}
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("oauth: %s is readable by others (mode %v); it holds tokens: chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ls := Logins{}
	if err := json.Unmarshal(b, &ls); err != nil {
		return nil, fmt.Errorf("oauth: %s: %w", path, err)
	}
	return ls, nil
}

// SaveLogins writes ls to path, readable by the user only (0600, in a
// directory created 0700), replacing the file atomically.
func SaveLogins(path string, ls Logins) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(ls, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".logins-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

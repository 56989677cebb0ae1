package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/oauth"
)

// loginFlags are the flags of mcpush login.
type loginFlags struct {
	clientID, clientSecret string
	scope                  string
	port                   int
	host                   string
}

// cmdLogin signs in to the server at --url: with --client-id and
// --client-secret through the client-credentials grant, otherwise through
// the authorization-code grant in the browser (PKCE, loopback redirect;
// a registered --client-id, else dynamic registration). The login, with
// its refresh token, is kept in the logins file (mode 0600), which the
// other commands read.
func cmdLogin(ctx context.Context, e *env, c *common, f *loginFlags) error {
	if e.loginsPath == "" {
		return errors.New("no place for the logins file (set MCPUSH_LOGINS)")
	}
	var scopes []string
	if f.scope != "" {
		scopes = strings.Fields(strings.ReplaceAll(f.scope, ",", " "))
	}
	var mu sync.Mutex
	var kept *oauth.Login
	keep := func(l *oauth.Login) {
		mu.Lock()
		defer mu.Unlock()
		kept = l
	}
	var a mcp.Authorizer
	if f.clientSecret != "" {
		if f.clientID == "" {
			return fmt.Errorf("%w: --client-secret needs --client-id", errUsage)
		}
		a = &oauth.ClientCredentials{ClientID: f.clientID, ClientSecret: f.clientSecret, Scopes: scopes, OnLogin: keep}
	} else {
		a = &oauth.Interactive{ClientID: f.clientID, Scopes: scopes, RedirectHost: f.host, RedirectPort: f.port,
			ClientName: "mcpush CLI", OnLogin: keep, OpenBrowser: func(u string) error {
				fmt.Fprintf(e.stderr, "Sign in in your browser; if it does not open, visit:\n  %s\n", u)
				return e.openBrowser(u)
			}}
	}
	c.noLogin = true // sign in afresh, whatever is kept
	return withSession(ctx, e, c, &mcp.ClientOptions{NoStandaloneStream: true, Authorizer: a}, func(cs *mcp.ClientSession) error {
		if _, err := cs.ListTools(ctx); err != nil {
			return err
		}
		mu.Lock()
		l := kept
		mu.Unlock()
		if l == nil {
			return fmt.Errorf("%s did not ask for a token: nothing to keep", c.url)
		}
		if err := saveLogin(e.loginsPath, c.url, l); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "signed in to %s (authorization server %s, client %s); kept in %s\n", c.url, l.Issuer, l.ClientID, e.loginsPath)
		return nil
	})
}

// loginsMu serializes the read-modify-write of the logins file within
// the process.
var loginsMu sync.Mutex

func saveLogin(path, url string, l *oauth.Login) error {
	loginsMu.Lock()
	defer loginsMu.Unlock()
	ls, err := oauth.LoadLogins(path)
	if err != nil {
		return err
	}
	ls[url] = l
	return oauth.SaveLogins(path, ls)
}

// useLogin gives o the token source of the login kept for c.url, if any
// (and no Authorization header was given): tokens are refreshed as they
// expire, and the refreshed ones kept.
func useLogin(ctx context.Context, e *env, c *common, o *mcp.ClientOptions) error {
	if c.noLogin || e.loginsPath == "" || o.Header.Get("Authorization") != "" {
		return nil
	}
	ls, err := oauth.LoadLogins(e.loginsPath)
	if err != nil {
		return err
	}
	l, ok := ls[c.url]
	if !ok {
		return nil
	}
	o.TokenSource = l.TokenSource(context.WithoutCancel(ctx), &http.Client{Transport: o.HTTPClient.Transport}, func(nl *oauth.Login) {
		if nl.Token.AccessToken != l.Token.AccessToken {
			if err := saveLogin(e.loginsPath, c.url, nl); err != nil {
				fmt.Fprintf(e.stderr, "mcpush: keeping the refreshed token: %v\n", err)
			}
		}
	})
	return nil
}

package oauth_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/oauthtest"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/oauth"
)

// protectedServer serves an MCP server (one tool, "whoami", answering the
// principal) behind a Validator for as, on a real HTTP server, and
// returns its MCP URL.
func protectedServer(t *testing.T, as *oauthtest.Server, scope string) string {
	t.Helper()
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	v, err := oauth.New(&oauth.Options{Issuer: as.Issuer, Resource: ts.URL + "/mcp", Scopes: []string{scope}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{Authenticator: v})
	t.Cleanup(h.Close)
	mux.Handle("/mcp", h)
	mux.Handle(oauth.WellKnownPath+"/mcp", v.MetadataHandler())
	return ts.URL + "/mcp"
}

func connect(t *testing.T, url string, mode mcp.ClientMode, a mcp.Authorizer) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		Mode: mode, Authorizer: a, NoStandaloneStream: true, Logger: slog.New(slog.DiscardHandler)}).Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { cs.Close(context.Background()) })
	if _, err := cs.ListTools(t.Context()); err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	return cs
}

// TestClientCredentialsAuthorizer: pkg/mcp's client, refused with 401,
// discovers the authorization server from the challenge and gets a
// client-credentials token for the resource; both eras.
func TestClientCredentialsAuthorizer(t *testing.T) {
	as := startAS(t)
	url := protectedServer(t, as, "mcp:tools")
	for _, mode := range []mcp.ClientMode{mcp.ClientMode2025, mcp.ClientMode2026} {
		t.Run("mode "+string(mode), func(t *testing.T) {
			var got *oauth.Login
			connect(t, url, mode, &oauth.ClientCredentials{ClientID: "alice", ClientSecret: "alice-secret",
				OnLogin: func(l *oauth.Login) { got = l }})
			if got == nil || got.Resource != url || got.Issuer != as.Issuer || !got.ClientCredentials || got.Token.AccessToken == "" {
				t.Errorf("login = %+v", got)
			}
		})
	}
	t.Run("wrong secret", func(t *testing.T) {
		_, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
			Authorizer: &oauth.ClientCredentials{ClientID: "alice", ClientSecret: "nope"}, Logger: slog.New(slog.DiscardHandler)}).Connect(t.Context(), url)
		if err == nil {
			t.Error("connected with a wrong client secret")
		}
	})
	t.Run("scope the client cannot get", func(t *testing.T) {
		_, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
			Authorizer: &oauth.ClientCredentials{ClientID: "carol", ClientSecret: "carol-secret", Scopes: []string{"mcp:other"}},
			Logger:     slog.New(slog.DiscardHandler)}).Connect(t.Context(), url)
		if !errors.Is(err, mcp.ErrUnauthorizedRetry) {
			t.Errorf("err = %v, want ErrUnauthorizedRetry (403 after authorizing)", err)
		}
	})
}

// TestInteractiveAuthorizer: the authorization-code grant with PKCE, the
// resource parameter and a loopback redirect, with a scripted browser
// step: once with a client registered on the spot (dynamic
// registration), once with a registered public client; the login it
// reports refreshes its token.
func TestInteractiveAuthorizer(t *testing.T) {
	as := oauthtest.Start(t, &oauthtest.Options{
		Scopes:  []string{"mcp:tools"},
		Clients: []oauthtest.Client{{ID: "cli", RedirectURIs: []string{"http://127.0.0.1/callback"}}},
	})
	url := protectedServer(t, as, "mcp:tools")
	for _, clientID := range []string{"", "cli"} {
		t.Run("client "+clientID, func(t *testing.T) {
			var mu sync.Mutex
			var logins []*oauth.Login
			var visits atomic.Int64
			connect(t, url, mcp.ClientMode2025, &oauth.Interactive{ClientID: clientID, OpenBrowser: oauthtest.Browser("dave", &visits),
				OnLogin: func(l *oauth.Login) { mu.Lock(); logins = append(logins, l); mu.Unlock() }})
			if visits.Load() != 1 || len(logins) == 0 {
				t.Fatalf("%d browser visits, %d logins; want 1 and at least 1", visits.Load(), len(logins))
			}
			l := logins[len(logins)-1]
			if l.Token.RefreshToken == "" || l.Resource != url || (clientID != "" && l.ClientID != clientID) || l.ClientID == "" {
				t.Fatalf("login = %+v (token %+v)", l, l.Token)
			}
			// The kept login refreshes its expired token.
			old := *l
			tok := *l.Token
			tok.Expiry = time.Now().Add(-time.Minute)
			old.Token = &tok
			var saved *oauth.Login
			fresh, err := old.TokenSource(context.Background(), nil, func(l *oauth.Login) { saved = l }).Token()
			if err != nil || fresh.AccessToken == tok.AccessToken || saved == nil || saved.Token.AccessToken != fresh.AccessToken {
				t.Fatalf("refresh: %v; new token %v, saved %+v", err, fresh != nil && fresh.AccessToken != tok.AccessToken, saved)
			}
			// A later process uses the kept (refreshed) login as its token
			// source. (The refresh token rotated: the old one is spent.)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{Mode: mcp.ClientMode2026,
				TokenSource: saved.TokenSource(context.Background(), nil, nil), Logger: slog.New(slog.DiscardHandler)}).Connect(t.Context(), url)
			if err != nil {
				t.Fatalf("Connect with the kept login: %v", err)
			}
			cs.Close(context.Background())
		})
	}
}

// TestLogins: the logins file is written 0600 and read back; one others
// can read is refused.
func TestLogins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpush", "logins.json")
	want := oauth.Logins{"https://mcp.example/mcp": {Resource: "https://mcp.example/mcp", ClientID: "c", TokenEndpoint: "https://as.example/token"}}
	if err := oauth.SaveLogins(path, want); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v, want 0600", fi.Mode(), err)
	}
	got, err := oauth.LoadLogins(path)
	if err != nil || got["https://mcp.example/mcp"].ClientID != "c" {
		t.Fatalf("LoadLogins: %+v %v", got, err)
	}
	os.Chmod(path, 0o644)
	if _, err := oauth.LoadLogins(path); err == nil {
		t.Error("a logins file readable by others was accepted")
	}
	if ls, err := oauth.LoadLogins(filepath.Join(t.TempDir(), "none.json")); err != nil || len(ls) != 0 {
		t.Errorf("missing file: %v %v", ls, err)
	}
}

// TestClientIDMetadataDocument: where the authorization server supports
// Client ID Metadata Documents, Interactive uses the document's https URL
// as its client_id (the 2026-07-28 preference) instead of registering;
// the server fetches the document.
func TestClientIDMetadataDocument(t *testing.T) {
	var fetched atomic.Int64
	var docURL string
	doc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"client_id": docURL, "client_name": "mcpush test", "application_type": "native",
			"redirect_uris": []string{"http://127.0.0.1/callback"}, "grant_types": []string{"authorization_code", "refresh_token"},
			"response_types": []string{"code"}, "token_endpoint_auth_method": "none",
		})
	}))
	defer doc.Close()
	docURL = doc.URL + "/client.json"
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: doc.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	as := oauthtest.Start(t, &oauthtest.Options{Scopes: []string{"mcp:tools"}, ClientIDMetadataDocuments: true, CAFile: ca})
	url := protectedServer(t, as, "mcp:tools")
	var login *oauth.Login
	var visits atomic.Int64
	connect(t, url, mcp.ClientMode2025, &oauth.Interactive{ClientIDMetadataURL: docURL, OpenBrowser: oauthtest.Browser("frank", &visits),
		OnLogin: func(l *oauth.Login) { login = l }})
	if login == nil || login.ClientID != docURL || fetched.Load() == 0 || visits.Load() != 1 {
		t.Errorf("login %+v, document fetched %d times, %d browser visits; want the document URL as client id", login, fetched.Load(), visits.Load())
	}
}

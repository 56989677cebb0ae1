package serve

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/oauth"
)

func TestOptionsFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    *Options
		wantErr string
	}{
		{"defaults", nil, &Options{Lambda: LambdaOptions{Mode: ModeStream, Auth: AuthIAM}, Local: LocalOptions{Auth: AuthNone}}, ""},
		{"lambda", map[string]string{
			"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "MCPUSH_LAMBDA_MODE": "buffered", "MCPUSH_AUTH": "none",
			"MCPUSH_MAX_GET_STREAM": "30s", "MCPUSH_ALLOWED_HOSTS": " a.example , b.example,",
		}, &Options{
			RuntimeAPI: "127.0.0.1:9001",
			Lambda:     LambdaOptions{Mode: ModeBuffered, Auth: AuthNone, MaxGETStream: 30 * time.Second, AllowedHosts: []string{"a.example", "b.example"}},
			Local:      LocalOptions{Auth: AuthNone, AllowedHosts: []string{"a.example", "b.example"}},
		}, ""},
		{"local", map[string]string{"MCPUSH_ADDR": "127.0.0.1:0", "MCPUSH_ALLOWED_ORIGINS": "*"}, &Options{
			Lambda: LambdaOptions{Mode: ModeStream, Auth: AuthIAM, AllowedOrigins: []string{"*"}},
			Local:  LocalOptions{Auth: AuthNone, Addr: "127.0.0.1:0", AllowedOrigins: []string{"*"}},
		}, ""},
		{"stream hold", map[string]string{"MCPUSH_STREAM_HOLD": "30s"}, &Options{
			Lambda: LambdaOptions{Mode: ModeStream, Auth: AuthIAM, StreamHold: 30 * time.Second},
			Local:  LocalOptions{Auth: AuthNone, StreamHold: 30 * time.Second},
		}, ""},
		{"oauth", map[string]string{
			"MCPUSH_AUTH": "oauth", "MCPUSH_OAUTH_ISSUER": "https://as.example", "MCPUSH_RESOURCE_URL": "https://mcp.example/mcp",
			"MCPUSH_OAUTH_SCOPES": "mcp:read  mcp:tools", "MCPUSH_OAUTH_CLIENT_IDS": "c1,c2",
		}, &Options{
			Lambda: LambdaOptions{Mode: ModeStream, Auth: AuthOAuth, OAuth: oauth.Options{
				Issuer: "https://as.example", Resource: "https://mcp.example/mcp", Scopes: []string{"mcp:read", "mcp:tools"}, ClientIDs: []string{"c1", "c2"}}},
			Local: LocalOptions{Auth: AuthOAuth, OAuth: oauth.Options{
				Issuer: "https://as.example", Resource: "https://mcp.example/mcp", Scopes: []string{"mcp:read", "mcp:tools"}, ClientIDs: []string{"c1", "c2"}}},
		}, ""},
		// A mode the runtime cannot enforce is refused, never served open.
		{"oauth without issuer", map[string]string{"MCPUSH_AUTH": "oauth"}, nil, "MCPUSH_OAUTH_ISSUER is not set"},
		{"oauth http issuer", map[string]string{"MCPUSH_AUTH": "oauth", "MCPUSH_OAUTH_ISSUER": "http://as.example"}, nil, "http only on a loopback host"},
		{"unknown auth locally", map[string]string{"MCPUSH_AUTH": "jwt"}, nil, `MCPUSH_AUTH="jwt"`},
		{"iam locally", map[string]string{"MCPUSH_AUTH": "iam"}, nil, `MCPUSH_AUTH="iam"`},
		{"unknown auth in lambda", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "MCPUSH_AUTH": "open"}, nil, `MCPUSH_AUTH="open"`},
		{"stream hold to the deadline", map[string]string{"MCPUSH_STREAM_HOLD": "deadline"}, &Options{
			Lambda: LambdaOptions{Mode: ModeStream, Auth: AuthIAM, StreamHold: StreamHoldDeadline},
			Local:  LocalOptions{Auth: AuthNone, StreamHold: StreamHoldDeadline},
		}, ""},
		// Lambda Managed Instances set AWS_LAMBDA_MAX_CONCURRENCY; 1 or a
		// bad value is on-demand Lambda, as aws-lambda-go reads it.
		{"managed instances", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "AWS_LAMBDA_MAX_CONCURRENCY": "64"}, &Options{
			RuntimeAPI: "127.0.0.1:9001",
			Lambda:     LambdaOptions{Mode: ModeStream, Auth: AuthIAM, MaxConcurrency: 64},
			Local:      LocalOptions{Auth: AuthNone},
		}, ""},
		{"bad max concurrency", map[string]string{"AWS_LAMBDA_MAX_CONCURRENCY": "many"}, &Options{
			Lambda: LambdaOptions{Mode: ModeStream, Auth: AuthIAM},
			Local:  LocalOptions{Auth: AuthNone},
		}, ""},
		{"bad stream hold", map[string]string{"MCPUSH_STREAM_HOLD": "-1s"}, nil, `MCPUSH_STREAM_HOLD="-1s"`},
		{"bad duration", map[string]string{"MCPUSH_MAX_GET_STREAM": "soon"}, nil, `MCPUSH_MAX_GET_STREAM="soon"`},
		{"negative duration", map[string]string{"MCPUSH_MAX_GET_STREAM": "-1s"}, nil, `MCPUSH_MAX_GET_STREAM="-1s"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OptionsFromEnv(func(k string) string { return tc.env[k] }, nil)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrBadOption) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrBadOption with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(LocalOptions{}, "Ready")); diff != "" {
				t.Errorf("OptionsFromEnv (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLambdaStreamHoldDefaults: on-demand Lambda (MaxConcurrency 0 or 1)
// holds idle GET streams pkg/mcp's DefaultStreamHold; Managed Instances
// (MaxConcurrency above 1) hold them to the deadline; an explicit
// StreamHold wins in both.
func TestLambdaStreamHoldDefaults(t *testing.T) {
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, nil)
	for _, tc := range []struct {
		opts LambdaOptions
		want time.Duration
	}{
		{LambdaOptions{}, mcp.DefaultStreamHold},
		{LambdaOptions{MaxConcurrency: 1}, mcp.DefaultStreamHold},
		{LambdaOptions{MaxConcurrency: 2}, StreamHoldDeadline},
		{LambdaOptions{MaxConcurrency: 64, Mode: ModeBuffered}, StreamHoldDeadline},
		{LambdaOptions{MaxConcurrency: 64, StreamHold: 5 * time.Second}, 5 * time.Second},
		{LambdaOptions{StreamHold: StreamHoldDeadline}, StreamHoldDeadline},
	} {
		h, err := NewLambdaHandler(srv, &tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		h.Close()
		if got := h.StreamHold(); got != tc.want {
			t.Errorf("%+v: StreamHold %v, want %v", tc.opts, got, tc.want)
		}
		if got, want := h.MaxConcurrency(), max(tc.opts.MaxConcurrency, 1); got != want {
			t.Errorf("%+v: MaxConcurrency %d, want %d", tc.opts, got, want)
		}
	}
}

func TestNewLambdaHandlerBadOptions(t *testing.T) {
	for _, opts := range []*LambdaOptions{{Mode: "websocket"}, {Auth: "jwt"}, {Auth: AuthOAuth}, {Auth: AuthOAuth, OAuth: oauth.Options{Issuer: "http://as.example"}}} {
		if _, err := NewLambdaHandler(nil, opts); !errors.Is(err, ErrBadOption) {
			t.Errorf("NewLambdaHandler(%+v) = %v, want ErrBadOption", opts, err)
		}
	}
}

// TestBadOptionText: a bad mode or auth mode is checked by envconfig's
// parsers, one list of accepted values for the environment and the
// options, and is reported as envconfig reports it (the text sns-ingest
// prints for its own variables, docs/configuration.md), matching
// ErrBadOption and *envconfig.Error: the same value in the environment,
// in LambdaOptions and in LocalOptions gives the same message.
func TestBadOptionText(t *testing.T) {
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, nil)
	_, modeErr := envconfig.ParseMode("websocket")
	_, lambdaAuthErr := envconfig.ParseAuth("jwt", true)
	_, localAuthErr := envconfig.ParseAuth("iam", false)
	fromEnv := func(env map[string]string) error {
		_, err := OptionsFromEnv(func(k string) string { return env[k] }, nil)
		return err
	}
	lambda := "127.0.0.1:9001"
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"LambdaOptions.Mode", func() error { _, err := NewLambdaHandler(srv, &LambdaOptions{Mode: "websocket"}); return err }(), modeErr},
		{"MCPUSH_LAMBDA_MODE", fromEnv(map[string]string{"MCPUSH_LAMBDA_MODE": "websocket"}), modeErr},
		{"LambdaOptions.Auth", func() error { _, err := NewLambdaHandler(srv, &LambdaOptions{Auth: "jwt"}); return err }(), lambdaAuthErr},
		{"MCPUSH_AUTH in Lambda", fromEnv(map[string]string{"AWS_LAMBDA_RUNTIME_API": lambda, "MCPUSH_AUTH": "jwt"}), lambdaAuthErr},
		{"LocalOptions.Auth", ListenAndServe(context.Background(), srv, &LocalOptions{Addr: "127.0.0.1:0", Auth: AuthIAM}), localAuthErr},
		{"MCPUSH_AUTH locally", fromEnv(map[string]string{"MCPUSH_AUTH": "iam"}), localAuthErr},
	} {
		if tc.want == nil || tc.err == nil || tc.err.Error() != tc.want.Error() {
			t.Errorf("%s: %v\nwant %v", tc.name, tc.err, tc.want)
		}
		if !errors.Is(tc.err, ErrBadOption) || !errors.As(tc.err, new(*envconfig.Error)) {
			t.Errorf("%s: %v is not ErrBadOption and an *envconfig.Error", tc.name, tc.err)
		}
	}
}

// TestOptionsAuth: Options.Auth is the auth mode Run serves with, where
// the process runs, defaults included.
func TestOptionsAuth(t *testing.T) {
	for _, tc := range []struct {
		opts *Options
		want Auth
	}{
		{&Options{}, AuthNone},
		{&Options{RuntimeAPI: "127.0.0.1:9001"}, AuthIAM},
		{&Options{RuntimeAPI: "127.0.0.1:9001", Lambda: LambdaOptions{Auth: AuthNone}, Local: LocalOptions{Auth: AuthOAuth}}, AuthNone},
		{&Options{Lambda: LambdaOptions{Auth: AuthIAM}, Local: LocalOptions{Auth: AuthOAuth}}, AuthOAuth},
	} {
		if got := tc.opts.Auth(); got != tc.want {
			t.Errorf("%+v: Auth() = %q, want %q", tc.opts, got, tc.want)
		}
	}
	for env, want := range map[string]Auth{"": AuthNone, "oauth": AuthOAuth} {
		o, err := OptionsFromEnv(func(k string) string {
			if k == "MCPUSH_AUTH" {
				return env
			}
			return map[string]string{"MCPUSH_OAUTH_ISSUER": "https://as.example"}[k]
		}, nil)
		if err != nil || o.Auth() != want {
			t.Errorf("MCPUSH_AUTH=%q: Auth() = %v, %v; want %q", env, o, err, want)
		}
	}
	o, err := OptionsFromEnv(func(k string) string { return map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}[k] }, nil)
	if err != nil || o.Auth() != AuthIAM {
		t.Errorf("in Lambda: Auth() = %v, %v; want %q", o, err, AuthIAM)
	}
}

// TestListenAndServe: the local server answers MCP and /healthz, refuses a
// foreign Host on a loopback address, and returns nil after a graceful
// shutdown when its context ends.
func TestListenAndServe(t *testing.T) {
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	var logs testutil.LockedBuffer
	go func() {
		done <- ListenAndServe(ctx, srv, &LocalOptions{Addr: "127.0.0.1:0", Ready: func(a net.Addr) { ready <- a }, Logger: NewLogger(&logs)})
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("ListenAndServe: %v", err)
	}
	url := "http://" + addr.String() + "/mcp"
	resp, body := testutil.PostRead(t, nil, url, "", testutil.RPC(1, "initialize", map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"},
	}))
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Errorf("initialize: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr.String()+"/healthz", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("/healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	req, _ = http.NewRequest(http.MethodPost, url, strings.NewReader(testutil.RPC(1, "ping", nil)))
	req.Host = "evil.example" // DNS rebinding: a loopback server refuses it
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ListenAndServe after shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ListenAndServe did not return after its context ended")
	}
	if !strings.Contains(logs.String(), "shutting down") {
		t.Errorf("no shutdown log:\n%s", logs.String())
	}
}

// TestListenAndServeAuth: the local server refuses auth modes it cannot
// enforce before it listens, and with AuthOAuth serves the protected
// resource metadata for its default resource URL (http://ADDR/mcp, ADDR
// the listener's), challenges a request without a token, and answers 503
// when the authorization server cannot be reached.
func TestListenAndServeAuth(t *testing.T) {
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, nil)
	for _, o := range []LocalOptions{
		{Auth: AuthIAM}, {Auth: "open"}, {Auth: AuthOAuth}, {Auth: AuthOAuth, OAuth: oauth.Options{Issuer: "http://as.example"}},
	} {
		o.Addr = "127.0.0.1:0"
		if err := ListenAndServe(context.Background(), srv, &o); !errors.Is(err, ErrBadOption) {
			t.Errorf("ListenAndServe(Auth %q, issuer %q) = %v, want ErrBadOption", o.Auth, o.OAuth.Issuer, err)
		}
	}

	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + dead.Addr().String()
	dead.Close() // nothing answers there
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- ListenAndServe(ctx, srv, &LocalOptions{Addr: "127.0.0.1:0", Auth: AuthOAuth,
			OAuth: oauth.Options{Issuer: issuer, Scopes: []string{"mcp"}}, Ready: func(a net.Addr) { ready <- a }, Logger: NewLogger(io.Discard)})
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("ListenAndServe: %v", err)
	}
	base := "http://" + addr.String()
	for _, path := range []string{oauth.WellKnownPath, oauth.WellKnownPath + "/mcp"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		var got oauth.ResourceMetadata
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || got.Resource != base+"/mcp" || !slices.Equal(got.AuthorizationServers, []string{issuer}) {
			t.Errorf("GET %s: %+v %v", path, got, err)
		}
	}
	resp, body := testutil.PostRead(t, nil, base+"/mcp", "", testutil.RPC(1, "ping", nil))
	if want := `Bearer resource_metadata="` + base + `/.well-known/oauth-protected-resource/mcp", scope="mcp"`; resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != want {
		t.Errorf("no token: %d %q %s, want 401 %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, want)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": issuer, "sub": "s", "aud": base + "/mcp", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "k"
	signed, _ := tok.SignedString(key)
	resp, body = testutil.PostRead(t, nil, base+"/mcp", "", testutil.RPC(1, "ping", nil), "Authorization", "Bearer "+signed)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("issuer down: %d %s, want 503 with Retry-After", resp.StatusCode, body)
	}
	cancel()
	<-done
}

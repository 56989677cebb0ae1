package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

func TestOptionsFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    *Options
		wantErr string
	}{
		{"defaults", nil, &Options{Lambda: LambdaOptions{Mode: ModeStream, Auth: AuthIAM}}, ""},
		{"lambda", map[string]string{
			"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "MCPUSH_LAMBDA_MODE": "buffered", "MCPUSH_AUTH": "none",
			"MCPUSH_MAX_GET_STREAM": "30s", "MCPUSH_ALLOWED_HOSTS": " a.example , b.example,",
		}, &Options{
			RuntimeAPI: "127.0.0.1:9001",
			Lambda:     LambdaOptions{Mode: ModeBuffered, Auth: AuthNone, MaxGETStream: 30 * time.Second, AllowedHosts: []string{"a.example", "b.example"}},
			Local:      LocalOptions{AllowedHosts: []string{"a.example", "b.example"}},
		}, ""},
		{"local", map[string]string{"MCPUSH_ADDR": "127.0.0.1:0", "MCPUSH_ALLOWED_ORIGINS": "*"}, &Options{
			Lambda: LambdaOptions{Mode: ModeStream, Auth: AuthIAM, AllowedOrigins: []string{"*"}},
			Local:  LocalOptions{Addr: "127.0.0.1:0", AllowedOrigins: []string{"*"}},
		}, ""},
		{"stream hold", map[string]string{"MCPUSH_STREAM_HOLD": "30s"}, &Options{
			Lambda: LambdaOptions{Mode: ModeStream, Auth: AuthIAM, StreamHold: 30 * time.Second},
			Local:  LocalOptions{StreamHold: 30 * time.Second},
		}, ""},
		{"managed instances", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "AWS_LAMBDA_MAX_CONCURRENCY": "64"}, &Options{
			RuntimeAPI: "127.0.0.1:9001",
			Lambda:     LambdaOptions{Mode: ModeStream, Auth: AuthIAM, MaxConcurrency: 64},
		}, ""},
		{"bad concurrency", map[string]string{"AWS_LAMBDA_MAX_CONCURRENCY": "0"}, nil, `AWS_LAMBDA_MAX_CONCURRENCY="0"`},
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

func TestNewLambdaHandlerBadOptions(t *testing.T) {
	for _, opts := range []*LambdaOptions{{Mode: "websocket"}, {Auth: "jwt"}} {
		if _, err := NewLambdaHandler(nil, opts); !errors.Is(err, ErrBadOption) {
			t.Errorf("NewLambdaHandler(%+v) = %v, want ErrBadOption", opts, err)
		}
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

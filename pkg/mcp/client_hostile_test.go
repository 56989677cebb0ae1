package mcp_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/hostile"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// TestClientIdleTimeout: a server whose streams send their first event and
// then nothing, not even a keep-alive (a stopped process). With
// IdleTimeout 1s the client cuts the stream and resumes the GET stream
// with Last-Event-ID (2025), listens again (2026), and resumes a
// tools/call stream with Last-Event-ID, which then gets its response.
func TestClientIdleTimeout(t *testing.T) {
	for _, tc := range []struct {
		mode  mcp.ClientMode
		kind  string // the request that counts a resumption
		least int
	}{
		{mcp.ClientMode2025, "GET resume", 1},
		{mcp.ClientMode2026, "POST subscriptions/listen", 2},
	} {
		t.Run("mode "+string(tc.mode), func(t *testing.T) {
			srv := hostile.Start(t, hostile.Stall, nil)
			client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
				Mode: tc.mode, IdleTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cs, err := client.Connect(ctx, srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close(ctx)
			waitFor(t, tc.kind, func() bool { return srv.Count(tc.kind) >= tc.least })
			if tc.mode == mcp.ClientMode2025 {
				for _, h := range srv.Headers() {
					if h.Get("Last-Event-ID") != "" && !strings.HasPrefix(h.Get("Last-Event-ID"), "g") {
						t.Errorf("resumed with Last-Event-ID %q, want the stalled stream's g...", h.Get("Last-Event-ID"))
					}
				}
				start := time.Now()
				res, err := cs.CallTool(ctx, "slow", nil, nil)
				if err != nil {
					t.Fatalf("tools/call on a stalled stream: %v", err)
				}
				if res.IsError || time.Since(start) < time.Second {
					t.Errorf("tools/call: %+v after %v, want its result after the idle timeout", res, time.Since(start))
				}
			}
			t.Logf("%s: %d after %d requests", tc.kind, srv.Count(tc.kind), srv.Requests())
		})
	}
}

// TestClientRedirectOrigin: the client follows a redirect within the
// origin and refuses one to another origin, with ErrCrossOriginRedirect,
// before the other origin gets a request (with the client's headers).
func TestClientRedirectOrigin(t *testing.T) {
	target := hostile.Start(t, hostile.Normal, nil)
	away := hostile.Start(t, hostile.Redirect, &hostile.Options{RedirectTo: target.URL})
	home := hostile.Start(t, hostile.Redirect, nil)
	opts := &mcp.ClientOptions{Header: http.Header{"X-Api-Key": {"k"}}, NoStandaloneStream: true, Logger: slog.New(slog.DiscardHandler)}
	ctx := t.Context()
	_, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, opts).Connect(ctx, strings.TrimSuffix(away.URL, "/mcp")+"/old")
	if !errors.Is(err, mcp.ErrCrossOriginRedirect) {
		t.Errorf("cross-origin redirect: %v, want ErrCrossOriginRedirect", err)
	}
	if n := target.Requests(); n != 0 {
		t.Errorf("the other origin got %d requests", n)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, opts).Connect(ctx, strings.TrimSuffix(home.URL, "/mcp")+"/old")
	if err != nil {
		t.Fatalf("same-origin redirect: %v", err)
	}
	cs.Close(ctx)
	if n := home.Count("POST initialize"); n != 1 {
		t.Errorf("same origin: %d initialize at /mcp, want 1", n)
	}
}

// Command mcp serves MCP over Streamable HTTP. Outside Lambda it runs a
// local HTTP server (MCPUSH_ADDR, default 127.0.0.1:8080) at /mcp. In
// Lambda (AWS_LAMBDA_RUNTIME_API is set) it serves a Function URL or an
// HTTP API instead; see lambda.go and docs/lambda.md.
//
// It only wires: it reads the environment, opens the store, builds the
// server and serves it. See the README for the environment variables.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcpush/mcpush/internal/builtin"
	"github.com/mcpush/mcpush/internal/conformance"
	"github.com/mcpush/mcpush/internal/storeconfig"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	var logger *slog.Logger
	runtimeAPI := os.Getenv("AWS_LAMBDA_RUNTIME_API")
	if runtimeAPI == "" {
		logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	} else {
		logger = slog.New(requestIDHandler{slog.NewJSONHandler(os.Stdout, nil)})
	}
	if err := run(logger, runtimeAPI); err != nil {
		logger.Error("mcp server failed", "err", err)
		if runtimeAPI != "" {
			if rerr := reportInitError(runtimeAPI, err); rerr != nil {
				logger.Error("reporting the init error", "err", rerr)
			}
		}
		os.Exit(1)
	}
}

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// durationEnv reads a Go duration ("5s") from the environment; unset is 0.
func durationEnv(name string) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a duration such as 5s or 10m", name, v)
	}
	return d, nil
}

// intEnv reads a positive integer from the environment; unset is 0 (the
// default).
func intEnv(name string) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive integer", name, v)
	}
	return n, nil
}

// run serves until a signal; in Lambda (runtimeAPI set) until the sandbox
// ends.
func run(logger *slog.Logger, runtimeAPI string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	addr := getenv("MCPUSH_ADDR", "127.0.0.1:8080")
	spec := getenv("MCPUSH_STORE", storeconfig.DefaultSpec)
	if runtimeAPI != "" && os.Getenv("MCPUSH_STORE") == "" {
		// A SQLite file would be private to one sandbox: sessions would
		// not survive the next instance.
		return errors.New("MCPUSH_STORE is not set: in Lambda set MCPUSH_STORE=dynamodb:TABLE (template.yaml does)")
	}
	store, err := storeconfig.Open(ctx, spec, &storeconfig.Options{CreateTable: os.Getenv("MCPUSH_CREATE_TABLE") == "1"})
	if err != nil {
		return err
	}
	defer store.Close()

	fixtures := os.Getenv("MCPUSH_FIXTURES")
	opts := &mcp.ServerOptions{Logger: logger, DynamicRegistries: true}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{
		{"MCPUSH_POLL_INTERVAL", &opts.PollInterval},
		{"MCPUSH_REGISTRY_REFRESH", &opts.RegistryRefresh},
		{"MCPUSH_SESSION_TTL", &opts.SessionIdleTimeout},
	} {
		if *d.dst, err = durationEnv(d.name); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		name string
		dst  *int
	}{
		{"MCPUSH_MAX_CLIENT_INFO_BYTES", &opts.Limits.MaxClientInfoBytes},
		{"MCPUSH_MAX_PROMPT_ARGUMENT_BYTES", &opts.Limits.MaxPromptArgumentBytes},
		{"MCPUSH_MAX_PROMPT_BYTES", &opts.Limits.MaxPromptBytes},
		{"MCPUSH_MAX_SUBSCRIPTION_URI_BYTES", &opts.Limits.MaxSubscriptionURIBytes},
		{"MCPUSH_MAX_SUBSCRIPTIONS", &opts.Limits.MaxSubscriptions},
		{"MCPUSH_MAX_INFLIGHT_PER_SESSION", &opts.Limits.MaxInFlightPerSession},
		{"MCPUSH_MAX_INFLIGHT", &opts.Limits.MaxInFlight},
		{"MCPUSH_MAX_STREAMS_PER_SESSION", &opts.Limits.MaxStreamsPerSession},
	} {
		if *l.dst, err = intEnv(l.name); err != nil {
			return err
		}
	}
	if opts.Limits.BodyReadTimeout, err = durationEnv("MCPUSH_BODY_READ_TIMEOUT"); err != nil {
		return err
	}
	switch fixtures {
	case "":
	case "conformance":
		opts.CompletionHandler = conformance.Complete
	default:
		return fmt.Errorf("MCPUSH_FIXTURES=%q: the only fixture set is \"conformance\"", fixtures)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpush", Version: version}, store, opts)
	builtin.Register(srv, store, &builtin.Options{PollInterval: opts.PollInterval})
	if fixtures == "conformance" {
		conformance.Register(srv)
	}

	if runtimeAPI != "" {
		maxGET, err := durationEnv("MCPUSH_MAX_GET_STREAM")
		if err != nil {
			return err
		}
		lopts := &lambdaOptions{
			Mode:           getenv("MCPUSH_LAMBDA_MODE", modeStream),
			Auth:           getenv("MCPUSH_AUTH", authIAM),
			AllowedHosts:   splitList(os.Getenv("MCPUSH_ALLOWED_HOSTS")),
			AllowedOrigins: splitList(os.Getenv("MCPUSH_ALLOWED_ORIGINS")),
			MaxGETStream:   maxGET,
		}
		h, err := newLambdaHandler(srv, logger, lopts)
		if err != nil {
			return err
		}
		logger.Info("serving MCP in Lambda", "mode", lopts.Mode, "auth", lopts.Auth, "store", spec)
		h.start() // never returns
	}

	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("MCPUSH_ADDR=%q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	handler := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{
		LocalhostOnly:  host == "localhost" || (ip != nil && ip.IsLoopback()),
		AllowedHosts:   splitList(os.Getenv("MCPUSH_ALLOWED_HOSTS")),
		AllowedOrigins: splitList(os.Getenv("MCPUSH_ALLOWED_ORIGINS")),
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	// Slow clients cannot hold connections: headers within 10s, a POST
	// body within mcp.Limits.BodyReadTimeout (set by the handler, which
	// lifts it for the SSE stream that may follow), idle keep-alive
	// connections 2 minutes. No ReadTimeout or WriteTimeout: they would
	// cut long-lived streams.
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	logger.Info("serving MCP", "url", "http://"+ln.Addr().String()+"/mcp", "store", spec)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down: closing streams with retry")
	go handler.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		// A stream that cannot be closed with retry: (a session before
		// 2025-11-25 has no event id to resume from) is cut: a normal end.
		logger.Warn("shutting down: closing the connections still open after 10s", "err", err)
		hs.Close()
	}
	handler.Close()
	return nil
}

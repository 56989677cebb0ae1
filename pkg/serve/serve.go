package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// Options configure Run.
type Options struct {
	// RuntimeAPI is the address of the Lambda Runtime API
	// (AWS_LAMBDA_RUNTIME_API). When it is set Run serves Lambda
	// invocations; otherwise it runs a local HTTP server.
	RuntimeAPI string
	// Lambda configures the handler in Lambda.
	Lambda LambdaOptions
	// Local configures the local HTTP server.
	Local LocalOptions
}

// Run serves srv: in Lambda (RuntimeAPI set) through a LambdaHandler until
// the sandbox ends, never returning unless the options are bad; otherwise
// on a local HTTP server (ListenAndServe) until ctx is done. Nil opts
// serve locally with defaults.
func Run(ctx context.Context, srv *mcp.Server, opts *Options) error {
	if opts == nil {
		opts = &Options{}
	}
	if opts.RuntimeAPI == "" {
		return ListenAndServe(ctx, srv, &opts.Local)
	}
	h, err := NewLambdaHandler(srv, &opts.Lambda)
	if err != nil {
		return err
	}
	h.log.Info("serving MCP in Lambda", "mode", h.mode, "auth", opts.Lambda.Auth)
	h.Start() // never returns
	return nil
}

// DefaultAddr is the address of the local server when LocalOptions.Addr is
// empty.
const DefaultAddr = "127.0.0.1:8080"

// LocalOptions configure ListenAndServe.
type LocalOptions struct {
	// Addr is the TCP address to listen on; default DefaultAddr. On a
	// loopback address (or "localhost") the server only accepts loopback
	// Host names, against DNS rebinding.
	Addr           string
	AllowedHosts   []string // if set, the only Host names accepted
	AllowedOrigins []string // browser origins accepted ("*": any)
	// StreamHold is mcp.StreamableOptions.StreamHold: how long an idle
	// GET stream stays open after activity. 0 means pkg/mcp's default.
	StreamHold time.Duration
	// ShutdownTimeout bounds the graceful shutdown once ctx is done;
	// default 10s.
	ShutdownTimeout time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Ready, if set, is called with the listener's address once the
	// server accepts connections (useful with port 0).
	Ready func(addr net.Addr)
}

// ListenAndServe serves srv at /mcp (and "ok" at /healthz) on a local
// HTTP server until ctx is done (a SIGTERM or an interrupt, with
// signal.NotifyContext), then shuts down gracefully: open streams end with
// "retry:" so clients reconnect elsewhere, and in-flight requests get
// ShutdownTimeout to finish; connections still open then (a stream of a
// session before 2025-11-25 cannot end with "retry:") are closed. It
// returns nil after a shutdown, an error only when serving fails.
func ListenAndServe(ctx context.Context, srv *mcp.Server, opts *LocalOptions) error {
	if opts == nil {
		opts = &LocalOptions{}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	addr := opts.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	shutdown := opts.ShutdownTimeout
	if shutdown <= 0 {
		shutdown = 10 * time.Second
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("MCPUSH_ADDR=%q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	handler := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{
		LocalhostOnly:  host == "localhost" || (ip != nil && ip.IsLoopback()),
		AllowedHosts:   opts.AllowedHosts,
		AllowedOrigins: opts.AllowedOrigins,
		StreamHold:     opts.StreamHold,
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
	logger.Info("serving MCP", "url", "http://"+ln.Addr().String()+"/mcp")
	if opts.Ready != nil {
		opts.Ready(ln.Addr())
	}

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down: closing streams with retry")
	go handler.Close()
	sctx, cancel := context.WithTimeout(context.Background(), shutdown)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		// A stream that cannot be closed with retry: (a session before
		// 2025-11-25 has no event id to resume from) is cut: still a
		// normal end.
		logger.Warn("shutting down: closing the connections still open", "after", shutdown)
		hs.Close()
	}
	handler.Close()
	return nil
}

// NewLogger returns a JSON logger writing to w whose records carry the
// Lambda request id of the invocation in their context (RequestIDHandler).
// Outside Lambda it is a plain JSON logger.
func NewLogger(w io.Writer) *slog.Logger {
	return slog.New(RequestIDHandler{slog.NewJSONHandler(w, nil)})
}

// OptionsFromEnv reads Options from the environment through getenv
// (os.Getenv in a main; the package itself never reads the environment):
//
//	AWS_LAMBDA_RUNTIME_API   set by Lambda: serve invocations
//	MCPUSH_ADDR              local address (default 127.0.0.1:8080)
//	MCPUSH_LAMBDA_MODE       stream (default) or buffered
//	MCPUSH_AUTH              iam (default) or none
//	MCPUSH_ALLOWED_HOSTS     comma-separated Host names accepted
//	MCPUSH_ALLOWED_ORIGINS   comma-separated browser origins accepted
//	MCPUSH_MAX_GET_STREAM    a Go duration bounding GET streams in Lambda
//	MCPUSH_STREAM_HOLD       how long an idle GET stream stays open (default 5s;
//	                         held to the deadline on Lambda Managed Instances)
//	AWS_LAMBDA_MAX_CONCURRENCY  set by Lambda Managed Instances: invocations
//	                         one environment runs at once
//
// logger becomes the logger of both modes. Bad values are errors wrapping
// ErrBadOption.
func OptionsFromEnv(getenv func(string) string, logger *slog.Logger) (*Options, error) {
	maxGET, err := DurationEnv(getenv, "MCPUSH_MAX_GET_STREAM")
	if err != nil {
		return nil, err
	}
	hold, err := DurationEnv(getenv, "MCPUSH_STREAM_HOLD")
	if err != nil {
		return nil, err
	}
	concurrency := 0
	if v := getenv("AWS_LAMBDA_MAX_CONCURRENCY"); v != "" {
		if concurrency, err = strconv.Atoi(v); err != nil || concurrency < 1 {
			return nil, fmt.Errorf("%w: AWS_LAMBDA_MAX_CONCURRENCY=%q: want a positive integer", ErrBadOption, v)
		}
	}
	hosts := SplitList(getenv("MCPUSH_ALLOWED_HOSTS"))
	origins := SplitList(getenv("MCPUSH_ALLOWED_ORIGINS"))
	o := &Options{
		RuntimeAPI: getenv("AWS_LAMBDA_RUNTIME_API"),
		Lambda: LambdaOptions{
			Mode:           getenv("MCPUSH_LAMBDA_MODE"),
			Auth:           getenv("MCPUSH_AUTH"),
			AllowedHosts:   hosts,
			AllowedOrigins: origins,
			MaxGETStream:   maxGET,
			StreamHold:     hold,
			MaxConcurrency: concurrency,
			Logger:         logger,
		},
		Local: LocalOptions{
			Addr:           getenv("MCPUSH_ADDR"),
			AllowedHosts:   hosts,
			AllowedOrigins: origins,
			StreamHold:     hold,
			Logger:         logger,
		},
	}
	if o.Lambda.Mode == "" {
		o.Lambda.Mode = ModeStream
	}
	if o.Lambda.Auth == "" {
		o.Lambda.Auth = AuthIAM
	}
	return o, nil
}

// SplitList splits a comma-separated list, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// DurationEnv reads the Go duration ("5s") named name through getenv;
// unset is 0. A bad or negative value is an error wrapping ErrBadOption.
func DurationEnv(getenv func(string) string, name string) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: %s=%q: want a duration such as 5s or 10m", ErrBadOption, name, v)
	}
	return d, nil
}

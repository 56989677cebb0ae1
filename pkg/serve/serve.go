package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/oauth"
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

// Auth is the auth mode Run serves with: Lambda.Auth in Lambda
// (RuntimeAPI set), else Local.Auth, or when that is empty its default
// there, AuthIAM in Lambda and AuthNone locally (as NewLambdaHandler and
// ListenAndServe take an empty one).
func (o *Options) Auth() Auth {
	if o.RuntimeAPI != "" {
		return cmp.Or(o.Lambda.Auth, AuthIAM)
	}
	return cmp.Or(o.Local.Auth, AuthNone)
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
	h.log.Info("serving MCP in Lambda", "mode", h.mode, "auth", opts.Auth(),
		"maxConcurrency", h.concurrency, "streamHold", holdString(h.hold))
	h.Start() // never returns
	return nil
}

// DefaultLocalStreamHold is the LocalOptions.StreamHold of a zero value:
// streams are held until the client leaves (or the server shuts down), so
// an idle client makes no request after it opens its GET stream (or its
// subscriptions/listen stream), where SSE polling would cost it one a
// second.
const DefaultLocalStreamHold = StreamHoldDeadline

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
	// Auth is AuthNone (default: every caller is the anonymous
	// principal) or AuthOAuth. AuthIAM is refused: only Lambda checks
	// SigV4 signatures.
	Auth Auth
	// OAuth configures the token validator of AuthOAuth. An empty
	// Resource is http://{the listener's address}/mcp.
	OAuth oauth.Options
	// StreamHold is mcp.StreamableOptions.StreamHold: how long an idle
	// GET stream stays open after activity (StreamHoldDeadline: until
	// the client leaves). 0 means DefaultLocalStreamHold: a process that
	// runs on holds streams, since a held stream costs it almost nothing
	// (on-demand Lambda, where it is a billed invocation, polls instead:
	// LambdaOptions.StreamHold).
	StreamHold time.Duration
	// ShutdownTimeout bounds the graceful shutdown once ctx is done;
	// default 10s.
	ShutdownTimeout time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Ready, if set, is called with the listener's address once the
	// server accepts connections (useful with port 0).
	Ready func(addr net.Addr)
	// Metrics serves the process's metrics in the Prometheus text
	// format at /metrics (metrics.Handler; MCPUSH_METRICS=prometheus,
	// the local default).
	Metrics bool
}

// ListenAndServe serves srv at /mcp (and "ok" at /healthz, the metrics at
// /metrics when LocalOptions.Metrics is set) on a local
// HTTP server until ctx is done (a SIGTERM or an interrupt, with
// signal.NotifyContext), then shuts down gracefully: open streams end with
// "retry:" so clients reconnect elsewhere, tasks whose work runs here end
// failed (mcp.Server.ShutdownTasks), and in-flight requests get
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
	if _, err := envconfig.ParseAuth(string(opts.Auth), false); err != nil {
		return badOption{err} // "iam" too: only a Lambda Function URL checks IAM signatures
	}
	if opts.Auth == AuthOAuth {
		// Check the options before listening; the resource URL of a
		// port-0 listener is known only afterwards.
		o := opts.OAuth
		if o.Resource == "" {
			o.Resource = "http://" + addr + "/mcp"
		}
		if _, err := oauth.New(&o); err != nil {
			return fmt.Errorf("%w: %v", ErrBadOption, err)
		}
	}

	hold := opts.StreamHold
	if hold == 0 {
		hold = DefaultLocalStreamHold
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	sopts := &mcp.StreamableOptions{
		LocalhostOnly:  host == "localhost" || (ip != nil && ip.IsLoopback()),
		AllowedHosts:   opts.AllowedHosts,
		AllowedOrigins: opts.AllowedOrigins,
		StreamHold:     hold,
	}
	mux := http.NewServeMux()
	if opts.Auth == AuthOAuth {
		o := opts.OAuth
		if o.Resource == "" {
			o.Resource = "http://" + ln.Addr().String() + "/mcp"
		}
		if o.Logger == nil {
			o.Logger = logger
		}
		v, err := oauth.New(&o)
		if err != nil {
			ln.Close()
			return fmt.Errorf("%w: %v", ErrBadOption, err)
		}
		sopts.Authenticator = v
		mountMetadata(mux, v, o.Resource)
		logger.Info("OAuth resource server", "resource", o.Resource, "issuer", o.Issuer, "scopes", o.Scopes)
	}
	handler := mcp.NewStreamableHandler(srv, sopts)
	mux.Handle("/mcp", handler)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	if opts.Metrics {
		mux.Handle("/metrics", metrics.Handler())
	}
	// Slow clients cannot hold connections: headers within 10s, a POST
	// body within mcp.Limits.BodyReadTimeout (set by the handler, which
	// lifts it for the SSE stream that may follow), idle keep-alive
	// connections 2 minutes. No ReadTimeout or WriteTimeout: they would
	// cut long-lived streams.
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	logger.Info("serving MCP", "url", "http://"+ln.Addr().String()+"/mcp", "streamHold", holdString(hold))
	if opts.Ready != nil {
		opts.Ready(ln.Addr())
	}

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down: closing streams with retry, failing the tasks running here")
	go handler.Close()
	sctx, cancel := context.WithTimeout(context.Background(), shutdown)
	defer cancel()
	// Tasks whose work runs or waits here fail at once, saying so, rather
	// than stay working until their lease reports a crash.
	tasksDone := make(chan error, 1)
	go func() { tasksDone <- srv.ShutdownTasks(sctx) }()
	defer func() {
		if err := <-tasksDone; err != nil {
			logger.Warn("shutting down: task work still running", "err", err)
		}
	}()
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

// holdString is a StreamHold as MCPUSH_STREAM_HOLD spells it.
func holdString(hold time.Duration) string {
	if hold < 0 {
		return "deadline"
	}
	return hold.String()
}

// mountMetadata serves v's protected resource metadata at
// /.well-known/oauth-protected-resource and at that path with the path of
// resource (or /mcp when the resource is derived per request) appended
// (RFC 9728 §3.1).
func mountMetadata(mux *http.ServeMux, v *oauth.Validator, resource string) {
	path := "/mcp"
	if resource != "" {
		if u, err := url.Parse(resource); err == nil {
			path = strings.TrimSuffix(u.Path, "/")
		}
	}
	mux.Handle(oauth.WellKnownPath, v.MetadataHandler())
	if path != "" {
		mux.Handle(oauth.WellKnownPath+path, v.MetadataHandler())
	}
}

// NewLogger returns a JSON logger writing to w whose records carry the
// Lambda request id of the invocation in their context (RequestIDHandler).
// Outside Lambda it is a plain JSON logger.
func NewLogger(w io.Writer) *slog.Logger {
	return slog.New(RequestIDHandler{slog.NewJSONHandler(w, nil)})
}

// OptionsFromEnv reads Options from the environment through getenv
// (os.Getenv in a main; the package itself never reads the environment)
// with envconfig.ReadServe, which names the variables:
//
//	AWS_LAMBDA_RUNTIME_API   set by Lambda: serve invocations
//	MCPUSH_ADDR              local address (default 127.0.0.1:8080)
//	MCPUSH_LAMBDA_MODE       stream (default) or buffered
//	MCPUSH_AUTH              in Lambda iam (default), none or oauth; locally none (default) or oauth
//	MCPUSH_OAUTH_ISSUER      the authorization server's issuer URL (oauth; required)
//	MCPUSH_RESOURCE_URL      the MCP endpoint's canonical URL (oauth; default
//	                         http://$MCPUSH_ADDR/mcp locally, https://{Host}/mcp in Lambda)
//	MCPUSH_OAUTH_SCOPES      space- or comma-separated scopes every request needs
//	MCPUSH_OAUTH_AUDIENCES   further accepted "aud" values (comma-separated)
//	MCPUSH_OAUTH_CLIENT_IDS  app clients whose tokens may lack "aud" (Cognito)
//	MCPUSH_ALLOWED_HOSTS     comma-separated Host names accepted
//	MCPUSH_ALLOWED_ORIGINS   comma-separated browser origins accepted
//	MCPUSH_MAX_GET_STREAM    a Go duration bounding GET streams in Lambda
//	MCPUSH_STREAM_HOLD       how long an idle GET stream stays open ("deadline":
//	                         hold it to the invocation deadline, or locally until
//	                         the client leaves; default 5s on on-demand Lambda,
//	                         "deadline" locally)
//	AWS_LAMBDA_MAX_CONCURRENCY  set by Lambda Managed Instances: invocations
//	                         served at once; above 1, streams are held to
//	                         the deadline unless MCPUSH_STREAM_HOLD says otherwise
//
// logger becomes the logger of both modes. A bad value is an
// *envconfig.Error, which names the variable, the value and what it
// accepts, with that text alone (as sns-ingest prints its variables); it
// also matches ErrBadOption (errors.Is). Lambda.Auth and Local.Auth each
// get their default (Options.Auth).
func OptionsFromEnv(getenv func(string) string, logger *slog.Logger) (*Options, error) {
	c, err := envconfig.ReadServe(getenv)
	if err != nil {
		return nil, badOption{err}
	}
	oopts := oauth.Options{
		Issuer:    c.OAuth.Issuer,
		Resource:  c.OAuth.Resource,
		Scopes:    c.OAuth.Scopes,
		Audiences: c.OAuth.Audiences,
		ClientIDs: c.OAuth.ClientIDs,
	}
	if c.Auth == AuthOAuth {
		// A mode the runtime cannot enforce is refused at start-up,
		// never served open.
		if _, err := oauth.New(&oopts); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadOption, err)
		}
	}
	o := &Options{
		RuntimeAPI: c.RuntimeAPI,
		Lambda: LambdaOptions{
			Mode:           c.Mode,
			Auth:           c.Auth,
			OAuth:          oopts,
			AllowedHosts:   c.AllowedHosts,
			AllowedOrigins: c.AllowedOrigins,
			MaxGETStream:   c.MaxGETStream,
			StreamHold:     c.StreamHold,
			Logger:         logger,
		},
		Local: LocalOptions{
			Addr:           c.Addr,
			Auth:           c.Auth,
			OAuth:          oopts,
			AllowedHosts:   c.AllowedHosts,
			AllowedOrigins: c.AllowedOrigins,
			StreamHold:     c.StreamHold,
			Logger:         logger,
		},
	}
	// Each with its default: Options.Auth is the one Run serves with.
	o.Lambda.Auth = cmp.Or(c.Auth, AuthIAM)
	o.Local.Auth = cmp.Or(c.Auth, AuthNone)
	if c.MaxConcurrency > 1 {
		o.Lambda.MaxConcurrency = c.MaxConcurrency // Lambda Managed Instances
	}
	return o, nil
}

package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
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
	h.log.Info("serving MCP in Lambda", "mode", h.mode, "auth", opts.Lambda.Auth,
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
	Auth string
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
}

// ListenAndServe serves srv at /mcp (and "ok" at /healthz) on a local
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
	switch opts.Auth {
	case "", AuthNone, AuthOAuth:
	case AuthIAM:
		return fmt.Errorf("%w: MCPUSH_AUTH=%q: only a Lambda Function URL checks IAM signatures; the local server takes %q or %q", ErrBadOption, opts.Auth, AuthNone, AuthOAuth)
	default:
		return fmt.Errorf("%w: MCPUSH_AUTH=%q: want %q or %q", ErrBadOption, opts.Auth, AuthNone, AuthOAuth)
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
// (os.Getenv in a main; the package itself never reads the environment):
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
// logger becomes the logger of both modes. Bad values are errors wrapping
// ErrBadOption.
func OptionsFromEnv(getenv func(string) string, logger *slog.Logger) (*Options, error) {
	maxGET, err := DurationEnv(getenv, "MCPUSH_MAX_GET_STREAM")
	if err != nil {
		return nil, err
	}
	hold := StreamHoldDeadline
	if getenv("MCPUSH_STREAM_HOLD") != "deadline" {
		if hold, err = DurationEnv(getenv, "MCPUSH_STREAM_HOLD"); err != nil {
			return nil, err
		}
	}
	auth := getenv("MCPUSH_AUTH")
	oopts := oauth.Options{
		Issuer:    getenv("MCPUSH_OAUTH_ISSUER"),
		Resource:  getenv("MCPUSH_RESOURCE_URL"),
		Scopes:    SplitList(strings.ReplaceAll(getenv("MCPUSH_OAUTH_SCOPES"), " ", ",")),
		Audiences: SplitList(getenv("MCPUSH_OAUTH_AUDIENCES")),
		ClientIDs: SplitList(getenv("MCPUSH_OAUTH_CLIENT_IDS")),
	}
	if auth == AuthOAuth {
		if _, err := oauth.New(&oopts); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadOption, err)
		}
	}
	hosts := SplitList(getenv("MCPUSH_ALLOWED_HOSTS"))
	origins := SplitList(getenv("MCPUSH_ALLOWED_ORIGINS"))
	o := &Options{
		RuntimeAPI: getenv("AWS_LAMBDA_RUNTIME_API"),
		Lambda: LambdaOptions{
			Mode:           getenv("MCPUSH_LAMBDA_MODE"),
			Auth:           auth,
			OAuth:          oopts,
			AllowedHosts:   hosts,
			AllowedOrigins: origins,
			MaxGETStream:   maxGET,
			StreamHold:     hold,
			Logger:         logger,
		},
		Local: LocalOptions{
			Addr:           getenv("MCPUSH_ADDR"),
			Auth:           auth,
			OAuth:          oopts,
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
	if o.Local.Auth == "" {
		o.Local.Auth = AuthNone
	}
	if n := MaxConcurrency(getenv); n > 1 {
		o.Lambda.MaxConcurrency = n // Lambda Managed Instances
	}
	// A bad auth mode is refused at start-up, never served open.
	if o.RuntimeAPI == "" {
		if o.Local.Auth != AuthNone && o.Local.Auth != AuthOAuth {
			return nil, fmt.Errorf("%w: MCPUSH_AUTH=%q: the local server takes %q or %q (%q needs a Lambda Function URL with AuthType AWS_IAM)", ErrBadOption, auth, AuthNone, AuthOAuth, AuthIAM)
		}
	} else if a := o.Lambda.Auth; a != AuthIAM && a != AuthNone && a != AuthOAuth {
		return nil, fmt.Errorf("%w: MCPUSH_AUTH=%q: want %q, %q or %q", ErrBadOption, auth, AuthIAM, AuthNone, AuthOAuth)
	}
	return o, nil
}

// MaxConcurrency reads AWS_LAMBDA_MAX_CONCURRENCY through getenv the way
// aws-lambda-go does (lambdacontext.MaxConcurrency): a positive integer,
// else 1. Lambda Managed Instances set it from the function's
// PerExecutionEnvironmentMaxConcurrency; on-demand Lambda does not set it.
func MaxConcurrency(getenv func(string) string) int {
	n, err := strconv.Atoi(getenv("AWS_LAMBDA_MAX_CONCURRENCY"))
	if err != nil || n < 1 {
		return 1
	}
	return n
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

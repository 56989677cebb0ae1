package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/oauth"
	"github.com/mcpush/mcpush/pkg/serve/initerror"
)

// Mode is how a LambdaHandler answers (LambdaOptions.Mode;
// MCPUSH_LAMBDA_MODE in OptionsFromEnv). It is envconfig.Mode, declared
// there so that the environment is read in one package that links no MCP
// code.
type Mode = envconfig.Mode

// Lambda modes.
const (
	// ModeStream serves a Function URL in RESPONSE_STREAM mode through
	// lambdaurl: SSE events reach the client as they are written.
	ModeStream = envconfig.ModeStream
	// ModeBuffered serves a BUFFERED Function URL or an API Gateway HTTP
	// API through httpadapter: a response is returned whole, so GET
	// streams are short polls that end with "retry:".
	ModeBuffered = envconfig.ModeBuffered
)

// Auth is who a server takes its callers to be (LambdaOptions.Auth,
// LocalOptions.Auth; MCPUSH_AUTH in OptionsFromEnv), matching the
// Function URL's AuthType in Lambda. It is envconfig.Auth.
type Auth = envconfig.Auth

// Auth modes.
const (
	AuthIAM  = envconfig.AuthIAM  // AWS_IAM: the signer's IAM ARN is the principal
	AuthNone = envconfig.AuthNone // NONE: callers are anonymous; their quotas count per source IP (mcp.StreamableHandler)
	// AuthOAuth: the Function URL's AuthType is NONE and the server is an
	// OAuth 2.1 resource server (package oauth): a bearer token's
	// issuer#subject is the principal.
	AuthOAuth = envconfig.AuthOAuth
)

// LambdaOptions configure a LambdaHandler. The zero value serves a
// RESPONSE_STREAM Function URL with AWS_IAM auth.
type LambdaOptions struct {
	Mode Mode // ModeStream (default) or ModeBuffered
	Auth Auth // AuthIAM (default), AuthNone or AuthOAuth
	// OAuth configures the token validator of AuthOAuth. An empty
	// Resource is derived from each request: https://{Host}/mcp.
	OAuth          oauth.Options
	AllowedHosts   []string // if set, the only Host names accepted
	AllowedOrigins []string // browser origins accepted ("*": any)
	// MaxGETStream bounds a GET stream. 0 means the default: in stream
	// mode, the invocation deadline (minus the stream margin); in
	// buffered mode a 5s poll window.
	MaxGETStream time.Duration
	// RetryInterval is the reconnection delay sent in "retry:" fields;
	// 0 means pkg/mcp's default (1s).
	RetryInterval time.Duration
	// StreamHold is mcp.StreamableOptions.StreamHold: how long an idle
	// GET stream stays open after activity; StreamHoldDeadline holds it
	// to the invocation deadline. 0 means the default: pkg/mcp's
	// (DefaultStreamHold) on on-demand Lambda, StreamHoldDeadline when
	// MaxConcurrency is above 1.
	StreamHold time.Duration
	// MaxConcurrency is how many invocations the runtime serves at once
	// in this process: AWS_LAMBDA_MAX_CONCURRENCY, which Lambda Managed
	// Instances set from the function's
	// PerExecutionEnvironmentMaxConcurrency (aws-lambda-go then polls the
	// Runtime API that many times at once). 0 or 1 is on-demand Lambda,
	// one invocation per execution environment. Above 1 a held stream
	// does not occupy an environment of its own, so streams are held to
	// the deadline by default (see StreamHold).
	MaxConcurrency int
	// Logger receives the access log (one record per request) and
	// panics. Nil means slog.Default(). Wrap its handler in a
	// RequestIDHandler (NewLogger does) to get the Lambda request id on
	// every record.
	Logger *slog.Logger
}

const (
	// defaultPollWindow is how long a buffered GET waits for messages
	// when there are none to deliver at once.
	defaultPollWindow = 5 * time.Second
	// pollLinger is how long a buffered GET goes on after it wrote its
	// first message, gathering any that follow closely, before it ends.
	pollLinger = 200 * time.Millisecond
	// defaultRetry mirrors pkg/mcp's default RetryInterval; the buffered
	// GET writes it when it ends a poll itself.
	defaultRetry = time.Second
)

// StreamHoldDeadline is the LambdaOptions.StreamHold (and
// LocalOptions.StreamHold) that holds a stream open until the invocation
// deadline (or MaxGETStream), however idle: pkg/mcp's negative
// StreamHold. MCPUSH_STREAM_HOLD=deadline in OptionsFromEnv.
const StreamHoldDeadline = envconfig.StreamHoldDeadline

// LambdaHandler is the http.Handler of an MCP server in Lambda. It routes
// /mcp to two StreamableHandlers sharing one Server: GET streams, bounded
// by MaxGETStream, and the rest (POST, DELETE), bounded only by the
// invocation deadline so that a tool call is never cut short by a poll
// window; /healthz answers "ok". It recovers panics into 500s, gives
// pkg/mcp's SSE writer the Flush it needs (neither lambdaurl's writer nor
// httpadapter's has one, and without it SSE silently breaks), and logs one
// JSON line per request with the Lambda request id and the session id.
// Safe for concurrent use.
type LambdaHandler struct {
	srv         *mcp.Server
	log         *slog.Logger
	mode        Mode
	retry       time.Duration
	hold        time.Duration // the GET streams' StreamHold, after defaults
	concurrency int           // invocations served at once (>= 1)
	get         *mcp.StreamableHandler
	other       *mcp.StreamableHandler
	mux         *http.ServeMux
}

// NewLambdaHandler returns the handler serving srv in Lambda. Call it once,
// at init, outside the invocation handler, so every invocation of a
// sandbox reuses the server, the store and their clients; then call Start.
func NewLambdaHandler(srv *mcp.Server, opts *LambdaOptions) (*LambdaHandler, error) {
	if opts == nil {
		opts = &LambdaOptions{}
	}
	// The accepted modes are envconfig's, one list for the environment
	// and the options.
	mode, err := envconfig.ParseMode(string(opts.Mode))
	if err != nil {
		return nil, badOption{err}
	}
	authMode, err := envconfig.ParseAuth(string(opts.Auth), true)
	if err != nil {
		return nil, badOption{err}
	}
	var auth mcp.Authenticator
	switch authMode {
	case AuthIAM, "":
		auth = IAMAuthenticator{}
	case AuthNone:
		auth = mcp.Anonymous{}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	var validator *oauth.Validator
	if opts.Auth == AuthOAuth {
		o := opts.OAuth
		if o.Logger == nil {
			o.Logger = logger
		}
		var err error
		if validator, err = oauth.New(&o); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadOption, err)
		}
		auth = validator
	}
	retry := opts.RetryInterval
	if retry <= 0 {
		retry = defaultRetry
	}
	getWindow := opts.MaxGETStream
	if getWindow <= 0 && mode == ModeBuffered {
		getWindow = defaultPollWindow
	}
	concurrency := max(opts.MaxConcurrency, 1)
	hold := opts.StreamHold
	if hold == 0 {
		hold = mcp.DefaultStreamHold
		if concurrency > 1 {
			// Managed Instances: an environment serves many invocations
			// and is billed by the instance, not per held second, so a
			// held idle stream costs no more than a closed one; holding
			// it saves the reconnections (a request and a store read
			// each) and delivers at once.
			hold = StreamHoldDeadline
		}
	}
	base := mcp.StreamableOptions{
		// In Lambda the Host is the Function URL's (or API's) domain,
		// which only routes to this function: no DNS rebinding to guard
		// against, so not LocalhostOnly.
		AllowedHosts:   opts.AllowedHosts,
		AllowedOrigins: opts.AllowedOrigins,
		Authenticator:  auth,
		RetryInterval:  retry,
		StreamHold:     hold,
	}
	getOpts := base
	getOpts.MaxStreamDuration = getWindow
	h := &LambdaHandler{
		srv:         srv,
		log:         logger,
		mode:        mode,
		retry:       retry,
		hold:        hold,
		concurrency: concurrency,
		get:         mcp.NewStreamableHandler(srv, &getOpts),
		other:       mcp.NewStreamableHandler(srv, &base),
		mux:         http.NewServeMux(),
	}
	h.mux.HandleFunc("/mcp", h.serveMCP)
	if validator != nil {
		mountMetadata(h.mux, validator, opts.OAuth.Resource)
	}
	h.mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	return h, nil
}

// Mode reports the handler's mode, ModeStream or ModeBuffered.
func (h *LambdaHandler) Mode() Mode { return h.mode }

// StreamHold reports how long an idle GET stream stays open after
// activity, after defaults: StreamHoldDeadline (negative) holds it to the
// deadline.
func (h *LambdaHandler) StreamHold() time.Duration { return h.hold }

// MaxConcurrency reports how many invocations the process serves at once
// (LambdaOptions.MaxConcurrency, at least 1).
func (h *LambdaHandler) MaxConcurrency() int { return h.concurrency }

// Start serves invocations from the Lambda Runtime API
// (AWS_LAMBDA_RUNTIME_API); it never returns. aws-lambda-go runs
// AWS_LAMBDA_MAX_CONCURRENCY runtime loops (one when unset), each polling
// the Runtime API for its next invocation, so up to that many run at once
// through this handler; everything per invocation lives in the request
// (its context carries the request id and deadline), nothing in globals.
func (h *LambdaHandler) Start() {
	lambda.Start(h.Invoke)
}

// Invoke serves one invocation: a TaskEvent runs the task (tasks.go);
// anything else is a Function URL request (stream mode) or an HTTP API
// request (buffered mode).
func (h *LambdaHandler) Invoke(ctx context.Context, payload json.RawMessage) (any, error) {
	if t, ok := taskEvent(payload); ok {
		defer metrics.Flush(context.WithoutCancel(ctx))
		return nil, h.runTask(ctx, t)
	}
	if h.mode == ModeBuffered {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, err
		}
		return httpadapter.NewV2(h).ProxyWithContext(ctx, ev)
	}
	var ev events.LambdaFunctionURLRequest
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, err
	}
	return lambdaurl.Wrap(h)(ctx, &ev)
}

// Close ends open streams with "retry:".
func (h *LambdaHandler) Close() {
	h.get.Close()
	h.other.Close()
}

func (h *LambdaHandler) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		h.other.ServeHTTP(w, r)
		return
	}
	if h.mode != ModeBuffered {
		h.get.ServeHTTP(w, r)
		return
	}
	lw, ok := w.(*lambdaWriter)
	if !ok {
		lw = &lambdaWriter{ResponseWriter: w}
	}
	h.servePoll(lw, r)
}

// servePoll serves a GET in buffered mode, where nothing reaches the
// client before the handler returns: it is a long poll. It returns the
// messages waiting in the stream's log (and those that follow within
// pollLinger) as soon as there are any, or after the poll window with
// none, and always ends with a "retry:" field so the client polls again,
// resuming with Last-Event-ID.
func (h *LambdaHandler) servePoll(w *lambdaWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var once sync.Once
	w.onMessage = func() {
		once.Do(func() { time.AfterFunc(pollLinger, cancel) })
	}
	h.get.ServeHTTP(w, r.WithContext(ctx))
	w.onMessage = nil
	if w.isSSE() && !w.endsWithRetry {
		fmt.Fprintf(w, "retry: %d\n\n", h.retry.Milliseconds())
	}
}

// ServeHTTP implements http.Handler. The Lambda adapters (lambdaurl,
// httpadapter) call it; tests may too.
func (h *LambdaHandler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w := &lambdaWriter{ResponseWriter: rw}
	if h.mode == ModeBuffered {
		joinHeaders(r.Header)
	}
	defer func() {
		if v := recover(); v != nil {
			h.log.ErrorContext(r.Context(), "panic serving request",
				"method", r.Method, "path", r.URL.Path, "session", r.Header.Get("Mcp-Session-Id"),
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if w.status == 0 {
				// The client gets the Lambda request id, which the
				// log record carries (requestId), not the panic: 500,
				// written by pkg/mcp's one error writer.
				var id string
				if lc, ok := lambdacontext.FromContext(r.Context()); ok {
					id = lc.AwsRequestID
				}
				mcp.WriteInternalError(w, r, id)
			}
			// Headers already sent: the response just ends here.
		}
		if w.status == 0 {
			w.WriteHeader(http.StatusOK)
		}
		session := r.Header.Get("Mcp-Session-Id")
		if session == "" {
			session = w.Header().Get("Mcp-Session-Id")
		}
		principal, _ := CallerARN(r.Context())
		h.log.InfoContext(r.Context(), "request",
			"method", r.Method, "path", r.URL.Path, "status", w.status, "bytes", w.bytes,
			"durationMs", time.Since(start).Milliseconds(), "session", session, "principal", principal)
		// The invocation's metrics (EMF lines on stdout, with
		// MCPUSH_METRICS=emf), once per invocation: in stream mode before
		// the response ends, in buffered mode before it is returned.
		if err := metrics.Flush(context.WithoutCancel(r.Context())); err != nil {
			h.log.WarnContext(r.Context(), "writing the metrics", "err", err)
		}
	}()
	h.mux.ServeHTTP(w, r)
}

// joinHeaders undoes httpadapter's splitting of comma-separated header
// values into several values: pkg/mcp reads "Accept: application/json,
// text/event-stream" with Header.Get, which sees only the first.
func joinHeaders(h http.Header) {
	for k, vs := range h {
		if len(vs) > 1 && k != "Cookie" && k != "Set-Cookie" {
			h[k] = []string{strings.Join(vs, ", ")}
		}
	}
}

// lambdaWriter wraps the ResponseWriter of lambdaurl or httpadapter.
// Neither implements http.Flusher, and pkg/mcp's SSE writer treats a
// failed Flush as a gone client; here nothing needs flushing (lambdaurl's
// writer is an unbuffered pipe to the Runtime API, httpadapter's keeps the
// whole body anyway), so Flush does nothing. It records the status and
// size for the access log and, for a buffered poll, reports messages.
// Used by one handler goroutine at a time, under pkg/mcp's stream lock.
type lambdaWriter struct {
	http.ResponseWriter
	status        int
	bytes         int64
	endsWithRetry bool   // the last write was a "retry:" field
	onMessage     func() // called after an SSE event carrying a message
}

// WriteHeader implements http.ResponseWriter, recording the status.
func (w *lambdaWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter, recording the size and whether the
// write was a "retry:" field or a message event.
func (w *lambdaWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	w.endsWithRetry = bytes.HasPrefix(p, []byte("retry:"))
	if w.onMessage != nil && isMessageEvent(p) {
		w.onMessage()
	}
	return n, err
}

// Flush implements http.Flusher; see lambdaWriter.
func (w *lambdaWriter) Flush() {}

func (w *lambdaWriter) isSSE() bool {
	return strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream")
}

// isMessageEvent reports whether p is an SSE event whose data is a
// JSON-RPC message (not a priming event, a comment or a retry field).
func isMessageEvent(p []byte) bool {
	return bytes.HasPrefix(p, []byte("data: {")) || bytes.Contains(p, []byte("\ndata: {"))
}

// IAMAuthenticator is the mcp.Authenticator of a function behind a
// Function URL (or HTTP API route) with AWS_IAM auth: Lambda has checked
// the SigV4 signature, and the signer's IAM ARN (requestContext.authorizer
// .iam.userArn: an IAM user, or an assumed role with its session name)
// becomes the session's principal. A session used by another principal is
// not found. Requests without an IAM caller are refused.
type IAMAuthenticator struct{}

// Authenticate implements mcp.Authenticator: the principal is the IAM ARN
// of the request's signer.
func (IAMAuthenticator) Authenticate(r *http.Request) (string, error) {
	if arn, ok := CallerARN(r.Context()); ok {
		return arn, nil
	}
	return "", ErrNoIAMCaller
}

// AuthenticateClaims implements mcp.ClaimsAuthenticator: the principal
// is the signer's IAM ARN, which is also the one claim, "arn", so that an
// access rule can name callers ({"claims":{"arn":["arn:aws:iam::…"]}}).
func (a IAMAuthenticator) AuthenticateClaims(r *http.Request) (string, time.Time, notify.Claims, error) {
	arn, err := a.Authenticate(r)
	if err != nil {
		return "", time.Time{}, nil, err
	}
	return arn, time.Time{}, notify.Claims{"arn": arn}, nil
}

// CallerARN returns the IAM ARN of the signer of the request in ctx, from
// the Function URL event (lambdaurl) or the HTTP API event (httpadapter).
func CallerARN(ctx context.Context) (string, bool) {
	if ev, ok := lambdaurl.RequestFromContext(ctx); ok {
		if a := ev.RequestContext.Authorizer; a != nil && a.IAM != nil && a.IAM.UserARN != "" {
			return a.IAM.UserARN, true
		}
		return "", false
	}
	if rc, ok := core.GetAPIGatewayV2ContextFromContext(ctx); ok {
		if a := rc.Authorizer; a != nil && a.IAM != nil && a.IAM.UserARN != "" {
			return a.IAM.UserARN, true
		}
	}
	return "", false
}

// RequestIDHandler adds the Lambda request id ("requestId") of the
// invocation in a record's context to every log record, so a record can
// be found from the invocation and the other way round.
type RequestIDHandler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h RequestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h RequestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return RequestIDHandler{h.Handler.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h RequestIDHandler) WithGroup(name string) slog.Handler {
	return RequestIDHandler{h.Handler.WithGroup(name)}
}

// ReportInitError tells the Runtime API at api (AWS_LAMBDA_RUNTIME_API)
// that initialisation failed, so the invoker sees why instead of a bare
// Runtime.ExitError. Errors are returned, not logged. It is
// initerror.Report, which a main that serves no MCP can use alone.
func ReportInitError(api string, initErr error) error { return initerror.Report(api, initErr) }

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

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// Lambda modes (LambdaOptions.Mode; MCPUSH_LAMBDA_MODE in OptionsFromEnv).
const (
	// ModeStream serves a Function URL in RESPONSE_STREAM mode through
	// lambdaurl: SSE events reach the client as they are written.
	ModeStream = "stream"
	// ModeBuffered serves a BUFFERED Function URL or an API Gateway HTTP
	// API through httpadapter: a response is returned whole, so GET
	// streams are short polls that end with "retry:".
	ModeBuffered = "buffered"
)

// Auth modes (LambdaOptions.Auth; MCPUSH_AUTH in OptionsFromEnv), matching
// the Function URL's AuthType.
const (
	AuthIAM  = "iam"  // AWS_IAM: the signer's IAM ARN is the principal
	AuthNone = "none" // NONE: every caller is the anonymous principal
)

// LambdaOptions configure a LambdaHandler. The zero value serves a
// RESPONSE_STREAM Function URL with AWS_IAM auth.
type LambdaOptions struct {
	Mode           string   // ModeStream (default) or ModeBuffered
	Auth           string   // AuthIAM (default) or AuthNone
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
	// GET stream stays open after activity. 0 means pkg/mcp's default,
	// or, when MaxConcurrency > 1, -1: streams are held to the deadline.
	StreamHold time.Duration
	// MaxConcurrency is how many invocations one execution environment
	// runs at once: AWS_LAMBDA_MAX_CONCURRENCY, which Lambda Managed
	// Instances set (aws-lambda-go then runs that many runtime loops in
	// the process). Above 1 held streams share the process and its
	// change feed watcher, and an idle stream costs almost nothing, so
	// streams are held rather than ended for clients to poll. 0 or 1:
	// one invocation at a time (on-demand Lambda).
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
	log   *slog.Logger
	mode  string
	retry time.Duration
	get   *mcp.StreamableHandler
	other *mcp.StreamableHandler
	mux   *http.ServeMux
}

// NewLambdaHandler returns the handler serving srv in Lambda. Call it once,
// at init, outside the invocation handler, so every invocation of a
// sandbox reuses the server, the store and their clients; then call Start.
func NewLambdaHandler(srv *mcp.Server, opts *LambdaOptions) (*LambdaHandler, error) {
	if opts == nil {
		opts = &LambdaOptions{}
	}
	mode := opts.Mode
	if mode == "" {
		mode = ModeStream
	}
	if mode != ModeStream && mode != ModeBuffered {
		return nil, fmt.Errorf("%w: MCPUSH_LAMBDA_MODE=%q: want %q or %q", ErrBadOption, opts.Mode, ModeStream, ModeBuffered)
	}
	var auth mcp.Authenticator
	switch opts.Auth {
	case AuthIAM, "":
		auth = IAMAuthenticator{}
	case AuthNone:
		auth = mcp.Anonymous{}
	default:
		return nil, fmt.Errorf("%w: MCPUSH_AUTH=%q: want %q or %q", ErrBadOption, opts.Auth, AuthIAM, AuthNone)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	retry := opts.RetryInterval
	if retry <= 0 {
		retry = defaultRetry
	}
	getWindow := opts.MaxGETStream
	if getWindow <= 0 && mode == ModeBuffered {
		getWindow = defaultPollWindow
	}
	hold := opts.StreamHold
	if hold == 0 && opts.MaxConcurrency > 1 && mode == ModeStream {
		hold = -1 // Managed Instances: held to the deadline, no polling churn
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
		log:   logger,
		mode:  mode,
		retry: retry,
		get:   mcp.NewStreamableHandler(srv, &getOpts),
		other: mcp.NewStreamableHandler(srv, &base),
		mux:   http.NewServeMux(),
	}
	h.mux.HandleFunc("/mcp", h.serveMCP)
	h.mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	return h, nil
}

// Mode reports the handler's mode, ModeStream or ModeBuffered.
func (h *LambdaHandler) Mode() string { return h.mode }

// Start serves invocations from the Lambda Runtime API
// (AWS_LAMBDA_RUNTIME_API); it never returns.
func (h *LambdaHandler) Start() {
	if h.mode == ModeBuffered {
		lambda.StartHandlerFunc(httpadapter.NewV2(h).ProxyWithContext)
		return
	}
	lambdaurl.Start(h)
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
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				// The client gets the Lambda request id, which the
				// log record carries (requestId), not the panic.
				var id string
				if lc, ok := lambdacontext.FromContext(r.Context()); ok {
					id = lc.AwsRequestID
				}
				body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
					"code": -32603, "message": "internal error (request id " + id + ")", "data": map[string]string{"requestId": id},
				}})
				w.Write(body)
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
// Runtime.ExitError. Errors are returned, not logged.
func ReportInitError(api string, initErr error) error {
	body, _ := json.Marshal(struct {
		Message string   `json:"errorMessage"`
		Type    string   `json:"errorType"`
		Stack   []string `json:"stackTrace"`
	}{initErr.Error(), "InitError", []string{}})
	req, err := http.NewRequest(http.MethodPost, "http://"+api+"/2018-06-01/runtime/init/error", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Lambda-Runtime-Function-Error-Type", "Runtime.InitError")
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST init/error: %s", resp.Status)
	}
	return nil
}

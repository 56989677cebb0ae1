// Package lambdatest is a fake AWS Lambda Runtime API for tests: an
// httptest server that speaks the Runtime API (version 2018-06-01) the way
// Lambda does, so that a real `bootstrap` binary, or aws-lambda-go's runtime
// client, can be run against it with AWS_LAMBDA_RUNTIME_API=Server.Addr().
//
// The protocol, as the runtime sees it:
//
//	GET  /2018-06-01/runtime/invocation/next          long-polls for the next event
//	POST /2018-06-01/runtime/invocation/{id}/response the result, buffered or streamed
//	POST /2018-06-01/runtime/invocation/{id}/error    a function error
//	POST /2018-06-01/runtime/init/error               an initialisation error
//
// A GET .../next answers 200 with the event as its body and the headers
// Lambda-Runtime-Aws-Request-Id, Lambda-Runtime-Deadline-Ms,
// Lambda-Runtime-Invoked-Function-Arn and Lambda-Runtime-Trace-Id (and
// Lambda-Runtime-Client-Context, Lambda-Runtime-Cognito-Identity when set).
// The POSTs answer 202 {"status":"OK"}. A response may be streamed: a
// chunked body (aws-lambda-go always sends chunks; Lambda's documentation
// adds the header Lambda-Runtime-Function-Response-Mode: streaming, which
// is recorded when present), possibly of content type
// application/vnd.awslambda.http-integration-response (a JSON prelude with
// the HTTP status, headers and cookies, eight NUL bytes, then the HTTP
// body), and possibly ending in the trailers
// Lambda-Runtime-Function-Error-Type and Lambda-Runtime-Function-Error-Body
// (base64 JSON) when the function failed mid-stream.
//
// On-demand Lambda gives an execution environment one invocation at a
// time; Lambda Managed Instances give it up to AWS_LAMBDA_MAX_CONCURRENCY
// at once, accepting that many concurrent GET .../next and POST
// .../response requests, each response matched to its invocation by the
// request id in its path. Options.MaxConcurrency models both: the server
// has at most that many invocations out with the runtime (delivered and
// not yet ended), and a GET .../next beyond them waits for one to end.
// Server.MaxInFlight reports the most that were out at once.
//
// Tests queue invocations with Server.Invoke and read each one's Response:
// the runtime's request headers and trailers, the body chunks with their
// arrival times (so a test can tell a streamed response from a buffered
// one), errors, and whether it ran past its deadline. Transport turns the
// server into an http.RoundTripper that delivers requests the way a
// Lambda Function URL does.
package lambdatest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Runtime API header and trailer names.
const (
	HeaderRequestID       = "Lambda-Runtime-Aws-Request-Id"
	HeaderDeadlineMS      = "Lambda-Runtime-Deadline-Ms"
	HeaderFunctionARN     = "Lambda-Runtime-Invoked-Function-Arn"
	HeaderTraceID         = "Lambda-Runtime-Trace-Id"
	HeaderClientContext   = "Lambda-Runtime-Client-Context"
	HeaderCognitoIdentity = "Lambda-Runtime-Cognito-Identity"
	HeaderResponseMode    = "Lambda-Runtime-Function-Response-Mode"
	HeaderErrorType       = "Lambda-Runtime-Function-Error-Type"
	TrailerErrorType      = "Lambda-Runtime-Function-Error-Type"
	TrailerErrorBody      = "Lambda-Runtime-Function-Error-Body"
)

// ContentTypeHTTPIntegration is the content type of a streamed HTTP
// response (Function URL in RESPONSE_STREAM mode): a JSON prelude, eight
// NUL bytes, then the body.
const ContentTypeHTTPIntegration = "application/vnd.awslambda.http-integration-response"

// Limits Lambda applies to responses, and its default timeout.
const (
	DefaultTimeout          = 3 * time.Second
	MaxBufferedResponseSize = 6291556  // bytes; larger buffered responses fail
	MaxStreamedResponseSize = 20 << 20 // bytes; the documented soft limit of a stream
)

const apiPrefix = "/2018-06-01/runtime/"

// Options configure a Server. A nil *Options means the defaults.
type Options struct {
	// FunctionARN is sent as Lambda-Runtime-Invoked-Function-Arn.
	// Default: arn:aws:lambda:us-east-1:123456789012:function:mcpush-test.
	FunctionARN string
	// Timeout is the time an invocation may take, from the moment the
	// runtime receives it, unless InvokeOptions.Timeout says otherwise.
	// Default: DefaultTimeout (3s, Lambda's default).
	Timeout time.Duration
	// OnTimeout, if set, is called (in its own goroutine) when an
	// invocation passes its deadline unfinished. On-demand Lambda stops
	// the sandbox then; a test that runs a real process can kill it here.
	// (Managed Instances fail only that invocation and leave the process
	// and its other invocations running.)
	OnTimeout func(*Invocation)
	// MaxConcurrency is how many invocations the runtime may have at once
	// (the environment's AWS_LAMBDA_MAX_CONCURRENCY): a GET .../next is
	// answered only while fewer are out (delivered and not ended), else
	// it waits. 0 means 1, on-demand Lambda.
	MaxConcurrency int
}

// Server is a fake Lambda Runtime API. Its methods are safe for concurrent
// use. Invocations are delivered in the order they were queued, one per
// GET .../next, to any number of runtime loops, at most
// Options.MaxConcurrency of them out at once.
type Server struct {
	opts Options
	ts   *httptest.Server

	queue  chan *Invocation
	slots  chan struct{} // one token per invocation out with the runtime
	closed chan struct{}
	once   sync.Once
	seq    atomic.Int64
	polls  atomic.Int64

	inFlight    atomic.Int64
	maxInFlight atomic.Int64

	mu       sync.Mutex
	byID     map[string]*Invocation
	initErrs []*ErrorReport
	initErrc chan struct{} // closed at the first init error
}

// NewServer starts a fake Runtime API on a loopback port. Close it when
// done.
func NewServer(opts *Options) *Server {
	s := &Server{
		queue:    make(chan *Invocation, 1024),
		closed:   make(chan struct{}),
		byID:     make(map[string]*Invocation),
		initErrc: make(chan struct{}),
	}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.FunctionARN == "" {
		s.opts.FunctionARN = "arn:aws:lambda:us-east-1:123456789012:function:mcpush-test"
	}
	if s.opts.Timeout <= 0 {
		s.opts.Timeout = DefaultTimeout
	}
	s.opts.MaxConcurrency = max(s.opts.MaxConcurrency, 1)
	s.slots = make(chan struct{}, s.opts.MaxConcurrency)
	s.ts = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Addr is the value of AWS_LAMBDA_RUNTIME_API for a runtime: "host:port".
func (s *Server) Addr() string { return strings.TrimPrefix(s.ts.URL, "http://") }

// Polls reports how many GET .../next requests the runtime has made.
func (s *Server) Polls() int64 { return s.polls.Load() }

// MaxConcurrency reports Options.MaxConcurrency (at least 1).
func (s *Server) MaxConcurrency() int { return s.opts.MaxConcurrency }

// InFlight reports how many invocations the runtime has now: delivered by
// GET .../next and not yet ended.
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// MaxInFlight reports the most invocations the runtime had at once.
func (s *Server) MaxInFlight() int { return int(s.maxInFlight.Load()) }

// Close stops the server. Invocations still running end with ErrClosed.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closed)
		s.ts.CloseClientConnections()
		s.ts.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, inv := range s.byID {
			inv.finish(nil, ErrClosed)
		}
	})
}

// ErrClosed is the error of an invocation that the closing of its Server
// ended.
var ErrClosed = errors.New("lambdatest: server closed")

// InvokeOptions describe one invocation. A nil *InvokeOptions means the
// defaults.
type InvokeOptions struct {
	// RequestID is the invocation's id; default a fresh UUID-like id.
	RequestID string
	// Timeout overrides Options.Timeout: the deadline is this long after
	// the runtime receives the event.
	Timeout time.Duration
	// Deadline, if set, is the absolute deadline instead.
	Deadline time.Time
	// TraceID is sent as Lambda-Runtime-Trace-Id; default a fresh X-Ray id.
	TraceID string
	// ClientContext and CognitoIdentity are sent as the headers of those
	// names when not empty (JSON).
	ClientContext   string
	CognitoIdentity string
	// Streaming says the caller invoked with response streaming (a
	// Function URL in RESPONSE_STREAM mode): the response may be up to
	// MaxStreamedResponseSize; otherwise up to MaxBufferedResponseSize.
	Streaming bool
}

// Invoke queues an invocation with the event payload. The runtime gets it
// on one of its next GET .../next requests.
func (s *Server) Invoke(payload []byte, opts *InvokeOptions) *Invocation {
	inv := &Invocation{
		srv:      s,
		Payload:  payload,
		started:  make(chan struct{}),
		header:   make(chan struct{}),
		done:     make(chan struct{}),
		changed:  make(chan struct{}),
		response: &Response{},
	}
	if opts != nil {
		inv.opts = *opts
	}
	n := s.seq.Add(1)
	if inv.opts.RequestID == "" {
		inv.opts.RequestID = fmt.Sprintf("%08x-0000-4000-8000-%012x", time.Now().UnixNano()&0xffffffff, n)
	}
	if inv.opts.TraceID == "" {
		inv.opts.TraceID = fmt.Sprintf("Root=1-%08x-%024x;Parent=%016x;Sampled=0", time.Now().Unix(), n, n)
	}
	inv.ID = inv.opts.RequestID
	inv.response.RequestID = inv.ID
	s.mu.Lock()
	s.byID[inv.ID] = inv
	s.mu.Unlock()
	select {
	case s.queue <- inv:
	case <-s.closed:
		inv.finish(nil, ErrClosed)
	}
	return inv
}

// InitError waits for the runtime to report an initialisation error
// (POST .../init/error) and returns the first one.
func (s *Server) InitError(ctx context.Context) (*ErrorReport, error) {
	select {
	case <-s.initErrc:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.initErrs[0], nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ErrorReport is a function or initialisation error, as the runtime
// reported it: the JSON body {"errorMessage", "errorType", "stackTrace"}
// of POST .../error or .../init/error, or the error trailers of a response.
type ErrorReport struct {
	Type    string          `json:"errorType"`
	Message string          `json:"errorMessage"`
	Stack   json.RawMessage `json:"stackTrace,omitempty"`
	// Header is the Lambda-Runtime-Function-Error-Type header (or trailer)
	// value, which may differ from Type.
	Header string `json:"-"`
	// Raw is the body as received (for trailers: base64-decoded).
	Raw []byte `json:"-"`
}

func (e *ErrorReport) Error() string { return e.Type + ": " + e.Message }

// Chunk is a piece of a response body as the server read it from the
// runtime's request, with its arrival time.
type Chunk struct {
	Data []byte
	At   time.Time
}

// Response is what the runtime returned for an invocation.
type Response struct {
	RequestID string
	// StartedAt is when the runtime received the event; Deadline is the
	// deadline it was given.
	StartedAt time.Time
	Deadline  time.Time
	// FinishedAt is when the response (or error) was complete.
	FinishedAt time.Time
	// Header and Trailer are the headers and trailers of the runtime's
	// POST (Content-Type, Transfer-Encoding is in TransferEncoding).
	Header           http.Header
	Trailer          http.Header
	TransferEncoding []string
	// Chunks is the body as it arrived.
	Chunks []Chunk
	// Err is set when the function failed: POST .../error, or error
	// trailers at the end of a streamed response.
	Err *ErrorReport
	// TimedOut reports that the invocation was not complete at its
	// deadline; Lambda would have stopped the sandbox.
	TimedOut bool
}

// Body returns the whole response body.
func (r *Response) Body() []byte {
	var b bytes.Buffer
	for _, c := range r.Chunks {
		b.Write(c.Data)
	}
	return b.Bytes()
}

// Streamed reports whether the runtime sent the body as a stream: with
// Lambda-Runtime-Function-Response-Mode: streaming or chunked encoding.
func (r *Response) Streamed() bool {
	if strings.EqualFold(r.Header.Get(HeaderResponseMode), "streaming") {
		return true
	}
	for _, te := range r.TransferEncoding {
		if te == "chunked" {
			return true
		}
	}
	return false
}

// Invocation is one queued invocation. Its methods are safe for
// concurrent use.
type Invocation struct {
	ID      string
	Payload []byte

	srv  *Server
	opts InvokeOptions

	started chan struct{} // closed when the runtime received it
	header  chan struct{} // closed when the response (or error) began
	done    chan struct{} // closed when it ended
	endOnce sync.Once

	mu       sync.Mutex
	ended    bool   // end ran
	release  func() // gives back the server's slot, if it holds one
	response *Response
	err      error         // ErrClosed, or a protocol error
	changed  chan struct{} // closed and replaced at each new chunk
	posted   bool          // a /response or /error request arrived
}

// Started is closed when the runtime has received the event.
func (inv *Invocation) Started() <-chan struct{} { return inv.started }

// Done is closed when the invocation has ended: a complete response or
// error, the deadline passed, or the server closed.
func (inv *Invocation) Done() <-chan struct{} { return inv.done }

// Wait waits for the invocation to end and returns its response. The
// error is ctx's, ErrClosed, or a protocol violation by the runtime; a
// function error is Response.Err, not an error here.
func (inv *Invocation) Wait(ctx context.Context) (*Response, error) {
	select {
	case <-inv.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	r := *inv.response
	r.Chunks = append([]Chunk(nil), r.Chunks...)
	return &r, inv.err
}

// ResponseHeader waits until the runtime starts answering and returns the
// header of its POST (which says, with Content-Type, how to read the body).
func (inv *Invocation) ResponseHeader(ctx context.Context) (http.Header, error) {
	select {
	case <-inv.header:
	case <-inv.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.response.Header == nil {
		if inv.err != nil {
			return nil, inv.err
		}
		if inv.response.TimedOut {
			return nil, errTimedOut
		}
		return nil, errors.New("lambdatest: the invocation ended without a response")
	}
	return inv.response.Header.Clone(), nil
}

var errTimedOut = errors.New("lambdatest: the invocation timed out")

// Body returns a reader of the response body as it arrives: it blocks
// until more is read from the runtime and ends (io.EOF) when the response
// is complete, or with an error when the function failed, timed out or the
// server closed.
func (inv *Invocation) Body() io.Reader { return &liveBody{inv: inv} }

type liveBody struct {
	inv   *Invocation
	chunk int // next chunk
	off   int // offset in it
}

func (b *liveBody) Read(p []byte) (int, error) {
	inv := b.inv
	for {
		inv.mu.Lock()
		if b.chunk < len(inv.response.Chunks) {
			c := inv.response.Chunks[b.chunk].Data
			n := copy(p, c[b.off:])
			if b.off += n; b.off == len(c) {
				b.chunk, b.off = b.chunk+1, 0
			}
			inv.mu.Unlock()
			return n, nil
		}
		changed := inv.changed
		var err error
		select {
		case <-inv.done:
			switch {
			case inv.err != nil:
				err = inv.err
			case inv.response.TimedOut:
				err = errTimedOut
			case inv.response.Err != nil:
				err = inv.response.Err
			default:
				err = io.EOF
			}
		default:
		}
		inv.mu.Unlock()
		if err != nil {
			return 0, err
		}
		select {
		case <-changed:
		case <-inv.done:
		}
	}
}

// start marks the invocation as received by the runtime and arms its
// deadline. It returns the deadline.
func (inv *Invocation) start() time.Time {
	now := time.Now()
	deadline := inv.opts.Deadline
	if deadline.IsZero() {
		timeout := inv.opts.Timeout
		if timeout <= 0 {
			timeout = inv.srv.opts.Timeout
		}
		deadline = now.Add(timeout)
	}
	inv.mu.Lock()
	inv.response.StartedAt = now
	inv.response.Deadline = deadline
	inv.mu.Unlock()
	close(inv.started)
	t := time.AfterFunc(time.Until(deadline), func() {
		inv.mu.Lock()
		late := !inv.isDone()
		if late {
			inv.response.TimedOut = true
		}
		inv.mu.Unlock()
		if late {
			inv.end()
			if f := inv.srv.opts.OnTimeout; f != nil {
				go f(inv)
			}
		}
	})
	go func() {
		<-inv.done
		t.Stop()
	}()
	return deadline
}

func (inv *Invocation) isDone() bool {
	select {
	case <-inv.done:
		return true
	default:
		return false
	}
}

// end closes done once.
func (inv *Invocation) end() {
	inv.endOnce.Do(func() {
		inv.mu.Lock()
		if inv.response.FinishedAt.IsZero() {
			inv.response.FinishedAt = time.Now()
		}
		inv.ended = true
		release := inv.release
		inv.release = nil
		inv.mu.Unlock()
		if release != nil {
			release()
		}
		close(inv.done)
	})
}

// finish ends the invocation with a function error or a protocol error.
func (inv *Invocation) finish(fnErr *ErrorReport, err error) {
	inv.mu.Lock()
	if !inv.isDone() {
		if fnErr != nil && inv.response.Err == nil {
			inv.response.Err = fnErr
		}
		if err != nil && inv.err == nil {
			inv.err = err
		}
	}
	inv.mu.Unlock()
	inv.end()
}

// addChunk records a piece of the body and wakes readers. It reports
// whether the invocation is still running.
func (inv *Invocation) addChunk(data []byte, at time.Time) bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.isDone() {
		return false
	}
	inv.response.Chunks = append(inv.response.Chunks, Chunk{Data: data, At: at})
	close(inv.changed)
	inv.changed = make(chan struct{})
	return true
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	path, ok := strings.CutPrefix(r.URL.Path, apiPrefix)
	switch {
	case !ok:
		apiError(w, http.StatusNotFound, "InvalidRequest", "unknown path "+r.URL.Path)
	case path == "invocation/next" && r.Method == http.MethodGet:
		s.serveNext(w, r)
	case path == "init/error" && r.Method == http.MethodPost:
		s.serveInitError(w, r)
	case strings.HasPrefix(path, "invocation/") && r.Method == http.MethodPost:
		id, kind, ok := strings.Cut(strings.TrimPrefix(path, "invocation/"), "/")
		if !ok || (kind != "response" && kind != "error") {
			apiError(w, http.StatusNotFound, "InvalidRequest", "unknown path "+r.URL.Path)
			return
		}
		s.mu.Lock()
		inv := s.byID[id]
		s.mu.Unlock()
		if inv == nil || !chanClosed(inv.started) {
			apiError(w, http.StatusBadRequest, "InvalidRequestID", "Invalid request ID")
			return
		}
		inv.mu.Lock()
		again := inv.posted
		inv.posted = true
		inv.mu.Unlock()
		if again {
			apiError(w, http.StatusBadRequest, "InvalidStateTransition", "State transition from ResponseSent to "+kind+" failed for runtime")
			return
		}
		if kind == "response" {
			s.serveResponse(w, r, inv)
		} else {
			s.serveError(w, r, inv)
		}
	default:
		apiError(w, http.StatusMethodNotAllowed, "InvalidRequest", r.Method+" "+r.URL.Path+" is not allowed")
	}
}

func chanClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// apiError answers like the Runtime API does on a bad request.
func apiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(struct {
		Message string `json:"errorMessage"`
		Type    string `json:"errorType"`
	}{msg, typ})
	w.Write(b)
}

func accepted(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	io.WriteString(w, `{"status":"OK"}`)
}

func (s *Server) serveNext(w http.ResponseWriter, r *http.Request) {
	s.polls.Add(1)
	// A slot first: at most MaxConcurrency invocations are out.
	select {
	case s.slots <- struct{}{}:
	case <-r.Context().Done():
		return
	case <-s.closed:
		return
	}
	var inv *Invocation
	select {
	case inv = <-s.queue:
	case <-r.Context().Done():
		<-s.slots
		return
	case <-s.closed:
		<-s.slots
		return
	}
	// The slot is given back as the invocation ends, before Done closes.
	inv.mu.Lock()
	ended := inv.ended
	if !ended {
		for n := s.inFlight.Add(1); ; {
			if m := s.maxInFlight.Load(); n <= m || s.maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		inv.release = func() {
			s.inFlight.Add(-1)
			<-s.slots
		}
	}
	inv.mu.Unlock()
	if ended { // closed meanwhile
		<-s.slots
		return
	}
	deadline := inv.start()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(HeaderRequestID, inv.ID)
	h.Set(HeaderDeadlineMS, strconv.FormatInt(deadline.UnixMilli(), 10))
	h.Set(HeaderFunctionARN, s.opts.FunctionARN)
	h.Set(HeaderTraceID, inv.opts.TraceID)
	if inv.opts.ClientContext != "" {
		h.Set(HeaderClientContext, inv.opts.ClientContext)
	}
	if inv.opts.CognitoIdentity != "" {
		h.Set(HeaderCognitoIdentity, inv.opts.CognitoIdentity)
	}
	h.Set("Content-Length", strconv.Itoa(len(inv.Payload)))
	w.WriteHeader(http.StatusOK)
	w.Write(inv.Payload)
}

func (s *Server) serveResponse(w http.ResponseWriter, r *http.Request, inv *Invocation) {
	inv.mu.Lock()
	inv.response.Header = r.Header.Clone()
	inv.response.TransferEncoding = append([]string(nil), r.TransferEncoding...)
	limit := int64(MaxBufferedResponseSize)
	if inv.opts.Streaming {
		limit = MaxStreamedResponseSize
	}
	inv.mu.Unlock()
	close(inv.header)

	var total int64
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Body.Read(buf)
		if n > 0 {
			total += int64(n)
			if total > limit {
				msg := fmt.Sprintf("Exceeded maximum allowed payload size (%d bytes).", limit)
				inv.finish(&ErrorReport{Type: "Function.ResponseSizeTooLarge", Message: msg}, nil)
				apiError(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", msg)
				return
			}
			if !inv.addChunk(append([]byte(nil), buf[:n]...), time.Now()) {
				// Past the deadline, or the server is closing: Lambda
				// would have stopped the sandbox.
				apiError(w, http.StatusGone, "InvocationEnded", "the invocation ended (timed out)")
				return
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			inv.finish(nil, fmt.Errorf("lambdatest: reading the response of %s: %w", inv.ID, err))
			return
		}
	}
	inv.mu.Lock()
	inv.response.Trailer = r.Trailer.Clone()
	inv.mu.Unlock()
	var fnErr *ErrorReport
	if typ := r.Trailer.Get(TrailerErrorType); typ != "" {
		fnErr = &ErrorReport{Type: typ, Header: typ}
		if raw, err := base64.StdEncoding.DecodeString(r.Trailer.Get(TrailerErrorBody)); err == nil {
			fnErr.Raw = raw
			json.Unmarshal(raw, fnErr)
			if fnErr.Type == "" {
				fnErr.Type = typ
			}
		}
	}
	inv.finish(fnErr, nil)
	accepted(w)
}

func readErrorReport(r *http.Request) (*ErrorReport, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, MaxBufferedResponseSize+1))
	if err != nil {
		return nil, err
	}
	rep := &ErrorReport{Header: r.Header.Get(HeaderErrorType), Raw: raw}
	if err := json.Unmarshal(raw, rep); err != nil || rep.Type == "" {
		// Lambda accepts any body; the type then comes from the header.
		rep.Type = rep.Header
		if rep.Message == "" {
			rep.Message = string(raw)
		}
	}
	return rep, nil
}

func (s *Server) serveError(w http.ResponseWriter, r *http.Request, inv *Invocation) {
	inv.mu.Lock()
	inv.response.Header = r.Header.Clone()
	inv.response.TransferEncoding = append([]string(nil), r.TransferEncoding...)
	inv.mu.Unlock()
	close(inv.header)
	rep, err := readErrorReport(r)
	if err != nil {
		inv.finish(nil, fmt.Errorf("lambdatest: reading the error of %s: %w", inv.ID, err))
		return
	}
	if rep.Type == "" {
		rep.Type = "Unhandled"
	}
	inv.finish(rep, nil)
	accepted(w)
}

func (s *Server) serveInitError(w http.ResponseWriter, r *http.Request) {
	rep, err := readErrorReport(r)
	if err != nil {
		apiError(w, http.StatusBadRequest, "InvalidRequest", err.Error())
		return
	}
	s.mu.Lock()
	s.initErrs = append(s.initErrs, rep)
	if len(s.initErrs) == 1 {
		close(s.initErrc)
	}
	s.mu.Unlock()
	accepted(w)
}

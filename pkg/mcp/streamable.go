package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Authenticator identifies the principal behind an HTTP request. A
// session belongs to the principal that created it; another principal
// gets 404 for it. An error is answered with 401, or with what the
// sentinel it wraps says (ErrInsufficientScope, ErrAuthUnavailable), and
// with the WWW-Authenticate header of an error that is a Challenger.
type Authenticator interface {
	Authenticate(r *http.Request) (principal string, err error)
}

// Anonymous is the default Authenticator: every request is principal "".
type Anonymous struct{}

// Authenticate implements Authenticator.
func (Anonymous) Authenticate(*http.Request) (string, error) { return "", nil }

// StreamableOptions configure a StreamableHandler. Nil means defaults.
type StreamableOptions struct {
	// LocalhostOnly accepts only localhost, 127.0.0.1 and [::1] in the
	// Host header (DNS-rebinding protection for a server bound to a
	// loopback address), plus AllowedHosts.
	LocalhostOnly bool
	// AllowedHosts are further Host names (without port) accepted when
	// LocalhostOnly is set, or the only ones accepted when it is not and
	// the list is not empty.
	AllowedHosts []string
	// AllowedOrigins are the browser origins ("https://app.example.com")
	// allowed besides the localhost origins of a LocalhostOnly server;
	// "*" allows any. A request without Origin is always allowed. Listed
	// origins (and any origin with "*") also get CORS: preflights are
	// answered and responses carry Access-Control-Allow-Origin (cors.go).
	AllowedOrigins []string
	// Authenticator identifies principals. Default: Anonymous.
	Authenticator Authenticator
	// MaxBodyBytes limits a POST body; larger ones get 413. Default 4 MiB.
	MaxBodyBytes int64
	// RetryInterval is the reconnection delay sent to clients in SSE
	// "retry:" fields. Default: 1s.
	RetryInterval time.Duration
	// MaxStreamDuration bounds every SSE stream; it is closed with a
	// "retry:" field before then and the client resumes. A request
	// context deadline (a Lambda invocation's) bounds it too. 0: no bound.
	MaxStreamDuration time.Duration
	// StreamMargin is how long before a deadline a stream is closed.
	// Default: 2s.
	StreamMargin time.Duration
	// StreamHold is how long a GET stream of a session that can resume
	// (protocol 2025-11-25 or later) stays open after it opens without
	// Last-Event-ID or last sends a message, polling the store every
	// ServerOptions.PollInterval. When it passes with nothing to send, the
	// stream ends with "retry: RetryInterval"; the client reconnects with
	// Last-Event-ID, and such a reconnection checks once (one store read,
	// no write) and ends again unless it has something to send, which it
	// sends and then holds again. Idle clients thus cost one short request
	// per RetryInterval instead of a held invocation. A 2026-07-28
	// subscriptions/listen stream, which cannot resume, stays open; after
	// StreamHold without a message it polls every RetryInterval instead of
	// every PollInterval. Default: DefaultStreamHold.
	// Negative: hold until MaxStreamDuration or the request deadline, and
	// poll every PollInterval.
	StreamHold time.Duration
	// KeepAlive is the interval of SSE comments on an idle GET stream.
	// Default: 25s.
	KeepAlive time.Duration
	// SSEAfter is how long a POST may run before its response switches to
	// an SSE stream (with a priming event), so that a long request can be
	// resumed with Last-Event-ID. A request that sends a message earlier
	// switches then. Default: 1s.
	SSEAfter time.Duration
}

// StreamableHandler serves MCP over Streamable HTTP (2025-11-25 and
// earlier session-based versions) for a Server. It holds no session state
// of its own: any number of handlers in any number of processes sharing
// the Server's store serve the same sessions. Safe for concurrent use.
type StreamableHandler struct {
	srv  *Server
	opts StreamableOptions

	closing   chan struct{}
	closeOnce sync.Once
	streams   sync.WaitGroup
	inflight  gauge // requests running, per session and in all
	open      gauge // SSE streams open, per session
	rate      rateLimiter

	heldHooks *heldHooks // tests only: see held.go
}

// NewStreamableHandler returns an http.Handler for srv.
func NewStreamableHandler(srv *Server, opts *StreamableOptions) *StreamableHandler {
	h := &StreamableHandler{srv: srv, closing: make(chan struct{})}
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.Authenticator == nil {
		h.opts.Authenticator = Anonymous{}
	}
	if h.opts.MaxBodyBytes <= 0 {
		h.opts.MaxBodyBytes = 4 << 20
	}
	if h.opts.RetryInterval <= 0 {
		h.opts.RetryInterval = time.Second
	}
	if h.opts.StreamMargin <= 0 {
		h.opts.StreamMargin = 2 * time.Second
	}
	if h.opts.StreamHold == 0 {
		h.opts.StreamHold = DefaultStreamHold
	}
	if h.opts.KeepAlive <= 0 {
		h.opts.KeepAlive = 25 * time.Second
	}
	if h.opts.SSEAfter <= 0 {
		h.opts.SSEAfter = time.Second
	}
	h.rate.counter = srv.store
	h.rate.now, h.rate.log = srv.opts.Now, srv.log
	return h
}

// Close ends every open stream with a "retry:" field, so clients
// reconnect (to this or another process) and resume, and waits for them.
// Requests still running keep running. Close is idempotent.
func (h *StreamableHandler) Close() {
	h.closeOnce.Do(func() { close(h.closing) })
	h.streams.Wait()
}

// ServeHTTP implements http.Handler.
func (h *StreamableHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The checks are in admit, whose frame is gone while a held stream
	// waits (see heldStream.run).
	principal, r, era, ok := h.admit(w, r)
	if !ok {
		return
	}
	if wants2026(r) {
		h.serve2026(w, r, principal)
		return
	}
	if !checkVersion(w, r, era) {
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.servePOST(w, r, principal)
	case http.MethodGet:
		h.serveGET(w, r, principal)
	case http.MethodDelete:
		h.serveDELETE(w, r, principal)
	default:
		w.Header().Set("Allow", corsMethods)
		writeError(w, era, nil, refuse(errMethodNotAllowed, "Method Not Allowed: "+r.Method))
	}
}

// admit answers a request that is refused before its era's handler: the
// server shuts down, a Host or Origin not allowed, a CORS preflight,
// credentials refused, over the rate limit, repeated headers. Otherwise
// (ok) it returns the request's principal and the request with its
// credentials (authenticate), and the request's era. It sets the CORS
// headers of every answer.
//
//go:noinline
func (h *StreamableHandler) admit(w http.ResponseWriter, r *http.Request) (principal string, _ *http.Request, era Era, ok bool) {
	cors := h.setCORS(w, r) // before any answer, so that a page can read each
	era = requestEra(r)
	select {
	case <-h.closing:
		// Shutting down: the client retries, on another process.
		writeError(w, era, nil, &refusal{kind: errServerShutdown, msg: "Service Unavailable: the server is shutting down", retryAfter: 1})
		return "", nil, era, false
	default:
	}
	if err := h.checkOrigin(r); err != nil {
		writeError(w, era, nil, err)
		return "", nil, era, false
	}
	if r.Method == http.MethodOptions {
		// A CORS preflight carries no credentials.
		servePreflight(w, r, cors)
		return "", nil, era, false
	}
	principal, r, err := authenticate(h.opts.Authenticator, r)
	if err != nil {
		authFailure(w, era, err)
		return "", nil, era, false
	}
	if ok, retry := h.rate.allow(r.Context(), "req/"+quotaPrincipal(r, principal), h.srv.opts.Limits.MaxRequestsPerMinute, time.Minute); !ok {
		writeError(w, era, nil, rateLimited(retry, "more than "+itoa(int64(h.srv.opts.Limits.MaxRequestsPerMinute))+" requests per minute"))
		return "", nil, era, false
	}
	if err := checkRepeatedHeaders(r.Header); err != nil {
		writeError(w, era, nil, err)
		return "", nil, era, false
	}
	return principal, r, era, true
}

// checkVersion refuses a 2025-era request whose MCP-Protocol-Version is
// not one the server supports; false: refused.
//
//go:noinline
func checkVersion(w http.ResponseWriter, r *http.Request, era Era) bool {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !supportedVersion(v) {
		writeError(w, era, nil, refuse(errBadRequest, "Bad Request: unsupported MCP-Protocol-Version "+v+" (supported: "+strings.Join(SupportedProtocolVersions, ", ")+")"))
		return false
	}
	return true
}

var localhostNames = []string{"localhost", "127.0.0.1", "::1", "[::1]"}

// checkOrigin validates Host and Origin against DNS rebinding and
// cross-origin use. It returns nil when the request may proceed.
func (h *StreamableHandler) checkOrigin(r *http.Request) *refusal {
	host := hostname(r.Host)
	if h.opts.LocalhostOnly || len(h.opts.AllowedHosts) > 0 {
		ok := h.opts.LocalhostOnly && contains(localhostNames, host)
		ok = ok || contains(h.opts.AllowedHosts, host)
		if !ok {
			return refuse(errForbidden, "Forbidden: Host "+r.Host+" is not allowed")
		}
	}
	if len(r.Header.Values("Origin")) > 1 {
		return refuse(errForbidden, "Forbidden: more than one Origin header")
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	if contains(h.opts.AllowedOrigins, "*") || contains(h.opts.AllowedOrigins, origin) {
		return nil
	}
	if h.opts.LocalhostOnly && localOrigin(origin) {
		return nil
	}
	return refuse(errForbidden, "Forbidden: Origin "+origin+" is not allowed")
}

// localOrigin reports whether origin is an http or https origin on a
// localhost name (not file:, not another scheme with a localhost host).
func localOrigin(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && contains(localhostNames, u.Hostname())
}

func hostname(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.ToLower(h)
	}
	return strings.ToLower(hostport)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// accepts reports whether the Accept header admits mediaType.
func accepts(r *http.Request, mediaType string) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if q, ok := params["q"]; ok && zeroQ(q) {
			continue // q=0: explicitly not acceptable (RFC 9110)
		}
		if mt == mediaType || mt == "*/*" || (strings.HasSuffix(mt, "/*") && strings.HasPrefix(mediaType, strings.TrimSuffix(mt, "*"))) {
			return true
		}
	}
	return false
}

// zeroQ reports whether an Accept q value is zero ("0", "0.0", "0.000").
func zeroQ(q string) bool {
	q = strings.TrimSpace(q)
	return q != "" && strings.Trim(q, "0.") == "" && q[0] == '0'
}

// session loads the session named by the Mcp-Session-Id header. It writes
// the error response and returns nil when there is none to serve.
func (h *StreamableHandler) session(w http.ResponseWriter, r *http.Request, principal string) *ServerSession {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		writeError(w, Era2025, nil, refuse(errBadRequest, "Bad Request: Mcp-Session-Id header is required"))
		return nil
	}
	st, err := h.srv.store.GetSession(r.Context(), id)
	if err != nil {
		h.storeFailure(r.Context(), w, Era2025, nil, err, "loading session", "session", id)
		return nil
	}
	if !ownedBy(st.Principal, principal) {
		// Not 403: another principal must not learn that the session exists.
		writeError(w, Era2025, nil, refuse(ErrSessionNotFound, "Session not found"))
		return nil
	}
	return &ServerSession{srv: h.srv, state: st}
}

// readPOST checks a POST's Content-Type and Accept headers and reads its
// body within the size and time bounds of both eras. When a check fails it
// answers the HTTP error itself, in era, and reports ok == false.
func (h *StreamableHandler) readPOST(w http.ResponseWriter, r *http.Request, era Era) (body []byte, ok bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, era, nil, refuse(errUnsupportedMediaType, "Unsupported Media Type: Content-Type must be application/json"))
		return nil, false
	}
	if !accepts(r, "application/json") || !accepts(r, "text/event-stream") {
		writeError(w, era, nil, refuse(errNotAcceptable, "Not Acceptable: Accept must include application/json and text/event-stream"))
		return nil, false
	}
	body, err := readBody(w, r, h.opts.MaxBodyBytes, h.srv.opts.Limits.BodyReadTimeout)
	if err != nil {
		writeError(w, era, nil, err)
		return nil, false
	}
	return body, true
}

// loneMetaVersion2026 reports the 2026 _meta protocol version of a lone message
// (never of a batch, whose members may all have been invalid).
func loneMetaVersion2026(msgs []*Message, batch bool) (string, bool) {
	if batch || len(msgs) != 1 {
		return "", false
	}
	return metaVersion2026(msgs[0])
}

func (h *StreamableHandler) servePOST(w http.ResponseWriter, r *http.Request, principal string) {
	// The reading and the checks are in acceptPOST, and the requests run
	// in runPOST: their frames are not under an events/stream's while it
	// waits (see heldStream.run).
	ss, requests, badOut, batch := h.acceptPOST(w, r, principal)
	if ss == nil {
		return
	}
	if !batch && len(requests) == 1 && requests[0].Method == "events/stream" {
		// A held stream: not counted with the session's requests in
		// flight (SEP-3415), but with the principal's listen streams.
		h.serveEventStream(w, r, ss, requests[0])
		return
	}
	h.runPOST(w, r, ss, requests, badOut, batch)
}

// acceptPOST reads and checks a 2025-era POST, serves an initialize, and
// handles its notifications and responses. It returns the session, the
// requests to run and the error responses of invalid batch members;
// a nil session when the POST was answered.
//
//go:noinline
func (h *StreamableHandler) acceptPOST(w http.ResponseWriter, r *http.Request, principal string) (ss *ServerSession, requests []*Message, badOut [][]byte, batch bool) {
	ctx := r.Context()
	body, ok := h.readPOST(w, r, Era2025)
	if !ok {
		return nil, nil, nil, false
	}
	msgs, bad, batch, rpcErr := decodeBatch(body)
	if rpcErr == nil && len(bad) > 0 && !batch {
		rpcErr = bad[0].err
	}
	if rpcErr != nil {
		writeError(w, Era2025, nil, reject(rpcErr))
		return nil, nil, nil, false
	}
	if v, ok := loneMetaVersion2026(msgs, batch); ok && msgs[0].Method != "initialize" && r.Header.Get("Mcp-Session-Id") == "" {
		// A 2026-era request without the version header, or with a
		// 2025-era one: not a session request missing its session id.
		msg := "Header mismatch: the MCP-Protocol-Version header is required"
		if hv := r.Header.Get("Mcp-Protocol-Version"); hv != "" {
			msg = "Header mismatch: MCP-Protocol-Version " + hv + " differs from _meta protocolVersion " + v
		}
		writeError(w, Era2026, msgs[0].ID, refuse(errHeaderMismatch, msg))
		return nil, nil, nil, false
	}
	for _, m := range msgs {
		if m.Method == "initialize" {
			if batch {
				writeError(w, Era2025, nil, refuse(errBadRequest, "Bad Request: initialize must not be part of a batch"))
				return nil, nil, nil, false
			}
			if r.Header.Get("Mcp-Session-Id") != "" {
				writeError(w, Era2025, nil, refuse(errBadRequest, "Bad Request: initialize must not carry an Mcp-Session-Id (it starts a new session)"))
				return nil, nil, nil, false
			}
			// Bad params are refused before they count against the
			// session limits.
			if _, err := h.srv.checkInitialize(m.Params); m.IsRequest() && err != nil {
				h.initializeError(w, r, m, err)
				return nil, nil, nil, false
			}
			// An anonymous client's session belongs to, and counts
			// against, its address.
			owner := quotaPrincipal(r, principal)
			if ok, retry := h.rate.allow(r.Context(), "sessions/"+owner, h.srv.opts.Limits.MaxSessionsPerHour, time.Hour); !ok {
				writeError(w, Era2025, nil, rateLimited(retry, "more than "+itoa(int64(h.srv.opts.Limits.MaxSessionsPerHour))+" new sessions per hour"))
				return nil, nil, nil, false
			}
			if !h.allowSession(r.Context(), w, owner) {
				return nil, nil, nil, false
			}
			h.serveInitialize(w, r, owner, m)
			return nil, nil, nil, false
		}
	}
	ss = h.session(w, r, principal)
	if ss == nil {
		return nil, nil, nil, false
	}
	if batch && !version(ss.ProtocolVersion()).allowsBatch() {
		writeError(w, Era2025, nil, refuse(errBadRequest, "Bad Request: JSON-RPC batches are not supported in protocol version "+ss.ProtocolVersion()+" (only 2025-03-26 allows them)"))
		return nil, nil, nil, false
	}
	// An invalid batch member gets an error response of its own; the
	// others are served (JSON-RPC 2.0).
	for _, b := range bad {
		badOut = append(badOut, (&response{id: b.id, err: b.err}).encode(Era2025))
	}
	// Registry changes since the session was last told go into its GET
	// stream log now, even if it has no stream open: they wait there.
	if err := h.srv.notifyChanges(ctx, ss); err != nil {
		h.srv.log.WarnContext(ctx, "checking registry changes", "session", ss.ID(), "err", err)
	}
	for _, m := range msgs {
		var err error
		switch {
		case m.IsResponse():
			err = h.srv.handleResponse(ctx, ss, m)
		case m.IsNotification():
			err = h.srv.handleNotification(ctx, ss, m)
		default:
			requests = append(requests, m)
		}
		if err != nil {
			var rpcErr *Error
			if errors.As(err, &rpcErr) {
				// Refused with its code, without its data.
				writeError(w, Era2025, nil, &refusal{kind: errRejected, msg: rpcErr.Message, cause: rpcErr})
				return nil, nil, nil, false
			}
			h.storeFailure(ctx, w, Era2025, nil, err, "handling client message", "session", ss.ID(), "method", m.Method)
			return nil, nil, nil, false
		}
	}
	h.srv.touchRequest(ctx, ss)
	if len(requests) == 0 && len(badOut) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return nil, nil, nil, false
	}
	return ss, requests, badOut, batch
}

// runPOST runs the requests of a POST that acceptPOST accepted, and
// answers it.
//
//go:noinline
func (h *StreamableHandler) runPOST(w http.ResponseWriter, r *http.Request, ss *ServerSession, requests []*Message, badOut [][]byte, batch bool) {
	ctx := r.Context()
	if len(requests) > 0 {
		if !h.inflight.acquire(ss.ID(), h.srv.opts.Limits.MaxInFlightPerSession, h.srv.opts.Limits.MaxInFlight) {
			writeError(w, Era2025, nil, tooMany("too many requests in flight for this session or server; retry later"))
			return
		}
	}
	if batch {
		if len(requests) > 0 {
			defer h.inflight.release(ss.ID())
		}
		// Batch members answer together in one JSON array; their related
		// messages go to the session's GET stream.
		out := badOut
		for _, m := range requests {
			if resp := h.srv.runRequest(context.WithoutCancel(ctx), ss, m, nil); resp != nil {
				out = append(out, resp.encode(Era2025))
			}
		}
		if len(out) == 0 { // every request was cancelled: nothing to answer
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(append([]byte("["), bytes.Join(out, []byte(","))...), ']'))
		return
	}
	h.serveRequest(w, r, ss, requests[0])
}

func (h *StreamableHandler) serveInitialize(w http.ResponseWriter, r *http.Request, principal string, m *Message) {
	if !m.IsRequest() {
		writeError(w, Era2025, nil, refuse(errBadRequest, "Bad Request: initialize must be a request"))
		return
	}
	res, sess, err := h.srv.initialize(r.Context(), principal, m.Params)
	if err != nil {
		h.initializeError(w, r, m, err)
		return
	}
	w.Header().Set("Mcp-Session-Id", sess.ID)
	w.Header().Set("Content-Type", "application/json")
	w.Write(encodeResponse(m.ID, res, nil))
}

// initializeError answers an initialize that failed with err.
func (h *StreamableHandler) initializeError(w http.ResponseWriter, r *http.Request, m *Message, err error) {
	var rpcErr *Error
	switch {
	case errors.Is(err, notify.ErrTooLarge):
		writeError(w, Era2025, m.ID, refuse(errProfileTooLarge, "invalid params: the session profile is too large to store"))
	case errors.As(err, &rpcErr):
		writeError(w, Era2025, m.ID, reject(rpcErr))
	default:
		// A store failure: 503, retry.
		h.storeFailure(r.Context(), w, Era2025, m.ID, err, "initialize failed")
	}
}

// serveRequest runs one request. Its response is plain JSON unless the
// request sends a message first or runs longer than SSEAfter: then it is
// an SSE stream whose events are logged, so any process can resume it.
func (h *StreamableHandler) serveRequest(w http.ResponseWriter, r *http.Request, ss *ServerSession, m *Message) {
	out := &outStream{
		h:        h,
		sse:      newSSEWriter(w),
		w:        w,
		session:  ss,
		streamID: randomID(6),
		detached: make(chan struct{}),
	}
	h.streams.Add(1)
	defer h.streams.Done()
	// A client that disconnects holding an event id may resume: the
	// request goes on and its response waits in the log. One that leaves
	// before it saw an event id never could, so the request is cancelled.
	ctx, abandon := context.WithCancel(context.WithoutCancel(r.Context()))
	done := make(chan *response, 1)
	go func() {
		defer h.inflight.release(ss.ID())
		done <- h.srv.runRequest(ctx, ss, m, out)
	}()
	gone := r.Context().Done()

	upgrade := time.NewTimer(h.opts.SSEAfter)
	defer upgrade.Stop()
	var deadline <-chan time.Time
	if d, ok := h.streamDeadline(r.Context()); ok {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		deadline = t.C
	}
	closing := h.closing
	for {
		select {
		case resp := <-done:
			out.finish(ctx, resp)
			abandon()
			return
		case <-upgrade.C:
			out.upgrade()
		case <-deadline:
			deadline = nil
			out.detach()
		case <-closing:
			closing = nil
			out.detach()
		case <-gone:
			gone = nil
			out.mu.Lock()
			resumable := out.hasID
			out.mu.Unlock()
			if !resumable {
				abandon()
			}
		case <-out.detached:
			// The stream was closed with retry: before the request ended;
			// the request goes on and logs its response for the client
			// to resume with Last-Event-ID.
			go func() {
				defer abandon()
				out.finish(ctx, <-done)
			}()
			return
		}
	}
}

// streamDeadline is when a stream must be closed: before the request
// context's deadline (a Lambda invocation's) and MaxStreamDuration.
func (h *StreamableHandler) streamDeadline(ctx context.Context) (time.Time, bool) {
	var d time.Time
	if h.opts.MaxStreamDuration > 0 {
		d = time.Now().Add(h.opts.MaxStreamDuration)
	}
	if cd, ok := ctx.Deadline(); ok {
		cd = cd.Add(-h.opts.StreamMargin)
		if d.IsZero() || cd.Before(d) {
			d = cd
		}
	}
	return d, !d.IsZero()
}

// sink receives the related messages of a request (progress, logs,
// server-to-client requests) and delivers them on the request's response
// stream. Implementations are safe for concurrent use.
type sink interface {
	send(ctx context.Context, msg []byte) error
	// detach closes the wire early, where the transport can resume.
	detach()
}

// outStream is the response of one POST request: JSON until the first
// related message, then an SSE stream whose every event is first appended
// to the stream's log. Its methods are safe for concurrent use; the mutex
// keeps log order and wire order the same.
type outStream struct {
	h        *StreamableHandler
	sse      *sseWriter
	w        http.ResponseWriter
	session  *ServerSession
	streamID string

	mu         sync.Mutex
	isSSE      bool
	hasID      bool // the client has seen an event id, so it can resume
	wireGone   bool // the client went away, the stream was detached, or the response is written
	detached   chan struct{}
	detachOnce sync.Once
}

// upgradeLocked switches the response to SSE. Caller holds o.mu. Unless
// a message is about to be logged (sending), the stream's log gets an
// open record first, so that a resume from the priming event id finds a
// stream that exists.
func (o *outStream) upgradeLocked(sending bool) {
	if o.isSSE || o.wireGone {
		return
	}
	o.isSSE = true
	o.sse.start()
	if version(o.session.ProtocolVersion()).primesStreams() {
		if !sending {
			o.logOpen()
		}
		// Priming event: the client can resume from here even if the
		// stream breaks before the first message.
		if err := o.sse.prime(eventID(o.streamID, 0), o.h.opts.RetryInterval); err != nil {
			o.wireGone = true
		}
		o.hasID = true
	}
}

func (o *outStream) upgrade() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.upgradeLocked(false)
}

// send logs msg on the stream and writes it to the client.
func (o *outStream) send(ctx context.Context, msg []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.upgradeLocked(true)
	return o.emitLocked(ctx, msg)
}

func (o *outStream) emitLocked(ctx context.Context, msg []byte) error {
	seq, _, err := o.h.srv.store.Append(ctx, o.session.ID(), o.streamID, [][]byte{msg}, nil)
	switch {
	case errors.Is(err, notify.ErrNotFound):
		// The session was deleted (DELETE, expiry) while the request ran:
		// nobody can read its answer any more. Stop the session's requests
		// on this process, this one included, without an error per
		// message.
		if o.h.srv.local.cancelSession(o.session.ID()) > 0 {
			o.h.srv.log.DebugContext(ctx, "session gone: cancelling its requests", "session", o.session.ID())
		}
		return err
	case err != nil:
		o.h.srv.log.ErrorContext(ctx, "logging stream event", "session", o.session.ID(), "stream", o.streamID, "err", err)
		// Still deliver it live, without an id: it cannot be replayed,
		// and the client's resume position must not move.
	}
	if o.wireGone {
		return err
	}
	id := ""
	if err == nil {
		id = eventID(o.streamID, seq)
	}
	if werr := o.sse.event(id, msg); werr != nil {
		o.wireGone = true
		return errors.Join(err, werr)
	}
	o.hasID = o.hasID || id != ""
	return nil // delivered live
}

// finish sends the response: as the JSON body, or as the last event.
// A nil resp is a cancelled request, which gets no response: the SSE
// stream just ends, a JSON one is 202 with no body.
func (o *outStream) finish(ctx context.Context, resp *response) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case !o.isSSE && !o.wireGone && resp == nil:
		o.w.WriteHeader(http.StatusAccepted)
	case !o.isSSE && !o.wireGone:
		resp.write(o.w, o.session.Era())
	case o.isSSE && resp != nil:
		o.emitLocked(ctx, resp.encode(o.session.Era()))
	}
	// The ResponseWriter is done: a message sent later (from a goroutine
	// the handler left behind) only goes to the log.
	o.wireGone = true
}

// detach closes the wire with a retry: field while the request goes on;
// later messages are only logged. It does nothing when the client has no
// event id to resume from (sessions before 2025-11-25 get no priming
// event): closing then would lose the response.
func (o *outStream) detach() {
	o.mu.Lock()
	o.upgradeLocked(false)
	if !o.hasID && !o.wireGone {
		o.mu.Unlock()
		return
	}
	if !o.wireGone {
		o.sse.retry(o.h.opts.RetryInterval)
		o.wireGone = true
	}
	o.mu.Unlock()
	o.detachOnce.Do(func() { close(o.detached) })
}

// CloseSSEStream ends the SSE stream of the request running in ctx with a
// "retry:" field (SEP-1699 polling): the request keeps running, and the
// client reconnects with Last-Event-ID to get the rest, from any process.
func CloseSSEStream(ctx context.Context) {
	if c := callFrom(ctx); c != nil && c.out != nil {
		c.out.detach()
	}
}

func (h *StreamableHandler) serveDELETE(w http.ResponseWriter, r *http.Request, principal string) {
	ss := h.session(w, r, principal)
	if ss == nil {
		return
	}
	if err := h.srv.store.DeleteSession(r.Context(), ss.ID()); err != nil && !errors.Is(err, notify.ErrNotFound) {
		h.storeFailure(r.Context(), w, Era2025, nil, err, "deleting session", "session", ss.ID())
		return
	}
	// The session's requests running here stop now; those running on
	// other processes stop at their next cancellation check (watchCancel)
	// or their next message (emitLocked), whichever comes first.
	h.srv.local.cancelSession(ss.ID())
	h.srv.endEventStreams(r.Context(), ss.Principal(), ss.ID())
	w.WriteHeader(http.StatusOK)
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

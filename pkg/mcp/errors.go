package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/notify"
)

// This file holds the package's error codes and sentinel errors, and the
// one map from a failed request to what the client gets: errorStatus
// gives the HTTP status and JSON-RPC code of an error in an era, and
// writeError is the one writer of an error response.

// JSON-RPC 2.0 error codes, and the MCP codes built on them.
const (
	CodeParseError     = -32700 // invalid JSON
	CodeInvalidRequest = -32600 // not a valid JSON-RPC message
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeResourceNotFound is MCP's code for resources/read of an unknown
	// URI (the 2025 era; the 2026 era answers CodeInvalidParams, SEP-2164).
	CodeResourceNotFound = -32002
)

// MCP error codes of the 2026 era.
const (
	// CodeHeaderMismatch: a required header is missing, or a header
	// disagrees with the body (MCP-Protocol-Version, Mcp-Method, Mcp-Name).
	CodeHeaderMismatch = -32020
	// CodeMissingRequiredClientCapability: the request needs a client
	// capability the client did not declare in its _meta.
	CodeMissingRequiredClientCapability = -32021
	// CodeUnsupportedProtocolVersion: the server does not speak the
	// request's protocol version; data lists the supported ones.
	CodeUnsupportedProtocolVersion = -32022
)

// Error codes of the Events extension as SEP-3415 numbers them (the
// default dialect, EventsErrorsSEP3415). EventsErrors.Code maps each to
// the code of the dialect a server answers in.
const (
	// CodeNotFound: an unknown event type (data.kind "event") or
	// subscription (data.kind "subscription").
	CodeNotFound = -32023
	// CodeForbidden: the principal may not use this event type with
	// these arguments.
	CodeForbidden = -32024
	// CodeResourceExhausted: a server limit was reached (data.limit).
	CodeResourceExhausted = -32025
	// CodeUnsupported: a well-formed request for something this event
	// type or server does not offer (data.feature, data.value).
	CodeUnsupported = -32026
	// CodeCallbackEndpointError: a webhook callback failed verification
	// or could not be reached (data.reason).
	CodeCallbackEndpointError = -32027
)

// The same errors as ChatGPT, the design sketch that preceded SEP-3415
// and the draft Events conformance suite number them
// (EventsErrorsChatGPT).
const (
	CodeChatGPTNotFound              = -32011
	CodeChatGPTForbidden             = -32012
	CodeChatGPTResourceExhausted     = -32013
	CodeChatGPTUnsupported           = -32014
	CodeChatGPTCallbackEndpointError = -32015
)

// EventsErrors is the numbering of the Events extension's errors a
// server answers in (ServerOptions.EventsErrors; functions/mcp reads it
// from MCPUSH_EVENTS_ERRORS). The names, messages and data are the same
// in both; only the codes differ.
type EventsErrors string

// The dialects of EventsErrors.
const (
	// EventsErrorsSEP3415 (the default, and what the empty value means):
	// -32023 to -32027, SEP-3415's numbers.
	EventsErrorsSEP3415 EventsErrors = "sep-3415"
	// EventsErrorsChatGPT: -32011 to -32015, the numbers of ChatGPT,
	// Hookdeck's default profile and the draft Events conformance suite.
	EventsErrorsChatGPT EventsErrors = "chatgpt"
)

// chatGPTCodes maps SEP-3415's Events codes to ChatGPT's.
var chatGPTCodes = map[int]int{
	CodeNotFound:              CodeChatGPTNotFound,
	CodeForbidden:             CodeChatGPTForbidden,
	CodeResourceExhausted:     CodeChatGPTResourceExhausted,
	CodeUnsupported:           CodeChatGPTUnsupported,
	CodeCallbackEndpointError: CodeChatGPTCallbackEndpointError,
}

// Code returns the code that dialect d gives the Events error whose
// SEP-3415 code is code (CodeNotFound ... CodeCallbackEndpointError):
// the one map between the two numberings. Any other code, and any code
// in a dialect other than EventsErrorsChatGPT, is returned as is. The
// ingest, which cannot link this package, takes the NotFound code of its
// terminated webhook envelope from webhook.NotFoundCode, a copy that
// TestWebhookNotFoundCode holds equal to this.
func (d EventsErrors) Code(code int) int {
	if c, ok := chatGPTCodes[code]; ok && d == EventsErrorsChatGPT {
		return c
	}
	return code
}

// Errors an Authenticator returns (wrapped) to choose the HTTP answer
// (errorStatus). Any other error is 401.
var (
	// ErrUnauthorized: no credentials, or credentials that do not
	// verify. 401.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrInsufficientScope: valid credentials without a permission the
	// server requires. 403.
	ErrInsufficientScope = errors.New("insufficient scope")
	// ErrAuthUnavailable: the credentials cannot be checked now (the
	// authorization server's keys or metadata cannot be fetched). 503
	// with Retry-After: the client retries with the same credentials.
	ErrAuthUnavailable = errors.New("authorization temporarily unavailable")
)

// Errors of a rejected requestState. They reach the client as the message
// of an invalid-params error.
var (
	// ErrStateMalformed: the token is not one this server issues.
	ErrStateMalformed = errors.New("malformed requestState")
	// ErrStateSignature: no key verifies the token (forged, tampered
	// with, or signed with a key that is no longer configured).
	ErrStateSignature = errors.New("requestState signature does not verify")
	// ErrStateExpired: the token's expiry has passed.
	ErrStateExpired = errors.New("requestState has expired")
	// ErrStateMismatch: the token belongs to another method, name or
	// principal.
	ErrStateMismatch = errors.New("requestState belongs to another request")
)

// Errors a handler gets from the ServerSession it serves.
var (
	// Err2026Request reports a server-to-client request made while
	// serving a 2026-era request other than tools/call, prompts/get and
	// resources/read, the only ones that may ask the client for input.
	Err2026Request = errors.New("mcp: this 2026-era request cannot ask the client for input")
	// ErrUnsupportedByClient reports a server-to-client request the client
	// did not declare a capability for.
	ErrUnsupportedByClient = errors.New("mcp: client did not declare the capability for this request")
	// Err2026Only reports a feature of the 2026 era used while
	// serving a 2025-era session.
	Err2026Only = errors.New("mcp: only 2026-era requests support this")

	// ErrStatelessRequest is Err2026Request's former name.
	//
	// Deprecated: use [Err2026Request].
	ErrStatelessRequest = Err2026Request
	// ErrStatelessOnly is Err2026Only's former name.
	//
	// Deprecated: use [Err2026Only].
	ErrStatelessOnly = Err2026Only
)

// Errors of the client.
var (
	// ErrSessionNotFound is returned (wrapped) when the server answers a
	// request of the session with HTTP 404: the session expired, was
	// deleted, or never existed on that server. The session cannot be used
	// any more; connect again, or set ClientOptions.Reconnect to have the
	// client re-initialize (and re-subscribe) by itself. The server
	// refuses a request for a session that is not the caller's with it
	// too (404).
	ErrSessionNotFound = errors.New("mcp: session not found")
	// ErrClientClosed is returned by calls on a ClientSession after Close.
	ErrClientClosed = errors.New("mcp: client session closed")
	// ErrListTooLarge is returned (wrapped) by a List call (ListTools,
	// ...) whose pages exceed ClientOptions.MaxListBytes or MaxListItems,
	// or 1000 pages, or whose nextCursor exceeds MaxCursorBytes.
	ErrListTooLarge = errors.New("mcp: list too large")
	// ErrUnauthorizedRetry is returned (wrapped) when the server refuses a
	// request again right after the Authorizer gave a new token source.
	ErrUnauthorizedRetry = errors.New("mcp: the server refused the new token")
	// ErrStopPolling, returned by a PollLoop handler, ends the loop
	// without an error.
	ErrStopPolling = errors.New("mcp: stop polling")
	// ErrStopStreaming, returned by a StreamEvents handler, ends the
	// stream without an error.
	ErrStopStreaming = errors.New("mcp: stop streaming")
	// ErrTaskCancelled is AwaitTask's error for a task that was cancelled.
	ErrTaskCancelled = errors.New("mcp: the task was cancelled")
	// ErrNotAcknowledged is returned by a 2026-era Subscribe when the
	// server's acknowledgement of the listen stream names the resource
	// subscriptions it grants and the URI is not among them: it does not
	// offer updates of that resource (a server without the resources
	// subscribe capability grants none). An acknowledgement without a
	// notifications object is taken at its word.
	ErrNotAcknowledged = errors.New("mcp: the server did not acknowledge the resource subscription")
	// ErrCrossOriginRedirect is returned (wrapped) for a redirect to
	// another origin than the request's (scheme, host, port): the client
	// does not follow it, so that the headers it adds
	// (ClientOptions.Header: API keys, tokens) and request signatures
	// reach only the server they were meant for.
	ErrCrossOriginRedirect = errors.New("mcp: redirect to another origin refused")
)

// Unexported errors of the client, the tasks engine and listen streams.
var (
	// errNot2026 reports a server/discover answer without 2026-07-28.
	errNot2026 = errors.New("the server does not list protocol version " + ProtocolVersion2026)
	// errEventTooLarge reports an SSE event over maxEventBytes.
	errEventTooLarge = errors.New("mcp: SSE event too large")
	// errUndecodable reports an SSE event whose data is not JSON-RPC: the
	// stream is not an MCP stream, and resuming it would only read more.
	errUndecodable = errors.New("mcp: undecodable SSE event")
	// errTooManyEvents reports a request's stream over MaxStreamMessages.
	errTooManyEvents = errors.New("mcp: too many events on the stream of one request")
	// errTaskTimeout is the cause of the context of work stopped by
	// TaskOptions.Timeout.
	errTaskTimeout = errors.New("the task's execution timeout passed")
	// errListenTaken reports that a listen stream's backing session no
	// longer records the stream (its Listen): another stream adopted it.
	errListenTaken = errors.New("the listen stream's backing session was adopted by another stream")
	// errServerShutdown is the cause of the end of the default runner's
	// work (ShutdownTasks), and refuses a request that reaches a handler
	// that is closing (503).
	errServerShutdown = errors.New("the server is shutting down")
)

// The kinds of a refusal: why the transport answers a request with an
// error of its own, each with its HTTP status and JSON-RPC code in
// refusalKinds.
var (
	// errRejected: a message refused with the JSON-RPC error it carries
	// (a body that does not decode, a notification or response of a
	// session that fails its checks, initialize's bad params). 400.
	errRejected = errors.New("rejected message")
	// errBadRequest: a request the transport cannot serve (a missing
	// Mcp-Session-Id, a batch where none is allowed, a malformed
	// Last-Event-ID, an unsupported 2025-era version header). 400.
	errBadRequest = errors.New("bad request")
	// errUnreadableBody: the body could not be read. 400, parse error.
	errUnreadableBody = errors.New("unreadable body")
	// errHeaderMismatch: a 2026-era header missing, repeated or
	// disagreeing with the body. 400.
	errHeaderMismatch = errors.New("header mismatch")
	// errInvalidMeta: a 2026-era request's params or _meta are invalid.
	// 400.
	errInvalidMeta = errors.New("invalid _meta")
	// errUnsupportedVersion: a 2026-era request names a version that is
	// not of the 2026 era. 400.
	errUnsupportedVersion = errors.New("unsupported protocol version")
	// errServerFault: a failure of the server that has no answer of its
	// own, a panic outside the handlers (WriteInternalError). 500, with no
	// Retry-After: a panic is a bug that the same request would most
	// likely hit again, unlike a busy store (503, Retry-After).
	errServerFault = errors.New("internal server error")
	// errForbidden: a Host or Origin that is not allowed. 403.
	errForbidden = errors.New("forbidden")
	// errNoStream: a resumption at a Last-Event-ID of no stream that has
	// more to deliver. 404.
	errNoStream = errors.New("no stream to resume")
	// errMethodNotAllowed: an HTTP method the endpoint does not serve.
	// 405.
	errMethodNotAllowed = errors.New("method not allowed")
	// errNotAcceptable: an Accept header without the media types the
	// answer may have. 406.
	errNotAcceptable = errors.New("not acceptable")
	// errBodyTimeout: the body was not read in time. 408.
	errBodyTimeout = errors.New("body read timeout")
	// errBodyTooLarge: a body over StreamableOptions.MaxBodyBytes. 413.
	errBodyTooLarge = errors.New("body too large")
	// errProfileTooLarge: an initialize whose session profile is too
	// large to store. 413, invalid params.
	errProfileTooLarge = errors.New("session profile too large")
	// errUnsupportedMediaType: a POST that is not application/json. 415.
	errUnsupportedMediaType = errors.New("unsupported media type")
	// errTooManyRequests: a bound on requests, streams, sessions or
	// listens reached. 429.
	errTooManyRequests = errors.New("too many requests")
	// errResourceExhausted: a limit of the Events extension reached (an
	// events/stream over MaxListensPerPrincipal). 429, with the code of
	// the ResourceExhausted *Error the refusal carries, in the server's
	// dialect (the refusal's data names the limit, as the extension
	// asks).
	errResourceExhausted = errors.New("resource exhausted")
)

// refusalKinds maps the kinds of a refusal, and the errors of the store
// and the Authenticator, to the HTTP status and JSON-RPC code of the
// answer, in both eras. errorStatus takes the first row whose error the
// failure wraps. The Authenticator's rows come first, most specific
// first: its refusal (kind ErrUnauthorized) is 503 if its error wraps
// ErrAuthUnavailable, 403 if it wraps ErrInsufficientScope, and 401
// whatever else it wraps. Code 0: the code of the *Error the refusal
// carries.
var refusalKinds = []struct {
	err          error
	status, code int
}{
	{ErrAuthUnavailable, http.StatusServiceUnavailable, CodeInternalError},
	{ErrInsufficientScope, http.StatusForbidden, CodeInvalidRequest},
	{ErrUnauthorized, http.StatusUnauthorized, CodeInvalidRequest},
	{errServerShutdown, http.StatusServiceUnavailable, CodeInternalError},
	{notify.ErrUnavailable, http.StatusServiceUnavailable, CodeInternalError},
	{errServerFault, http.StatusInternalServerError, CodeInternalError},
	{errForbidden, http.StatusForbidden, CodeInvalidRequest},
	{errRejected, http.StatusBadRequest, 0},
	{errBadRequest, http.StatusBadRequest, CodeInvalidRequest},
	{errUnreadableBody, http.StatusBadRequest, CodeParseError},
	{errHeaderMismatch, http.StatusBadRequest, CodeHeaderMismatch},
	{errInvalidMeta, http.StatusBadRequest, CodeInvalidParams},
	{errUnsupportedVersion, http.StatusBadRequest, CodeUnsupportedProtocolVersion},
	{ErrSessionNotFound, http.StatusNotFound, CodeInvalidRequest},
	{notify.ErrNotFound, http.StatusNotFound, CodeInvalidRequest},
	{errNoStream, http.StatusNotFound, CodeInvalidRequest},
	{errMethodNotAllowed, http.StatusMethodNotAllowed, CodeInvalidRequest},
	{errNotAcceptable, http.StatusNotAcceptable, CodeInvalidRequest},
	{errBodyTimeout, http.StatusRequestTimeout, CodeInvalidRequest},
	{errBodyTooLarge, http.StatusRequestEntityTooLarge, CodeInvalidRequest},
	{errProfileTooLarge, http.StatusRequestEntityTooLarge, CodeInvalidParams},
	{notify.ErrTooLarge, http.StatusRequestEntityTooLarge, CodeInvalidRequest},
	{errUnsupportedMediaType, http.StatusUnsupportedMediaType, CodeInvalidRequest},
	{errTooManyRequests, http.StatusTooManyRequests, CodeInvalidRequest},
	{errResourceExhausted, http.StatusTooManyRequests, 0},
}

// errorStatus is the one map from a failed request to the HTTP status and
// JSON-RPC code of its answer. err is one of:
//
//   - a *refusal, or a store or Authenticator error: the status and code
//     of the first row of refusalKinds it wraps, in either era; one that
//     wraps none is a failure of the server or its store, 503 with
//     CodeInternalError (the client retries);
//   - a *Error that dispatch answered (unknown method, bad params, a
//     tool's protocol error, an internal error): its code, except that
//     the 2026 era answers CodeResourceNotFound as CodeInvalidParams
//     (SEP-2164); HTTP 200 in the 2025 era, where every answer travels in
//     a 200 response; in the 2026 era 404 for CodeMethodNotFound, 400 for
//     a missing or mismatched header, client capability or protocol
//     version, 200 otherwise.
//
// The table test TestErrorStatus pins every row, in both eras.
func errorStatus(era Era, err error) (status, code int) {
	var rpc *Error
	hasRPC := errors.As(err, &rpc)
	for _, k := range refusalKinds {
		if errors.Is(err, k.err) {
			code = k.code
			if code == 0 {
				code = CodeInvalidRequest
				if hasRPC {
					code = rpc.Code
				}
			}
			return k.status, code
		}
	}
	var r *refusal
	if !hasRPC || errors.As(err, &r) {
		return http.StatusServiceUnavailable, CodeInternalError
	}
	code = rpc.Code
	if era != Era2026 {
		return http.StatusOK, code
	}
	switch code {
	case CodeResourceNotFound:
		return http.StatusOK, CodeInvalidParams
	case CodeMethodNotFound:
		return http.StatusNotFound, code
	case CodeHeaderMismatch, CodeMissingRequiredClientCapability, CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest, code
	}
	return http.StatusOK, code
}

// A refusal is an error the transport answers a request with itself:
// errorStatus maps kind (an error of refusalKinds, or a store error) to
// the HTTP status and JSON-RPC code; the client gets msg and data, and
// Retry-After when retryAfter is set. cause, when set, is what was
// refused: a rejected *Error, whose code the answer keeps, or an
// Authenticator's error.
type refusal struct {
	kind       error
	msg        string
	data       json.RawMessage
	retryAfter int // seconds; 0: no Retry-After
	cause      error
}

// refuse returns a refusal of kind with message msg.
func refuse(kind error, msg string) *refusal { return &refusal{kind: kind, msg: msg} }

// reject returns the refusal of a message with the JSON-RPC error e: 400,
// e's code, message and data.
func reject(e *Error) *refusal {
	return &refusal{kind: errRejected, msg: e.Message, data: e.Data, cause: e}
}

func (r *refusal) Error() string { return r.msg }

func (r *refusal) Unwrap() []error {
	if r.cause == nil {
		return []error{r.kind}
	}
	return []error{r.kind, r.cause}
}

// rpcError is what a client gets for a request that failed with err in
// era: the HTTP status, and the JSON-RPC error with errorStatus's code
// and err's message and data (a *refusal's, else a *Error's).
func rpcError(era Era, err error) (int, *Error) {
	status, code := errorStatus(era, err)
	e := &Error{Code: code}
	var r *refusal
	var rpc *Error
	switch {
	case errors.As(err, &r):
		e.Message, e.Data = r.msg, r.data
	case errors.As(err, &rpc):
		e.Message, e.Data = rpc.Message, rpc.Data
	default:
		// Not the error's text, which may name tables or files.
		e.Message = http.StatusText(status)
	}
	return status, e
}

// A failure is what a request is answered with when it fails: a
// *refusal (the transport's own answer) or a *Error (dispatch's). A plain
// error has no answer of its own: a failure of the server or its store
// becomes one through storeFailure or requestFailure, which log it under
// an error id that the answer names and, for a store that was
// unavailable, set Retry-After. So writeError takes only a failure, and a
// plain error cannot reach a client as a bare 503 nobody logged.
type failure interface {
	error
	isFailure()
}

func (*refusal) isFailure() {}
func (*Error) isFailure()   {}

// writeError is the one writer of an error response: it answers the
// request with JSON-RPC id id (nil: null) that failed with f in era, with
// the status and error of rpcError and a refusal's Retry-After.
func writeError(w http.ResponseWriter, era Era, id json.RawMessage, f failure) {
	status, e := rpcError(era, f)
	metrics.Refusal(context.Background(), status)
	if r, ok := f.(*refusal); ok && r.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(r.retryAfter))
	}
	writeJSON(w, status, encodeResponse(id, nil, e))
}

// WriteInternalError answers r, whose serving failed without an answer of
// its own (a panic recovered outside pkg/mcp, which answers a panicking
// handler itself), through the one writer of error responses: HTTP 500
// and an internal error (-32603) with id null whose message and data
// ({"requestId": requestID}) name requestID, the id the caller logged the
// failure under (pkg/serve: the Lambda request id), never the failure.
// 500 and no Retry-After, not 503: a panic is a bug that the same request
// would most likely hit again, so the answer does not invite a retry.
// Call it only before anything of the response was written.
func WriteInternalError(w http.ResponseWriter, r *http.Request, requestID string) {
	data, _ := json.Marshal(map[string]string{"requestId": requestID})
	writeError(w, requestEra(r), nil, &refusal{kind: errServerFault, msg: "internal error (request id " + requestID + ")", data: data})
}

// requestEra is the era of a request, decided from its headers before its
// body is read (wants2026): what its refusals are answered in.
func requestEra(r *http.Request) Era {
	if wants2026(r) {
		return Era2026
	}
	return Era2025
}

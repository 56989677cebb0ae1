package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
)

// HTTPError is a non-2xx HTTP answer the client could not act on.
type HTTPError struct {
	Status int
	Body   string // the start of the response body
	// RPC is the JSON-RPC error the body held, if it held one
	// (errors.As finds it through Unwrap).
	RPC *Error
}

// Unwrap returns the JSON-RPC error of the body, or nil.
func (e *HTTPError) Unwrap() error {
	if e.RPC == nil {
		return nil
	}
	return e.RPC
}

// Error says "HTTP 503 Service Unavailable: body"; the request that got
// the answer adds its own context (the client's errors start "mcp: METHOD").
func (e *HTTPError) Error() string {
	if e.RPC != nil {
		return fmt.Sprintf("HTTP %d: %v", e.Status, e.RPC)
	}
	msg := fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
	if body := strings.TrimSpace(e.Body); body != "" {
		msg += ": " + body
	}
	return msg
}

// NotificationHandler handles one notification from the server. params is
// the notification's raw params (nil when it has none).
//
// Handlers run one at a time, in the order the notifications arrived, on
// one goroutine per session. A handler that panics is recovered
// and logged, and the next notification is handled as usual.
//
// The trade-off: dispatch is simple, ordered and
// has no hidden concurrency, but a slow handler delays every later
// notification and progress callback. Notifications wait in a queue
// bounded in count and bytes (ClientOptions.MaxQueuedNotifications,
// MaxQueuedBytes); when it is full, what the server sends is dropped and
// counted (ClientSession.Dropped), a warning is logged and the
// DroppedHandler runs, so that the program can read back what it missed:
// a server cannot grow the client's memory without bound, and a slow
// handler is visible. Below the bounds every notification is handled;
// at them, a list_changed, or a resources/updated of a URI, that finds
// one of its kind still waiting coalesces with it (the waiting one runs
// after both arrived) rather than being dropped. CallTool with a progress callback returns
// only after its callbacks ran. Keep handlers fast (in-memory updates, logging, a non-blocking send
// to a goroutine of your own) and do I/O, model calls and other slow work
// elsewhere. A handler must not wait for a call on the same session that
// needs a later notification to be handled (a CallTool with progress):
// that deadlocks.
type NotificationHandler func(ctx context.Context, cs *ClientSession, method string, params json.RawMessage)

// ProgressFunc receives the progress notifications of one call, in order.
// It runs on the session's notification goroutine (see NotificationHandler).
type ProgressFunc func(p *ProgressParams)

// ClientOptions configure a Client. The zero value (or nil) is usable.
type ClientOptions struct {
	// HTTPClient sends every request. Default: a client without timeout
	// (streams are long-lived; use contexts to bound calls). Unless it
	// has a CheckRedirect of its own, the client uses a copy of it that
	// follows redirects only within the origin (scheme, host and port) of
	// the request: Header (API keys) and SigV4 signatures never reach
	// another host; a redirect elsewhere fails the request with
	// ErrCrossOriginRedirect.
	HTTPClient *http.Client
	// Header is added to every request (e.g. Authorization).
	Header http.Header
	// TokenSource, if set, gives the OAuth bearer token of every request
	// (golang.org/x/oauth2: refreshed as it expires).
	TokenSource oauth2.TokenSource
	// Authorizer, if set, is asked for a token source when the server
	// answers 401 (or 403 insufficient_scope) with a challenge: it
	// discovers the authorization server and runs a grant (package
	// oauth's ClientCredentials and Interactive). The request is then
	// sent again, once. See client_auth.go.
	Authorizer Authorizer
	// Logger receives warnings (undeclared notifications, recovered
	// handler panics, reconnections). Default: slog.Default().
	Logger *slog.Logger
	// ProtocolVersion is the version asked for at initialize. Default:
	// LatestProtocolVersion.
	ProtocolVersion string
	// Mode selects the protocol era: ClientMode2025 (the default),
	// ClientMode2026 or ClientModeAuto.
	Mode ClientMode

	// CreateMessageHandler answers sampling/createMessage (a 2025-era
	// server request, or a 2026-era input request of an input_required
	// result); setting it declares the sampling capability.
	CreateMessageHandler func(ctx context.Context, cs *ClientSession, p *CreateMessageParams) (*CreateMessageResult, error)
	// ElicitationHandler answers elicitation/create; setting it declares
	// the elicitation capability.
	ElicitationHandler func(ctx context.Context, cs *ClientSession, p *ElicitParams) (*ElicitResult, error)
	// RootsHandler answers roots/list; setting it declares the roots
	// capability.
	RootsHandler func(ctx context.Context, cs *ClientSession) (*ListRootsResult, error)

	// ToolsChangedHandler receives the re-listed tools after
	// notifications/tools/list_changed. The client re-lists on every such
	// notification with at most one re-list in flight per session;
	// notifications that arrive meanwhile coalesce into one more re-list
	// It runs like a NotificationHandler.
	ToolsChangedHandler func(ctx context.Context, cs *ClientSession, tools []*Tool)
	// PromptsChangedHandler is ToolsChangedHandler for prompts.
	PromptsChangedHandler func(ctx context.Context, cs *ClientSession, prompts []*Prompt)
	// ResourcesChangedHandler is ToolsChangedHandler for resources.
	ResourcesChangedHandler func(ctx context.Context, cs *ClientSession, resources []*Resource)

	// NoStandaloneStream: do not open the standalone GET stream, on which
	// the server sends what is not related to a request (list_changed,
	// resource updates, events).
	NoStandaloneStream bool
	// Reconnect: when the server answers 404 for the session, initialize
	// a new session, restore the log level and subscriptions, and go on
	// (the call that met the 404 is retried once). The new session does
	// not get what the old one missed.
	Reconnect bool
	// ReconnectedHandler runs (like a NotificationHandler, in order) after
	// Reconnect replaced a lost session, so that the program can fetch
	// what the old session missed.
	ReconnectedHandler func(ctx context.Context, cs *ClientSession)
	// RetryDelay is how long to wait before reopening a stream that ended
	// when the server sent no "retry:" field. Default: 1s. After failed
	// attempts the delay doubles, up to MaxRetryDelay.
	RetryDelay time.Duration
	// MaxRetryDelay bounds the delay between reconnection attempts.
	// Default: 10s.
	MaxRetryDelay time.Duration
	// MaxResumeAttempts bounds consecutive failed attempts to resume the
	// stream of one request; a resumption that brings no message (it
	// ends at once, or stays silent) counts as failed. Default: 10.
	MaxResumeAttempts int
	// MinRetryDelay is the floor on the delay before reopening a stream:
	// a server's smaller "retry:" is raised to it. Default: 500ms.
	MinRetryDelay time.Duration
	// IdleTimeout cuts a stream on which nothing (not even a keep-alive
	// comment) arrived for this long, and a request whose response
	// headers did not come in this long; the stream is then resumed with
	// Last-Event-ID (a request's stream, the GET stream) or listened to
	// anew (subscriptions/listen). Default: 60s, a little more than two
	// of mcpush's 25 s keep-alives. Negative: no idle timeout.
	IdleTimeout time.Duration

	// MaxQueuedNotifications bounds the notifications waiting for their
	// handlers; see NotificationHandler for what happens over it.
	// Default: 10 000.
	MaxQueuedNotifications int
	// MaxQueuedBytes bounds the size (method and params) of the
	// notifications waiting for their handlers. Default: 32 MiB.
	MaxQueuedBytes int64
	// DroppedHandler, if set, runs (like a NotificationHandler, in order)
	// after messages were dropped because the queue was full, with the
	// session's count of dropped messages so far; at most one run waits
	// at a time.
	DroppedHandler func(ctx context.Context, cs *ClientSession, dropped int64)
	// MaxStreamMessages bounds the messages the stream of one request may
	// carry before its response (notifications, progress, the server's
	// requests); over it the call fails. Default: 100 000.
	MaxStreamMessages int
	// MaxListBytes bounds the total size of the pages one List call
	// (ListTools, ...) reads; MaxListItems their items. Over either the
	// call fails. Defaults: 32 MiB, 100 000.
	MaxListBytes int64
	MaxListItems int
}

// The bounds of a List call besides MaxListBytes and MaxListItems.
const (
	// maxListPages bounds the pages one List call follows.
	maxListPages = 1000
	// MaxCursorBytes bounds a nextCursor the client sends back.
	MaxCursorBytes = 4096
)

// Client is an MCP client for Streamable HTTP (2025 era: initialize,
// sessions, the standalone GET stream). Create it with NewClient, register
// notification handlers, then Connect to a server. A Client is safe for
// concurrent use; handlers must be registered before Connect.
type Client struct {
	impl *Implementation
	opts ClientOptions
	log  *slog.Logger

	mu       sync.Mutex
	handlers map[string][]NotificationHandler
}

// NewClient returns a client that introduces itself as impl. nil opts
// means defaults.
func NewClient(impl *Implementation, opts *ClientOptions) *Client {
	c := &Client{impl: impl, handlers: map[string][]NotificationHandler{}}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.HTTPClient == nil {
		c.opts.HTTPClient = &http.Client{}
	}
	if c.opts.TokenSource != nil || c.opts.Authorizer != nil {
		c.opts.HTTPClient = withAuth(c.opts.HTTPClient, c.opts.TokenSource, c.opts.Authorizer)
	}
	if c.opts.Logger == nil {
		c.opts.Logger = slog.Default()
	}
	if c.opts.ProtocolVersion == "" {
		c.opts.ProtocolVersion = LatestProtocolVersion
	}
	if c.opts.RetryDelay <= 0 {
		c.opts.RetryDelay = time.Second
	}
	if c.opts.MaxRetryDelay <= 0 {
		c.opts.MaxRetryDelay = 10 * time.Second
	}
	if c.opts.MaxResumeAttempts <= 0 {
		c.opts.MaxResumeAttempts = 10
	}
	if c.opts.MinRetryDelay <= 0 {
		c.opts.MinRetryDelay = 500 * time.Millisecond
	}
	if c.opts.IdleTimeout == 0 {
		c.opts.IdleTimeout = 60 * time.Second
	}
	if c.opts.MaxQueuedNotifications <= 0 {
		c.opts.MaxQueuedNotifications = 10_000
	}
	if c.opts.MaxQueuedBytes <= 0 {
		c.opts.MaxQueuedBytes = 32 << 20
	}
	if c.opts.MaxStreamMessages <= 0 {
		c.opts.MaxStreamMessages = 100_000
	}
	if c.opts.MaxListBytes <= 0 {
		c.opts.MaxListBytes = 32 << 20
	}
	if c.opts.MaxListItems <= 0 {
		c.opts.MaxListItems = 100_000
	}
	if c.opts.HTTPClient.CheckRedirect == nil {
		hc := *c.opts.HTTPClient
		hc.CheckRedirect = sameOriginRedirect
		c.opts.HTTPClient = &hc
	}
	c.log = c.opts.Logger
	return c
}

// AddNotificationHandler registers h for notifications with the given
// method ("notifications/message", ...); method "" receives every
// notification. Handlers of one method run in registration order, before
// the "" handlers. See NotificationHandler for how they run.
func (c *Client) AddNotificationHandler(method string, h NotificationHandler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handlers[method] = append(c.handlers[method], h)
}

func (c *Client) handlersFor(method string) []NotificationHandler {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(slices.Clone(c.handlers[method]), c.handlers[""]...)
}

// capabilities are the client capabilities declared at initialize.
func (c *Client) capabilities() json.RawMessage {
	caps := map[string]any{}
	if c.opts.CreateMessageHandler != nil {
		caps["sampling"] = map[string]any{}
	}
	if c.opts.ElicitationHandler != nil {
		caps["elicitation"] = map[string]any{}
	}
	if c.opts.RootsHandler != nil {
		caps["roots"] = map[string]any{"listChanged": false}
	}
	if len(c.handlersFor(methodEventsListChanged)) > len(c.handlersFor("")) {
		// A handler of the Events extension's notification: the client
		// understands the extension (client_events.go).
		caps["extensions"] = map[string]any{EventsExtension: map[string]any{}}
	}
	b, _ := json.Marshal(caps)
	return b
}

// ClientSession is a connection to one server: one MCP session, which the
// client keeps across reconnections. Its methods are safe for concurrent
// use. Close it when done.
type ClientSession struct {
	c   *Client
	url string

	ctx    context.Context // the session's lifetime: cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	queue  *notifyQueue

	answering       atomic.Int32 // server-to-client requests being answered
	requestsDropped atomic.Int64

	nextID    atomic.Int64
	nextToken atomic.Int64

	mu       sync.Mutex
	id       string // Mcp-Session-Id
	era2026  bool   // the 2026 era: no session, _meta on every request
	init     *InitializeResult
	level    LoggingLevel
	subs     []string
	progress map[string]ProgressFunc
	getStop  context.CancelFunc // stops the current GET stream loop
	listen   *listenStart       // the newest listen loop (2026 era)
	closed   bool

	dropLogged  time.Time // when a drop was last logged
	dropPending bool      // the DroppedHandler waits in the queue

	reinitMu sync.Mutex

	relists [3]relist // tools, prompts, resources
}

// Connect initializes a session with the server at url (its MCP
// endpoint), sends notifications/initialized, and opens the standalone
// GET stream (unless NoStandaloneStream). In the 2026 era (see
// ClientOptions.Mode) it sends server/discover instead and opens a
// subscriptions/listen stream. ctx bounds the handshake only.
func (c *Client) Connect(ctx context.Context, url string) (*ClientSession, error) {
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cs := &ClientSession{c: c, url: url, ctx: life, cancel: cancel, progress: map[string]ProgressFunc{}}
	cs.queue = newNotifyQueue(c.log, c.opts.MaxQueuedNotifications, c.opts.MaxQueuedBytes)
	if err := cs.connect(ctx); err != nil {
		cancel()
		cs.queue.close()
		return nil, err
	}
	return cs, nil
}

// initialize runs the handshake and starts the GET stream.
func (cs *ClientSession) initialize(ctx context.Context) error {
	c := cs.c
	cs.mu.Lock()
	cs.id = ""
	cs.init = nil
	cs.mu.Unlock()
	params := &InitializeParams{ProtocolVersion: c.opts.ProtocolVersion, Capabilities: c.capabilities(), ClientInfo: c.impl}
	var res InitializeResult
	sid, err := cs.roundTrip(ctx, "initialize", params, &res, nil)
	if err != nil {
		return err // "mcp: initialize URL: ..." (requestError)
	}
	if !supportedVersion(res.ProtocolVersion) {
		return fmt.Errorf("mcp: initialize %s: server chose unsupported protocol version %q", cs.url, res.ProtocolVersion)
	}
	if res.Capabilities == nil {
		res.Capabilities = &ServerCapabilities{}
	}
	cs.mu.Lock()
	cs.id = sid
	cs.init = &res
	cs.mu.Unlock()
	if err := cs.notify(ctx, "notifications/initialized", nil); err != nil {
		return fmt.Errorf("mcp: notifications/initialized: %w", err)
	}
	if !c.opts.NoStandaloneStream {
		cs.startGET()
	}
	return nil
}

// InitializeResult is the server's answer to initialize (of the current
// session, after a reconnection the new one's).
func (cs *ClientSession) InitializeResult() *InitializeResult {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.init
}

// ID is the current Mcp-Session-Id ("" if the server assigned none).
func (cs *ClientSession) ID() string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.id
}

// Close stops the streams, ends the session on the server (DELETE), and
// waits until the queued notifications have been handled.
func (cs *ClientSession) Close(ctx context.Context) error {
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		return nil
	}
	cs.closed = true
	id := cs.id
	cs.mu.Unlock()
	cs.cancel()
	var err error
	if id != "" {
		req, rerr := http.NewRequestWithContext(ctx, http.MethodDelete, cs.url, nil)
		if rerr == nil {
			cs.setHeaders(req, id)
			resp, derr := cs.c.opts.HTTPClient.Do(req)
			if derr != nil {
				err = derr
			} else {
				resp.Body.Close()
				if resp.StatusCode >= 300 && resp.StatusCode != http.StatusMethodNotAllowed && resp.StatusCode != http.StatusNotFound {
					err = &HTTPError{Status: resp.StatusCode}
				}
			}
			if err != nil {
				err = fmt.Errorf("mcp: DELETE session: %w", transportError(err))
			}
		}
	}
	cs.wg.Wait()
	cs.queue.close()
	return err
}

// Ping checks that the server answers (2025 era: the 2026 era has no
// ping).
func (cs *ClientSession) Ping(ctx context.Context) error {
	return cs.Call(ctx, "ping", nil, nil)
}

// Call sends any request and decodes its result into result (which may be
// nil). Errors from the server are *Error values; a 404 for the session
// wraps ErrSessionNotFound.
func (cs *ClientSession) Call(ctx context.Context, method string, params, result any) error {
	return cs.call(ctx, method, params, result, nil)
}

// ListTools lists all tools, following pagination.
func (cs *ClientSession) ListTools(ctx context.Context) ([]*Tool, error) {
	return listAll(ctx, cs, "tools/list", func(r *ListToolsResult) ([]*Tool, string) { return r.Tools, r.NextCursor })
}

// ListPrompts lists all prompts, following pagination.
func (cs *ClientSession) ListPrompts(ctx context.Context) ([]*Prompt, error) {
	return listAll(ctx, cs, "prompts/list", func(r *ListPromptsResult) ([]*Prompt, string) { return r.Prompts, r.NextCursor })
}

// ListResources lists all resources, following pagination.
func (cs *ClientSession) ListResources(ctx context.Context) ([]*Resource, error) {
	return listAll(ctx, cs, "resources/list", func(r *ListResourcesResult) ([]*Resource, string) { return r.Resources, r.NextCursor })
}

// ListResourceTemplates lists all resource templates, following pagination.
func (cs *ClientSession) ListResourceTemplates(ctx context.Context) ([]*ResourceTemplate, error) {
	return listAll(ctx, cs, "resources/templates/list", func(r *ListResourceTemplatesResult) ([]*ResourceTemplate, string) {
		return r.ResourceTemplates, r.NextCursor
	})
}

func listAll[R any, T any](ctx context.Context, cs *ClientSession, method string, items func(*R) ([]T, string)) ([]T, error) {
	o := &cs.c.opts
	var all []T
	var size int64
	cursor := ""
	for page := 1; page <= maxListPages; page++ {
		var raw json.RawMessage
		if err := cs.Call(ctx, method, &listParams{Cursor: cursor}, &raw); err != nil {
			return nil, err
		}
		if size += int64(len(raw)); size > o.MaxListBytes {
			return nil, fmt.Errorf("%w: %s: %d pages hold more than %d bytes (ClientOptions.MaxListBytes)", ErrListTooLarge, method, page, o.MaxListBytes)
		}
		var res R
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("mcp: %s: decoding result: %w", method, err)
		}
		raw = nil
		list, next := items(&res)
		if len(all)+len(list) > o.MaxListItems {
			return nil, fmt.Errorf("%w: %s: %d pages hold more than %d items (ClientOptions.MaxListItems)", ErrListTooLarge, method, page, o.MaxListItems)
		}
		all = append(all, list...)
		if next == "" {
			return all, nil
		}
		if len(next) > MaxCursorBytes {
			return nil, fmt.Errorf("%w: %s: page %d has a nextCursor of %d bytes, more than %d", ErrListTooLarge, method, page, len(next), MaxCursorBytes)
		}
		cursor = next
	}
	return nil, fmt.Errorf("%w: %s: more than %d pages", ErrListTooLarge, method, maxListPages)
}

// CallTool calls the tool name with args (any value that marshals to a
// JSON object; nil for none). If progress is not nil, the request asks for
// progress and progress receives each notification, in order; every
// callback has run when CallTool returns. A tool that fails returns a
// result with IsError set, not an error. When the server runs the call as
// a task (2026 era), CallTool follows it to its end (AwaitTask), and
// progress receives its status messages (Message).
func (cs *ClientSession) CallTool(ctx context.Context, name string, args any, progress ProgressFunc) (*CallToolResult, error) {
	if cs.is2026() {
		res, task, err := cs.StartTool(ctx, name, args, progress)
		if err != nil || task == nil {
			return res, err
		}
		var onStatus func(*Task)
		if progress != nil {
			onStatus = func(t *Task) { progress(&ProgressParams{Message: t.StatusMessage}) }
		}
		return cs.AwaitTask(ctx, task.TaskID, onStatus)
	}
	p := &CallToolParams{Name: name}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("mcp: tools/call %s: arguments: %w", name, err)
		}
		p.Arguments = b
	}
	var res CallToolResult
	if err := cs.call(ctx, "tools/call", p, &res, progress); err != nil {
		return nil, err
	}
	return &res, nil
}

// GetPrompt gets the prompt name rendered with args.
func (cs *ClientSession) GetPrompt(ctx context.Context, name string, args map[string]string) (*GetPromptResult, error) {
	var res GetPromptResult
	if err := cs.Call(ctx, "prompts/get", &GetPromptParams{Name: name, Arguments: args}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ReadResource reads the resource uri.
func (cs *ClientSession) ReadResource(ctx context.Context, uri string) (*ReadResourceResult, error) {
	var res ReadResourceResult
	if err := cs.Call(ctx, "resources/read", &ReadResourceParams{URI: uri}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Subscribe subscribes to updates of the resource uri
// (notifications/resources/updated). The client re-subscribes after a
// reconnection (ClientOptions.Reconnect).
//
// In the 2026 era there is no resources/subscribe: the client reopens its
// subscriptions/listen stream with uri added and waits for the server's
// acknowledgement; one that names what it grants without uri is
// ErrNotAcknowledged, and one with no notifications object is taken at
// its word.
func (cs *ClientSession) Subscribe(ctx context.Context, uri string) error {
	era2026 := cs.is2026()
	if !era2026 {
		if err := cs.Call(ctx, "resources/subscribe", &SubscribeParams{URI: uri}, nil); err != nil {
			return err
		}
	}
	cs.mu.Lock()
	if !slices.Contains(cs.subs, uri) {
		cs.subs = append(cs.subs, uri)
	}
	cs.mu.Unlock()
	if !era2026 {
		return nil
	}
	ls, err := cs.relisten(ctx)
	if err != nil || ls == nil || ls.granted == nil || slices.Contains(ls.granted, uri) {
		return err
	}
	// The server acknowledged the listen without the URI: it will not
	// deliver its updates. Forget it, so that later listens do not ask
	// again, and say so.
	cs.mu.Lock()
	cs.subs = slices.DeleteFunc(cs.subs, func(s string) bool { return s == uri })
	cs.mu.Unlock()
	return fmt.Errorf("%w: %s (the server acknowledged %d resource subscriptions without it)", ErrNotAcknowledged, uri, len(ls.granted))
}

// Unsubscribe ends a subscription.
func (cs *ClientSession) Unsubscribe(ctx context.Context, uri string) error {
	era2026 := cs.is2026()
	if !era2026 {
		if err := cs.Call(ctx, "resources/unsubscribe", &SubscribeParams{URI: uri}, nil); err != nil {
			return err
		}
	}
	cs.mu.Lock()
	cs.subs = slices.DeleteFunc(cs.subs, func(s string) bool { return s == uri })
	cs.mu.Unlock()
	if era2026 {
		return cs.resubscribe(ctx)
	}
	return nil
}

// SetLoggingLevel asks the server to send log messages of level and above
// (notifications/message). It is restored after a reconnection. In the
// 2026 era the level goes in every request's _meta instead, and the
// listen stream is reopened with it.
func (cs *ClientSession) SetLoggingLevel(ctx context.Context, level LoggingLevel) error {
	era2026 := cs.is2026()
	if !era2026 {
		if err := cs.Call(ctx, "logging/setLevel", &SetLevelParams{Level: level}, nil); err != nil {
			return err
		}
	}
	cs.mu.Lock()
	cs.level = level
	cs.mu.Unlock()
	if era2026 {
		return cs.resubscribe(ctx)
	}
	return nil
}

// call sends a request and waits for its response, re-initializing once
// on ErrSessionNotFound when the options ask for it.
func (cs *ClientSession) call(ctx context.Context, method string, params, result any, progress ProgressFunc) error {
	if cs.ctx.Err() != nil {
		return ErrClientClosed
	}
	_, err := cs.roundTrip(ctx, method, params, result, progress)
	for round := 1; err != nil; round++ {
		var ir *inputRequiredError
		if !errors.As(err, &ir) {
			break
		}
		if round > maxInputRounds {
			return fmt.Errorf("mcp: %s: still input_required after %d rounds", method, maxInputRounds)
		}
		retry, aerr := cs.answerInput(ctx, params, ir)
		if aerr != nil {
			return fmt.Errorf("mcp: %s: %w", method, aerr)
		}
		params = retry
		_, err = cs.roundTrip(ctx, method, params, result, progress)
	}
	if errors.Is(err, ErrSessionNotFound) && cs.c.opts.Reconnect && method != "initialize" {
		if rerr := cs.reinitialize(ctx, cs.staleID(err)); rerr != nil {
			return fmt.Errorf("%w (re-initializing: %v)", err, rerr)
		}
		_, err = cs.roundTrip(ctx, method, params, result, progress)
	}
	return err
}

// sessionGoneError carries the id of the session that got a 404, so that
// concurrent callers re-initialize only once.
type sessionGoneError struct{ id string }

func (e *sessionGoneError) Error() string { return "session not found (" + e.id + ")" }
func (e *sessionGoneError) Unwrap() error { return ErrSessionNotFound }

func (cs *ClientSession) staleID(err error) string {
	var g *sessionGoneError
	if errors.As(err, &g) {
		return g.id
	}
	return ""
}

// reinitialize starts a new session in place of stale, unless another
// caller already did, and restores the log level and subscriptions.
func (cs *ClientSession) reinitialize(ctx context.Context, stale string) error {
	cs.reinitMu.Lock()
	defer cs.reinitMu.Unlock()
	cs.mu.Lock()
	current, closed := cs.id, cs.closed
	level, subs := cs.level, slices.Clone(cs.subs)
	if cs.getStop != nil && current == stale {
		cs.getStop()
		cs.getStop = nil
	}
	cs.mu.Unlock()
	if closed {
		return ErrClientClosed
	}
	if current != stale {
		return nil // someone else re-initialized already
	}
	cs.c.log.Warn("mcp client: session not found; re-initializing", "url", cs.url, "session", stale)
	if err := cs.initialize(ctx); err != nil {
		cs.mu.Lock()
		if cs.id == "" {
			cs.id = stale // the next request meets the 404 again and retries
		}
		cs.mu.Unlock()
		return err
	}
	if level != "" {
		if _, err := cs.roundTrip(ctx, "logging/setLevel", &SetLevelParams{Level: level}, nil, nil); err != nil {
			return fmt.Errorf("restoring log level: %w", err)
		}
	}
	for _, uri := range subs {
		if _, err := cs.roundTrip(ctx, "resources/subscribe", &SubscribeParams{URI: uri}, nil, nil); err != nil {
			return fmt.Errorf("re-subscribing to %s: %w", uri, err)
		}
	}
	if h := cs.c.opts.ReconnectedHandler; h != nil {
		cs.queue.push(func() { cs.safely("reconnected", "initialize", func() { h(cs.ctx, cs) }) })
	}
	return nil
}

// registerProgress returns a new progress token routed to f.
func (cs *ClientSession) registerProgress(f ProgressFunc) string {
	tok := "p" + strconv.FormatInt(cs.nextToken.Add(1), 10)
	cs.mu.Lock()
	cs.progress[canonicalID(json.RawMessage(strconv.Quote(tok)))] = f
	cs.mu.Unlock()
	return tok
}

func (cs *ClientSession) unregisterProgress(tok string) {
	cs.mu.Lock()
	delete(cs.progress, canonicalID(json.RawMessage(strconv.Quote(tok))))
	cs.mu.Unlock()
}

func (cs *ClientSession) progressFunc(token json.RawMessage) ProgressFunc {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.progress[canonicalID(token)]
}

package mcp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// ServerOptions configure a Server. The zero value and nil mean defaults.
type ServerOptions struct {
	// Instructions are sent in the initialize result.
	Instructions string
	// Logger receives the server's own logs. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock: expiries, and the held streams' holds,
	// keepalives, own checks and read retries (a clock that does not
	// advance holds them still). Default: time.Now.
	Now func() time.Time
	// NewSessionID returns a new session id with at least 128 random bits.
	// Default: 16 bytes from crypto/rand, base64url.
	NewSessionID func() string
	// SessionIdleTimeout is how long a session lives without requests.
	// Default: 1 hour.
	SessionIdleTimeout time.Duration
	// PageSize is the page size of list results. Default: 100.
	PageSize int
	// PollInterval is how often a stream served by this process looks for
	// messages written by other processes. Default: 100ms.
	PollInterval time.Duration
	// ProgressInterval is the least time between two progress
	// notifications of one request. Default: 100ms.
	ProgressInterval time.Duration
	// CancelWatchAfter is how long a request runs before it records itself
	// as running and starts to look for a notifications/cancelled that
	// reached another process (one small write, then one read per
	// max(PollInterval, 250ms)). Shorter requests cost nothing for
	// cancellation. Default: 200ms.
	CancelWatchAfter time.Duration
	// CompletionHandler answers completion/complete. Nil: completions are
	// not declared, and the method is not found.
	CompletionHandler func(ctx context.Context, req *ServerRequest[*CompleteParams]) (*CompleteResult, error)
	// DynamicRegistries serves the tools overlay, resources and prompts
	// published to the store (through SNS registry messages) beside the
	// features registered in code, declares listChanged for all three, and
	// sends each session exactly one list_changed per change.
	DynamicRegistries bool
	// Events serves the Events extension (io.modelcontextprotocol/events,
	// SEP-3415: events/list, events/poll) with the event types of the
	// events registry, and declares it in server/discover and initialize.
	// It needs DynamicRegistries, and is off without it.
	Events bool
	// Webhooks, when set with a Sender and a store that keeps webhook
	// subscriptions (notify.WebhookStore: both stores), serve webhook
	// delivery of the Events extension (events/subscribe,
	// events/unsubscribe).
	Webhooks *WebhookOptions
	// EventFaults, if set, injects faults into this server's live
	// events/stream streams (test builds' conformance controls; see
	// EventFaults). Nil in production.
	EventFaults *EventFaults
	// EventsErrors is the numbering of the Events extension's error codes
	// (EventsErrors.Code): EventsErrorsSEP3415 (-32023 to -32027, the
	// default; also for an empty or unknown value) or EventsErrorsChatGPT
	// (-32011 to -32015). It applies to every Events error the server
	// answers: a request's, an events/stream refusal's and a stream's
	// notifications/events/terminated.
	EventsErrors EventsErrors
	// EventsPollInterval is the nextPollMs of an events/poll result that
	// returned no events (one that did says 1 s). Default: 5 s.
	EventsPollInterval time.Duration
	// RegistryTools, if set, are the only tools registered in code that a
	// tools registry item may enable, disable or re-describe; items naming
	// others are ignored. Nil means every tool registered in code. (The
	// SNS ingest checks names too: see ingest.Options.Tools.)
	RegistryTools []string
	// RegistryRefresh is how long this process trusts its copy of the
	// registry hashes before reading them again (one read, shared by all
	// requests and streams of the process). Default: 500ms.
	RegistryRefresh time.Duration
	// Authorize decides, per request, whether the caller may use an
	// event type, a topic named by one, or a tool (access.go). Nil:
	// RegistryAccess, the access rules of the registry items.
	Authorize AccessFunc
	// Limits bound what one client can make the server hold or produce.
	// Zero fields are DefaultLimits.
	Limits Limits
	// StateKeys are the keys of the HMAC that protects the requestState of
	// 2026-era input_required results: the first signs, every one
	// verifies (list the previous key second while rotating). Every
	// process serving the store needs the same keys. Nil: one random key
	// per process, which only works for a single process.
	StateKeys [][]byte
	// StateTTL is how long a requestState stays valid. Default: 10 minutes.
	StateTTL time.Duration
	// Tasks configure how tasks run (the tasks extension, 2026 era),
	// kept in the store (notify.TaskStore, part of Store).
	Tasks TaskOptions
}

// Server is an MCP server whose sessions live in a notify.Store, so that
// any number of processes sharing the store serve the same sessions.
// Features (tools, resources, prompts) are registered before serving and
// are the same in every process. A Server is safe for concurrent use.
type Server struct {
	impl  *Implementation
	store Store
	opts  ServerOptions
	log   *slog.Logger

	mu        sync.RWMutex
	tools     map[string]*serverTool
	resources map[string]*serverResource
	templates map[string]*serverTemplate
	prompts   map[string]*serverPrompt
	listers   []ResourceLister // AddResourceLister

	local   localRegistry // in-process fast paths; never the source of truth
	regs    registryCache // this process's copy of the dynamic registries
	states  stateSigner   // requestState tokens (2026 era)
	watcher watcher       // wakes held streams from the store's change feed
	live    liveness      // the liveness record of a process serving listen streams
	tasks   *taskEngine   // nil when the store keeps no tasks
}

// ServerRequest is what a handler receives: the session it serves (in the
// 2026 era a view of the one request, built from its _meta), the request
// params, and (through ctx) the stream it answers on.
type ServerRequest[P any] struct {
	Session *ServerSession
	Params  P
	// InputResponses are the client's answers, by key, to the input
	// requests of an earlier InputRequired (2026 era); nil on a first
	// attempt.
	InputResponses map[string]json.RawMessage
	// State is the State of that InputRequired, verified; nil when the
	// request carried no requestState.
	State []byte
}

// CallToolRequest is the request a tool handler receives.
type CallToolRequest = ServerRequest[*CallToolParams]

// ToolHandler handles tools/call for one tool. A returned error becomes a
// tool result with isError set (the model sees it); return an *Error to
// fail the request at the protocol level instead.
type ToolHandler func(ctx context.Context, req *CallToolRequest) (*CallToolResult, error)

// ResourceHandler reads a resource or a templated resource.
type ResourceHandler func(ctx context.Context, req *ServerRequest[*ReadResourceParams]) (*ReadResourceResult, error)

// PromptHandler renders a prompt.
type PromptHandler func(ctx context.Context, req *ServerRequest[*GetPromptParams]) (*GetPromptResult, error)

type serverTool struct {
	tool    *Tool
	handler ToolHandler
	prepare func(ctx context.Context, req *CallToolRequest) error // AddTaskTool
	guard   AccessFunc                                            // GuardTool
}

type serverResource struct {
	resource *Resource
	handler  ResourceHandler
}

type serverTemplate struct {
	template *ResourceTemplate
	match    func(uri string) bool
	handler  ResourceHandler
}

type serverPrompt struct {
	prompt  *Prompt
	handler PromptHandler
}

// NewServer returns a server that keeps its sessions in store.
func NewServer(impl *Implementation, store Store, opts *ServerOptions) *Server {
	s := &Server{
		impl:      impl,
		store:     store,
		tools:     map[string]*serverTool{},
		resources: map[string]*serverResource{},
		templates: map[string]*serverTemplate{},
		prompts:   map[string]*serverPrompt{},
	}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.Default()
	}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	if s.opts.NewSessionID == nil {
		s.opts.NewSessionID = func() string { return randomID(16) }
	}
	if s.opts.SessionIdleTimeout <= 0 {
		s.opts.SessionIdleTimeout = time.Hour
	}
	if s.opts.PageSize <= 0 {
		s.opts.PageSize = 100
	}
	if s.opts.PollInterval <= 0 {
		s.opts.PollInterval = 100 * time.Millisecond
	}
	if s.opts.RegistryRefresh <= 0 {
		s.opts.RegistryRefresh = 500 * time.Millisecond
	}
	if s.opts.ProgressInterval <= 0 {
		s.opts.ProgressInterval = 100 * time.Millisecond
	}
	if s.opts.CancelWatchAfter <= 0 {
		s.opts.CancelWatchAfter = 200 * time.Millisecond
	}
	s.opts.Limits = s.opts.Limits.withDefaults()
	if s.opts.EventsPollInterval <= 0 {
		s.opts.EventsPollInterval = 5 * time.Second
	}
	if s.opts.EventsErrors != EventsErrorsChatGPT {
		s.opts.EventsErrors = EventsErrorsSEP3415
	}
	if s.opts.StateTTL <= 0 {
		s.opts.StateTTL = 10 * time.Minute
	}
	s.log = s.opts.Logger
	s.watcher.srv = s
	s.local.init()
	s.states = stateSigner{keys: s.opts.StateKeys, ttl: s.opts.StateTTL, now: s.opts.Now}
	if len(s.states.keys) == 0 {
		s.states.keys = [][]byte{[]byte(randomID(32))}
	}
	s.tasks = newTaskEngine(s)
	if s.opts.EventFaults != nil {
		s.opts.EventFaults.bind(s)
	}
	return s
}

// Store returns the store the server keeps its state in, for handlers
// that write to it (e.g. a tool that changes a registry).
func (s *Server) Store() notify.Store { return s.store }

// AddTool registers a tool with an untyped handler. t.InputSchema must be
// set (a JSON object schema); the handler validates its own arguments.
func (s *Server) AddTool(t *Tool, h ToolHandler) {
	if t.InputSchema == nil {
		t.InputSchema = map[string]any{"type": "object"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tools[t.Name] = &serverTool{tool: t, handler: h}
}

// AddResource registers a static resource.
func (s *Server) AddResource(r *Resource, h ResourceHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resources[r.URI] = &serverResource{resource: r, handler: h}
}

// AddResourceTemplate registers a resource template. Reads of URIs that
// match t.URITemplate (RFC 6570 simple expansion: {var} matches one or
// more characters other than '/') go to h.
func (s *Server) AddResourceTemplate(t *ResourceTemplate, h ResourceHandler) {
	m, err := compileTemplate(t.URITemplate)
	if err != nil {
		panic(fmt.Sprintf("mcp: AddResourceTemplate(%q): %v", t.URITemplate, err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.templates[t.URITemplate] = &serverTemplate{template: t, match: m.MatchString, handler: h}
}

// ResourceLister lists concrete resources that a program serves through a
// resource template (events://orders for events://{topic}), for
// resources/list. It must return a bounded list: the server pages it with
// the rest.
type ResourceLister func(ctx context.Context) ([]*Resource, error)

// AddResourceLister adds l to the listers whose resources resources/list
// serves after the registered and dynamic resources (a URI already listed
// is not listed again). A lister's error is logged and its resources left
// out of that list.
func (s *Server) AddResourceLister(l ResourceLister) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listers = append(s.listers, l)
}

// AddPrompt registers a prompt.
func (s *Server) AddPrompt(p *Prompt, h PromptHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prompts[p.Name] = &serverPrompt{prompt: p, handler: h}
}

func (s *Server) capabilities() *ServerCapabilities {
	s.mu.RLock()
	defer s.mu.RUnlock()
	lc := s.opts.DynamicRegistries
	caps := &ServerCapabilities{Logging: &struct{}{}}
	if len(s.tools) > 0 || lc {
		caps.Tools = &ListChangedCap{ListChanged: lc}
	}
	if len(s.resources) > 0 || len(s.templates) > 0 || lc {
		caps.Resources = &ResourcesCapability{Subscribe: true, ListChanged: lc}
	}
	if len(s.prompts) > 0 || lc {
		caps.Prompts = &ListChangedCap{ListChanged: lc}
	}
	if s.opts.CompletionHandler != nil {
		caps.Completions = &struct{}{}
	}
	s.addEventsCapability(caps)
	return caps
}

// sortedKeys returns the keys of m in sorted order: list results have a
// deterministic order on every process.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// page cuts one page out of a sorted list. The cursor is the base64url of
// cursorPrefix and the last key of the previous page, so pages stay
// correct when items are added or removed between calls and on any
// process, and a cursor the server did not issue is CodeInvalidParams.
func page[T any](keys []string, get func(string) T, cursor string, size int) ([]T, string, error) {
	start := 0
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
			return nil, "", Errorf(CodeInvalidParams, "invalid params: cursor %q is not one this server issued", clipText(cursor, 128))
		}
		after := strings.TrimPrefix(string(b), cursorPrefix)
		start = sort.SearchStrings(keys, after)
		if start < len(keys) && keys[start] == after {
			start++
		}
	}
	end := min(start+size, len(keys))
	out := make([]T, 0, end-start)
	for _, k := range keys[start:end] {
		out = append(out, get(k))
	}
	next := ""
	if end < len(keys) {
		next = base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + keys[end-1]))
	}
	return out, next, nil
}

// cursorPrefix starts every decoded cursor.
const cursorPrefix = "after:"

func randomID(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("mcp: crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeParams unmarshals params into a new P; missing params decode as
// the zero value.
func decodeParams[P any](raw json.RawMessage) (P, error) {
	var p P
	if len(raw) == 0 {
		return p, nil
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, Errorf(CodeInvalidParams, "invalid params: %v", err)
	}
	return p, nil
}

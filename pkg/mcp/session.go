package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// getStream is the stream id of a session's own log (its standalone GET
// stream, or a listen stream's).
const getStream = notify.SessionStream

// ServerSession is one request's view of a durable session. It is built
// per request from the stored state and lives no longer than the request;
// the session itself lives in the store. Safe for concurrent use.
type ServerSession struct {
	srv   *Server
	state *notify.Session
	// era2026 marks the view of one 2026-era request: state is built
	// from the request's _meta and is never stored.
	era2026 bool
	// quota is the principal a 2026-era request's quotas count against
	// (quotaPrincipal: an anonymous client's address).
	quota string
}

// Era returns the era of the session's protocol version.
func (ss *ServerSession) Era() Era { return eraOf(ss.state.ProtocolVersion) }

// ID returns the session id (the Mcp-Session-Id header), or "" when
// serving a 2026-era request, which has no session.
func (ss *ServerSession) ID() string { return ss.state.ID }

// ProtocolVersion returns the negotiated protocol version.
func (ss *ServerSession) ProtocolVersion() string { return ss.state.ProtocolVersion }

// Principal returns the principal that created the session.
func (ss *ServerSession) Principal() string { return ss.state.Principal }

// LogLevel returns the level the client set, or "" if it never set one
// (then every level is sent).
func (ss *ServerSession) LogLevel() LoggingLevel { return LoggingLevel(ss.state.LogLevel) }

// Subscriptions returns the resource URIs the session is subscribed to.
func (ss *ServerSession) Subscriptions() []string { return ss.state.Subscriptions }

// CreatedAt returns when the session was created.
func (ss *ServerSession) CreatedAt() time.Time { return ss.state.CreatedAt }

// ExpiresAt returns when the session expires if idle.
func (ss *ServerSession) ExpiresAt() time.Time { return ss.state.ExpiresAt }

// ClientInfo returns the client's name and version from initialize.
func (ss *ServerSession) ClientInfo() *Implementation {
	var impl Implementation
	if len(ss.state.ClientInfo) > 0 {
		_ = json.Unmarshal(ss.state.ClientInfo, &impl)
	}
	return &impl
}

// ClientCapabilities returns the capabilities the client declared.
func (ss *ServerSession) ClientCapabilities() ClientCapabilities {
	var caps ClientCapabilities
	if len(ss.state.ClientCapabilities) > 0 {
		_ = json.Unmarshal(ss.state.ClientCapabilities, &caps)
	}
	return caps
}

// admits reports whether a log message at level goes to this session.
func (ss *ServerSession) admits(level LoggingLevel) bool {
	if ss.state.LogLevel == "" {
		return version(ss.state.ProtocolVersion).logsByDefault()
	}
	return levelRank(level) >= levelRank(LoggingLevel(ss.state.LogLevel))
}

// Log sends notifications/message if the session's level admits level.
// Inside a request it goes on that request's stream; otherwise on the
// session's GET stream (stored until a client reads it).
func (ss *ServerSession) Log(ctx context.Context, level LoggingLevel, logger string, data any) error {
	if levelRank(level) < 0 {
		return fmt.Errorf("mcp: unknown logging level %q", level)
	}
	if !ss.admits(level) {
		return nil
	}
	msg, err := encodeNotification("notifications/message", &LoggingMessageParams{Level: level, Logger: logger, Data: data})
	if err != nil {
		return err
	}
	return ss.send(ctx, msg)
}

// NotifyProgress reports progress of the request running in ctx. It sends
// nothing when the request carried no progressToken, drops values that do
// not increase, and sends at most one notification per ProgressInterval;
// the latest pending value is sent when the interval ends, and the last
// one before the response in any case.
func (ss *ServerSession) NotifyProgress(ctx context.Context, progress, total float64, message string) {
	c := callFrom(ctx)
	if c == nil || c.progress == nil {
		return
	}
	c.progress.report(ProgressParams{ProgressToken: c.progressToken, Progress: progress, Total: total, Message: message})
}

// send puts a server-to-client message on the stream of the request
// running in ctx, or on the GET stream when there is none.
func (ss *ServerSession) send(ctx context.Context, msg []byte) error {
	if c := callFrom(ctx); c != nil && c.out != nil && (c.sess == ss || !ss.era2026 && c.sess.ID() == ss.ID()) {
		return c.out.send(ctx, msg)
	}
	if ss.era2026 {
		// No session, no GET stream: outside a request there is nowhere
		// to send to (push in this era goes to subscriptions/listen).
		return nil
	}
	_, _, err := ss.srv.store.Append(ctx, ss.ID(), getStream, [][]byte{msg}, nil)
	if err == nil {
		ss.srv.watcher.wake(ss.ID()) // this process's streams at once
	}
	return err
}

// SamplingMessage is one message of a sampling request.
type SamplingMessage struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// CreateMessageParams are the params of sampling/createMessage.
type CreateMessageParams struct {
	Messages       []*SamplingMessage `json:"messages"`
	MaxTokens      int                `json:"maxTokens"`
	SystemPrompt   string             `json:"systemPrompt,omitempty"`
	Temperature    *float64           `json:"temperature,omitempty"`
	StopSequences  []string           `json:"stopSequences,omitempty"`
	IncludeContext string             `json:"includeContext,omitempty"`
}

// CreateMessageResult is the client's answer to sampling/createMessage.
type CreateMessageResult struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Model      string          `json:"model"`
	StopReason string          `json:"stopReason,omitempty"`
}

// ElicitParams are the params of elicitation/create (form mode).
type ElicitParams struct {
	Message         string `json:"message"`
	RequestedSchema any    `json:"requestedSchema"`
}

// ElicitResult is the client's answer to elicitation/create.
type ElicitResult struct {
	Action  string         `json:"action"` // accept, decline or cancel
	Content map[string]any `json:"content,omitempty"`
}

// Root is one of the client's roots.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// ListRootsResult is the client's answer to roots/list.
type ListRootsResult struct {
	Roots []*Root `json:"roots"`
}

// In a 2026-era tools/call, prompts/get or resources/read, CreateMessage,
// Elicit and ListRoots become multi round-trip requests: until the client
// has answered, they return an *InputRequired error, which the handler
// must return (as is or wrapped with %w); the client's retry runs the
// handler again from the start, and the same call, in the same order,
// then returns the client's answer. Answers of earlier rounds travel in
// the signed requestState, so a handler may ask several times, and every
// round may reach another process. A handler must therefore do nothing
// irreversible before its last question.

// CreateMessage asks the client to sample an LLM (sampling/createMessage).
func (ss *ServerSession) CreateMessage(ctx context.Context, p *CreateMessageParams) (*CreateMessageResult, error) {
	if ss.ClientCapabilities().Sampling == nil {
		return nil, fmt.Errorf("sampling/createMessage: %w", ErrUnsupportedByClient)
	}
	var res CreateMessageResult
	return &res, ss.call(ctx, "sampling/createMessage", p, &res)
}

// Elicit asks the client for input from its user (elicitation/create).
func (ss *ServerSession) Elicit(ctx context.Context, p *ElicitParams) (*ElicitResult, error) {
	if ss.ClientCapabilities().Elicitation == nil {
		return nil, fmt.Errorf("elicitation/create: %w", ErrUnsupportedByClient)
	}
	var res ElicitResult
	return &res, ss.call(ctx, "elicitation/create", p, &res)
}

// ListRoots asks the client for its roots (roots/list).
func (ss *ServerSession) ListRoots(ctx context.Context) (*ListRootsResult, error) {
	if ss.ClientCapabilities().Roots == nil {
		return nil, fmt.Errorf("roots/list: %w", ErrUnsupportedByClient)
	}
	var res ListRootsResult
	return &res, ss.call(ctx, "roots/list", struct{}{}, &res)
}

// call sends a server-to-client request and waits for the client's
// response, which may reach any process: the process that receives it
// stores it, and this one finds it in the store (or is woken directly
// when the response reaches this same process).
func (ss *ServerSession) call(ctx context.Context, method string, params, result any) error {
	if ss.era2026 {
		if c := callFrom(ctx); c != nil && c.sess == ss {
			return c.ask(method, params, result)
		}
		return fmt.Errorf("%s: %w", method, Err2026Request)
	}
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	id, _ := json.Marshal(requestIDPrefix + randomID(12))
	msg, _ := json.Marshal(Message{JSONRPC: "2.0", ID: id, Method: method, Params: p})
	key := responseKey(id)
	wake := ss.srv.local.waitFor(ss.ID(), key)
	defer ss.srv.local.stopWaiting(ss.ID(), key)
	// The pending marker tells every process that a response to id is
	// awaited: a response to anything else is stored nowhere.
	if _, err := ss.srv.store.PutMessage(ctx, ss.ID(), pendingKey(id), []byte("1")); err != nil {
		return fmt.Errorf("%s: recording the request: %w", method, err)
	}
	if err := ss.send(ctx, msg); err != nil {
		return fmt.Errorf("%s: sending request: %w", method, err)
	}
	t := time.NewTicker(ss.srv.opts.PollInterval)
	defer t.Stop()
	for {
		data, err := ss.srv.store.GetMessage(ctx, ss.ID(), key)
		switch {
		case err == nil:
			var resp Message
			if err := json.Unmarshal(data, &resp); err != nil {
				return fmt.Errorf("%s: decoding response: %w", method, err)
			}
			if resp.Error != nil {
				return fmt.Errorf("%s: client answered: %w", method, resp.Error)
			}
			if err := json.Unmarshal(resp.Result, result); err != nil {
				return fmt.Errorf("%s: decoding result: %w", method, err)
			}
			return nil
		case !errors.Is(err, notify.ErrNotFound):
			return fmt.Errorf("%s: reading response: %w", method, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-t.C:
		}
	}
}

// requestIDPrefix starts the id of every server-to-client request; a
// client response with another id answers nothing of ours.
const requestIDPrefix = "mcpush-"

func responseKey(id json.RawMessage) string { return "response/" + canonicalID(id) }
func cancelKey(id json.RawMessage) string   { return "cancel/" + canonicalID(id) }
func pendingKey(id json.RawMessage) string  { return "pending/" + canonicalID(id) }
func runningKey(id json.RawMessage) string  { return "running/" + canonicalID(id) }

// call is one client request in flight on this process.
type call struct {
	sess          *ServerSession
	id            json.RawMessage
	progressToken json.RawMessage
	out           sink // nil: related messages go to the GET stream
	progress      *progressThrottle
	// method is the request's method. inputResponses, state and answers
	// come from a retried 2026-era request; asks counts the
	// server-to-client requests of this run, and used holds those of
	// them answered by inputResponses (see ask).
	method         string
	inputResponses map[string]json.RawMessage
	state          []byte
	answers        map[string]json.RawMessage
	asks           int
	used           map[string]json.RawMessage
	task           *taskRef // the task the call runs in, if any (tasks_engine.go)
}

type callKey struct{}

func callFrom(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// localRegistry holds in-process shortcuts: waiters for client responses
// and cancel functions of running requests. The store stays the source of
// truth; these only save a poll interval when both ends meet on one process.
type localRegistry struct {
	mu      sync.Mutex
	waiters map[string]chan struct{}
	cancels map[string]context.CancelFunc
}

func (l *localRegistry) init() {
	l.waiters = map[string]chan struct{}{}
	l.cancels = map[string]context.CancelFunc{}
}

func (l *localRegistry) waitFor(sessionID, key string) <-chan struct{} {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	l.waiters[sessionID+"|"+key] = ch
	l.mu.Unlock()
	return ch
}

func (l *localRegistry) stopWaiting(sessionID, key string) {
	l.mu.Lock()
	delete(l.waiters, sessionID+"|"+key)
	l.mu.Unlock()
}

func (l *localRegistry) wake(sessionID, key string) {
	l.mu.Lock()
	ch := l.waiters[sessionID+"|"+key]
	l.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (l *localRegistry) addCancel(sessionID, key string, cancel context.CancelFunc) {
	l.mu.Lock()
	l.cancels[sessionID+"|"+key] = cancel
	l.mu.Unlock()
}

func (l *localRegistry) removeCancel(sessionID, key string) {
	l.mu.Lock()
	delete(l.cancels, sessionID+"|"+key)
	l.mu.Unlock()
}

// cancelSession cancels every request of the session that runs on this
// process (the session was deleted: nobody waits for their answers), and
// reports how many it cancelled.
func (l *localRegistry) cancelSession(sessionID string) int {
	prefix := sessionID + "|"
	var cancels []context.CancelFunc
	l.mu.Lock()
	for k, c := range l.cancels {
		if strings.HasPrefix(k, prefix) {
			cancels = append(cancels, c)
		}
	}
	l.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	return len(cancels)
}

// cancel cancels the request of key if it runs on this process, and
// reports whether it does.
func (l *localRegistry) cancel(sessionID, key string) bool {
	l.mu.Lock()
	cancel := l.cancels[sessionID+"|"+key]
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return cancel != nil
}

// progressThrottle rate-limits the progress notifications of one request:
// at most one per interval, values strictly increasing, the latest pending
// value sent when the interval ends, and flush sends what is pending.
type progressThrottle struct {
	send     func(ProgressParams)
	interval time.Duration
	now      func() time.Time

	sendMu sync.Mutex // serialises sends, so the wire order is the value order and flush waits for them

	mu      sync.Mutex
	last    time.Time // when the last notification was sent
	hasLast bool
	max     float64 // highest value accepted
	pending *ProgressParams
	timer   *time.Timer
	closed  bool
}

func (p *progressThrottle) report(pp ProgressParams) {
	p.mu.Lock()
	if p.closed || (p.hasLast || p.pending != nil) && pp.Progress <= p.max {
		p.mu.Unlock()
		return
	}
	p.max = pp.Progress
	now := p.now()
	if !p.hasLast || now.Sub(p.last) >= p.interval {
		p.hasLast, p.last, p.pending = true, now, nil
		p.sendMu.Lock()
		p.mu.Unlock()
		p.send(pp)
		p.sendMu.Unlock()
		return
	}
	p.pending = &pp
	if p.timer == nil {
		p.timer = time.AfterFunc(p.interval-now.Sub(p.last), p.fire)
	}
	p.mu.Unlock()
}

func (p *progressThrottle) fire() {
	p.mu.Lock()
	p.timer = nil
	pp := p.pending
	p.pending = nil
	if pp == nil || p.closed {
		p.mu.Unlock()
		return
	}
	p.hasLast, p.last = true, p.now()
	p.sendMu.Lock()
	p.mu.Unlock()
	p.send(*pp)
	p.sendMu.Unlock()
}

// flush sends the pending value, if any, and stops the throttle.
func (p *progressThrottle) flush() {
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	pp := p.pending
	p.pending = nil
	p.sendMu.Lock()
	p.mu.Unlock()
	if pp != nil {
		p.send(*pp)
	}
	p.sendMu.Unlock()
}

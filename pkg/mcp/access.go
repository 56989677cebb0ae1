package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/eventcursor"
)

// Authorization per event type, topic and tool (docs/auth.md). Every
// request's caller is authenticated once (auth.go); an Authenticator
// that knows the caller's claims (ClaimsAuthenticator: the OAuth
// validator, the IAM authenticator) puts them in the request's context.
// Each use of an event type, of a topic named by an event type with an
// access rule, or of a tool is then put to ServerOptions.Authorize with
// the principal, the claims, the action and the object; by default
// RegistryAccess, which applies the registry item's access rule
// (notify.Access).

// ClaimsAuthenticator is implemented by Authenticators that know the
// claims of a caller's credentials (a bearer token's payload, an IAM
// caller's ARN as claim "arn"). The claims reach ServerOptions.Authorize;
// they are never stored, except those a webhook subscription's access
// rule reads (notify.Access.Record).
type ClaimsAuthenticator interface {
	Authenticator
	// AuthenticateClaims is Authenticate that also returns when the
	// credentials expire (the zero time: never) and their claims.
	AuthenticateClaims(r *http.Request) (principal string, expires time.Time, claims notify.Claims, err error)
}

// Actions an AccessFunc is asked about.
const (
	ActionEventsList      = "events/list"      // listing an event type
	ActionEventsPoll      = "events/poll"      // polling it
	ActionEventsStream    = "events/stream"    // streaming it, and keeping the stream
	ActionEventsSubscribe = "events/subscribe" // subscribing a webhook to it, or unsubscribing
	ActionToolsList       = "tools/list"       // listing a tool
	ActionToolsCall       = "tools/call"       // calling it
	ActionTopicRead       = "topic/read"       // reading a topic through an event type naming it (resources, events_recent, events_wait, listen, the GET stream)
)

// AccessRequest is what an AccessFunc decides on.
type AccessRequest struct {
	// Principal is the caller's principal ("" when anonymous).
	Principal string
	// Claims are the caller's claims (nil without a
	// ClaimsAuthenticator). A task's work (it runs apart from the request)
	// has those the registry rules read, recorded with the task.
	Claims notify.Claims
	// Action is one of the Action* constants.
	Action string
	// Event is the event type of an events action, and the one naming
	// the topic of ActionTopicRead; nil for a tool.
	Event *notify.EventItem
	// Tool is the tool's name for a tools action.
	Tool string
	// Rule is the access rule of the registry item (the event type's,
	// the tool's); nil when it has none.
	Rule *notify.Access
}

// AccessFunc decides whether a caller may do an action on an object. It
// is called on every request's path (keep it fast, without I/O where
// possible) and must be safe for concurrent use. A refusal is answered
// as for an object that does not exist (events: Forbidden alike for
// both; tools: an unknown tool), so it never tells whether the object
// exists.
type AccessFunc func(ctx context.Context, r *AccessRequest) bool

// RegistryAccess is the default AccessFunc: the registry item's access
// rule (r.Rule) permits r.Claims. A program adds its own rules by
// calling it from its AccessFunc.
func RegistryAccess(_ context.Context, r *AccessRequest) bool { return r.Rule.Permits(r.Claims) }

// identityKey is the context key of the request's caller.
type identityKey struct{}

// identity is the caller of a request.
type identity struct {
	principal string
	claims    notify.Claims
}

// withIdentity returns ctx with the caller's principal and claims.
func withIdentity(ctx context.Context, principal string, claims notify.Claims) context.Context {
	return context.WithValue(ctx, identityKey{}, identity{principal, claims})
}

// RequestClaims returns the claims of the caller of ctx's request (nil
// when its Authenticator told none).
func RequestClaims(ctx context.Context) notify.Claims {
	id, _ := ctx.Value(identityKey{}).(identity)
	return id.claims
}

// authorize puts an action on an object to the server's AccessFunc.
func (s *Server) authorize(ctx context.Context, action string, e *notify.EventItem, tool string, rule *notify.Access) bool {
	id, _ := ctx.Value(identityKey{}).(identity)
	a := s.opts.Authorize
	if a == nil {
		if rule == nil {
			return true // the common case: nothing to decide
		}
		a = RegistryAccess
	}
	return a(ctx, &AccessRequest{Principal: id.principal, Claims: id.claims, Action: action, Event: e, Tool: tool, Rule: rule})
}

// permitsEvent reports whether ctx's caller may do action on event type
// e.
func (s *Server) permitsEvent(ctx context.Context, action string, e *notify.EventItem) bool {
	return s.authorize(ctx, action, e, "", e.Access)
}

// guarded reports whether access decisions are in effect for the event
// types: an AccessFunc is set or a type has a rule. Then an unknown type
// is refused as a forbidden one is (eventForbidden), so that a refusal
// never tells whether a type exists.
func (s *Server) guarded(types map[string]*notify.EventItem) bool {
	if s.opts.Authorize != nil {
		return true
	}
	for _, e := range types {
		if e.Access != nil {
			return true
		}
	}
	return false
}

// eventForbidden is the refusal of an event type the caller may not use,
// and of an unknown one while access decisions are in effect: the same
// code, message and data for both.
func (s *Server) eventForbidden(name string) *Error {
	return s.eventsError(CodeForbidden, "Forbidden: event type "+clipText(name, 64)+" is not available to this caller", map[string]string{"reason": "access"})
}

// bindArguments applies e's bind rule for ctx's caller to a
// subscription's arguments (a JSON object, null or empty): a bound
// argument omitted is filled in with the caller's claim, one given with
// another value is Forbidden (as eventForbidden). Arguments that are not
// an object are returned as they are, for eventFilter to refuse.
func (s *Server) bindArguments(ctx context.Context, e *notify.EventItem, raw json.RawMessage) (json.RawMessage, error) {
	if e.Access == nil || len(e.Access.Bind) == 0 {
		return raw, nil
	}
	bound := e.Access.Bound(RequestClaims(ctx))
	args := map[string]json.RawMessage{}
	if t := bytes.TrimSpace(raw); len(t) > 0 && string(t) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil || args == nil {
			return raw, nil
		}
	}
	for arg, want := range bound {
		got, ok := args[arg]
		if !ok || string(got) == "null" {
			args[arg] = want
			continue
		}
		var v string
		if json.Unmarshal(got, &v) != nil || string(mustJSON(v)) != string(want) {
			return nil, s.eventForbidden(e.Name)
		}
		args[arg] = want
	}
	return json.Marshal(args)
}

// mustJSON encodes a string.
func mustJSON(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// checkEventAccess refuses, with eventForbidden, an event type e (nil:
// name is unknown) that ctx's caller may not use in delivery mode mode,
// and an unknown one while access decisions are in effect (guarded).
func (s *Server) checkEventAccess(ctx context.Context, types map[string]*notify.EventItem, e *notify.EventItem, name, mode string) error {
	if !s.guarded(types) {
		return nil
	}
	if e == nil || !s.permitsEvent(ctx, modeAction[mode], e) {
		return s.eventForbidden(name)
	}
	return nil
}

// modeAction is the action of each delivery mode.
var modeAction = map[string]string{
	notify.DeliveryPoll:    ActionEventsPoll,
	notify.DeliveryPush:    ActionEventsStream,
	notify.DeliveryWebhook: ActionEventsSubscribe,
}

// boundFilter is eventFilter of the arguments bound for ctx's caller
// (bindArguments).
func (s *Server) boundFilter(ctx context.Context, e *notify.EventItem, raw json.RawMessage) (map[string]json.RawMessage, error) {
	args, err := s.bindArguments(ctx, e, raw)
	if err != nil {
		return nil, err
	}
	return eventFilter(e, args)
}

// bindHolds reports whether a subscription's arguments (bound when it
// was made) carry every argument e's rule binds now, with ctx's caller's
// claim: false when a bind was added or changed since.
func bindHolds(ctx context.Context, e *notify.EventItem, args json.RawMessage) bool {
	if e.Access == nil || len(e.Access.Bind) == 0 {
		return true
	}
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(args)) > 0 && json.Unmarshal(args, &m) != nil {
		return false
	}
	for arg, want := range e.Access.Bound(RequestClaims(ctx)) {
		if string(m[arg]) != string(want) {
			return false
		}
	}
	return true
}

// recordedClaims are the claims of ctx's caller that e's rule reads, for
// a webhook subscription to record (the delivery re-checks them:
// notify.WebhookSubscription.Permitted); nil without a rule.
func recordedClaims(ctx context.Context, e *notify.EventItem) notify.Claims {
	return e.Access.Record(RequestClaims(ctx))
}

// accessCeiling caps a webhook grant of no expiry (ttlMs: null) at
// maxTTL for an event type with an access rule: the claims a
// subscription recorded are re-checked at every refresh and delivery,
// but a user revoked at the authorization server (removed from a group)
// keeps them until the subscription must be refreshed with a fresh
// token, so maxTTL (24 h) bounds how long a revoked user's subscription
// lives.
func accessCeiling(e *notify.EventItem, expires, now time.Time, maxTTL time.Duration) time.Time {
	if e.Access != nil && expires.IsZero() {
		return now.Add(maxTTL)
	}
	return expires
}

// permitsTool reports whether ctx's caller may do action on tool name,
// whose registry item is overlay's (nil: read it) and whose guard (of
// GuardTool; nil: none) is t's.
func (s *Server) permitsTool(ctx context.Context, action, name string, overlay map[string]*notify.ToolItem, t *serverTool) bool {
	if overlay == nil {
		overlay = s.toolOverlay(ctx)
	}
	var rule *notify.Access
	if dt := overlay[name]; dt != nil {
		rule = dt.Access
	}
	if t != nil && t.guard != nil {
		id, _ := ctx.Value(identityKey{}).(identity)
		if !t.guard(ctx, &AccessRequest{Principal: id.principal, Claims: id.claims, Action: action, Tool: name, Rule: rule}) {
			return false
		}
	}
	return s.authorize(ctx, action, nil, name, rule)
}

// GuardTool makes tool name (registered with AddTool) available only to
// the callers guard permits (on top of ServerOptions.Authorize): to any
// other it does not exist (tools/list leaves it out, tools/call answers
// as for an unknown tool). Call it right after AddTool, before serving.
// The admin tools (package admintools) are guarded so.
func (s *Server) GuardTool(name string, guard AccessFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tools[name]; t != nil {
		t.guard = guard
	}
}

// TopicAccess is what a caller may read of a topic's log through the
// core paths (resources/read and resources/list of events://<topic>,
// the event tools, a subscription's notifications on a GET or listen
// stream): everything, nothing, or the events whose data match one of
// the arguments bound for the caller by the event types naming the topic
// (the union of what their rules allow). A nil *TopicAccess is
// everything.
type TopicAccess struct {
	denied  bool
	filters []map[string]json.RawMessage
}

// Allowed reports whether the caller may read anything of the topic.
// A topic it may not read is answered as one without events, never with
// a refusal, so that nobody learns whether it exists.
func (a *TopicAccess) Allowed() bool { return a == nil || !a.denied }

// Admits reports whether the caller may read an event with data.
func (a *TopicAccess) Admits(data json.RawMessage) bool {
	if a == nil {
		return true
	}
	if a.denied {
		return false
	}
	for _, f := range a.filters {
		if eventcursor.Matches(f, eventcursor.ObjectData(data)) {
			return true
		}
	}
	return false
}

// TopicAccess returns what ctx's caller may read of topic: everything
// when no event type naming the topic has an access rule (and no
// ServerOptions.Authorize is set); otherwise the union, over the types
// naming it that permit the caller (ActionTopicRead), of everything (a
// type without bind) or the events matching the caller's bound arguments.
func (s *Server) TopicAccess(ctx context.Context, topic string) (*TopicAccess, error) {
	if !s.eventsOn() {
		return nil, nil
	}
	types, err := s.eventTypes(ctx)
	if err != nil {
		return nil, err
	}
	var naming []*notify.EventItem
	guarded := s.opts.Authorize != nil
	for _, e := range types {
		if e.Topic == topic {
			naming = append(naming, e)
			guarded = guarded || e.Access != nil
		}
	}
	if !guarded || len(naming) == 0 {
		return nil, nil
	}
	a := &TopicAccess{}
	claims := RequestClaims(ctx)
	for _, e := range naming {
		if !s.permitsEvent(ctx, ActionTopicRead, e) {
			continue
		}
		if e.Access == nil || len(e.Access.Bind) == 0 {
			return nil, nil // this type opens the whole topic to the caller
		}
		a.filters = append(a.filters, e.Access.Bound(claims))
	}
	a.denied = len(a.filters) == 0
	return a, nil
}

// filterTopicMessages drops, from what a GET or listen stream is about
// to write to ctx's caller, the notifications of the topics it may not
// read (TopicAccess): a notifications/message carrying an event of
// events/<topic> it may not read, and the notifications/resources/updated
// of events://<topic> that goes with it (the one right before it; an
// updated without its message is kept when the caller may read anything
// of the topic). The subscription itself is kept, as one to a topic that
// has no events, so nobody learns whether a topic exists; the check is
// made at every read with the caller's current claims.
func (s *Server) filterTopicMessages(ctx context.Context, msgs []heldMsg) []heldMsg {
	if !s.eventsOn() || len(msgs) == 0 {
		return msgs
	}
	cache := map[string]*TopicAccess{}
	access := func(topic string) *TopicAccess {
		a, ok := cache[topic]
		if !ok {
			var err error
			if a, err = s.TopicAccess(ctx, topic); err != nil {
				a = &TopicAccess{denied: true} // unreadable registry: fail closed
				s.log.WarnContext(ctx, "reading the events registry for a stream's topic access", "err", err)
			}
			cache[topic] = a
		}
		return a
	}
	out := msgs[:0:0]
	for i := 0; i < len(msgs); i++ {
		n := topicNotificationOf(msgs[i].data)
		if n == nil {
			out = append(out, msgs[i])
			continue
		}
		a := access(n.topic)
		if a == nil {
			out = append(out, msgs[i])
			continue
		}
		if n.updated {
			if i+1 < len(msgs) {
				if m := topicNotificationOf(msgs[i+1].data); m != nil && !m.updated && m.topic == n.topic {
					if a.Admits(m.data) {
						out = append(out, msgs[i], msgs[i+1])
					}
					i++
					continue
				}
			}
			if a.Allowed() {
				out = append(out, msgs[i])
			}
			continue
		}
		if a.Admits(n.data) {
			out = append(out, msgs[i])
		}
	}
	return out
}

// topicNotification is a notification of a topic's event, decoded.
type topicNotification struct {
	topic   string
	updated bool            // notifications/resources/updated; else notifications/message
	data    json.RawMessage // the event's data (a message's)
}

// topicNotificationOf decodes a notification of a topic's event (the
// ingest's fan-out: package ingest's EventNotifications), nil for any
// other message.
func topicNotificationOf(b []byte) *topicNotification {
	if !bytes.Contains(b, []byte(`events`)) {
		return nil // most messages: no decoding
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			URI    string `json:"uri"`
			Logger string `json:"logger"`
			Data   struct {
				Data json.RawMessage `json:"data"`
			} `json:"data"`
		} `json:"params"`
	}
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	switch {
	case m.Method == "notifications/resources/updated" && strings.HasPrefix(m.Params.URI, "events://"):
		return &topicNotification{topic: strings.TrimPrefix(m.Params.URI, "events://"), updated: true}
	case m.Method == "notifications/message" && strings.HasPrefix(m.Params.Logger, "events/"):
		return &topicNotification{topic: strings.TrimPrefix(m.Params.Logger, "events/"), data: m.Params.Data.Data}
	}
	return nil
}

// ruleClaims returns the claims of ctx's caller that some access rule of
// the events and tools registries reads (notify.Access.ClaimNames), for a
// task to record: its work runs apart from the request (another
// goroutine, another invocation) and is checked with them. Nil when no
// rule reads any.
func (s *Server) ruleClaims(ctx context.Context) notify.Claims {
	claims := RequestClaims(ctx)
	if len(claims) == 0 {
		return nil
	}
	var rules []*notify.Access
	if types, err := s.eventTypes(ctx); err == nil {
		for _, e := range types {
			rules = append(rules, e.Access)
		}
	}
	for _, t := range s.toolOverlay(ctx) {
		rules = append(rules, t.Access)
	}
	var out notify.Claims
	for _, r := range rules {
		for name, v := range r.Record(claims) {
			if out == nil {
				out = notify.Claims{}
			}
			out[name] = v
		}
	}
	return out
}

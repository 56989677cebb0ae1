package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	"github.com/mcpush/mcpush/pkg/notify"
)

// The Events extension (io.modelcontextprotocol/events, SEP-3415, built
// against its Draft of 2026-11-26; docs/events.md maps each rule): a
// client lists event types (events/list) and receives their events by
// poll (events/poll: events_poll.go), push (events/stream:
// events_stream.go, whose header walks an event's path from the ingest
// to the client) or webhook (events/subscribe: events_webhook.go). The
// event types are the items of the events registry (notify.EventItem,
// published through SNS like the other registries); an event of a type
// is an event of its topic's log (notify.TopicEvent). A Server serves it
// when ServerOptions.Events and DynamicRegistries are set.
//
// Discovery: the capability is advertised twice, as SEP-3415 defines it
// (capabilities.extensions["io.modelcontextprotocol/events"] =
// {"listChanged":true}) and as ChatGPT reads it (a top-level
// capabilities.events = {}), in server/discover and in initialize.
// notifications/events/list_changed goes, exactly once per change of the
// events registry, to every 2025-era session whose client declared the
// extension in its initialize capabilities, and to 2026-era
// subscriptions/listen streams that opt in with eventsListChanged (the
// same per-session notified hash, notify.Session.NotifiedHashes, as the
// other registries).

// EventsExtension is the identifier of the Events extension.
const EventsExtension = "io.modelcontextprotocol/events"

// methodEventsListChanged is the notification of a change of the event
// types.
const methodEventsListChanged = "notifications/events/list_changed"

// eventsModes are the delivery modes this server implements, in
// canonical order: events/list offers an event type with the modes of its
// item that are among them, and not at all when none is.
var eventsModes = []string{notify.DeliveryPoll, notify.DeliveryPush}

// EventType describes an event type in events/list.
type EventType struct {
	Name          string          `json:"name"`
	Description   string          `json:"description,omitempty"`
	Delivery      []string        `json:"delivery"`
	InputSchema   json.RawMessage `json:"inputSchema"`
	PayloadSchema json.RawMessage `json:"payloadSchema"`
	Meta          Meta            `json:"_meta,omitempty"`
}

// ListEventsParams are the params of events/list.
type ListEventsParams struct {
	Cursor string `json:"cursor,omitempty"`
}

// ListEventsResult is the result of events/list. ResultType is
// "complete" in both eras, as SEP-3415 asks of every result of the
// extension.
type ListEventsResult struct {
	ResultType string       `json:"resultType,omitempty"`
	Events     []*EventType `json:"events"`
	NextCursor string       `json:"nextCursor,omitempty"`
}

// EventsCapability is the extension's settings object in
// capabilities.extensions.
type EventsCapability struct {
	ListChanged bool `json:"listChanged,omitempty"`
}

// eventsOn reports whether the server serves the Events extension.
func (s *Server) eventsOn() bool { return s.opts.Events && s.opts.DynamicRegistries }

// addEventsCapability declares the extension in caps, both ways.
func (s *Server) addEventsCapability(caps *ServerCapabilities) {
	if !s.eventsOn() {
		return
	}
	if caps.Extensions == nil {
		caps.Extensions = map[string]any{}
	}
	caps.Extensions[EventsExtension] = &EventsCapability{ListChanged: true}
	caps.Events = &struct{}{}
}

// notifiedKinds are the registries whose changes ss is told of: the
// events registry too when the server serves the extension and ss is a
// listen stream's backing session (its filter decides what reaches the
// client) or a 2025-era session whose client declared the extension.
func (s *Server) notifiedKinds(ss *ServerSession) []string {
	if s.eventsOn() && (version(ss.ProtocolVersion()).era() == Era2026 || declaresEvents(ss.state.ClientCapabilities)) {
		return allRegistryKinds
	}
	return registryKinds
}

// allRegistryKinds are registryKinds and the events registry.
var allRegistryKinds = append(slices.Clone(registryKinds), notify.RegistryEvents)

// declaresEvents reports whether client capabilities declare the Events
// extension (capabilities.extensions["io.modelcontextprotocol/events"]).
func declaresEvents(caps json.RawMessage) bool {
	if !bytes.Contains(caps, []byte(EventsExtension)) {
		return false // most clients: no decoding
	}
	var c struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(caps, &c) != nil {
		return false
	}
	v, ok := c.Extensions[EventsExtension]
	return ok && len(v) > 0 && v[0] == '{'
}

// eventTypes returns the event types of the events registry by name,
// with their defaults; items the server cannot serve are skipped (and
// logged).
func (s *Server) eventTypes(ctx context.Context) (map[string]*notify.EventItem, error) {
	items, err := s.registry(ctx, notify.RegistryEvents)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*notify.EventItem, len(items))
	for name, raw := range items {
		e, err := notify.DecodeEventItem(raw)
		if err != nil || e.Name != name {
			s.log.WarnContext(ctx, "skipping an events registry item", "name", clipText(name, 64), "err", err)
			continue
		}
		out[name] = e
	}
	return out, nil
}

// serves reports whether this server implements delivery mode m:
// eventsModes, and webhook when it serves webhooks.
func (s *Server) serves(m string) bool {
	return slices.Contains(eventsModes, m) || m == notify.DeliveryWebhook && s.webhookStore() != nil
}

// offered returns e's delivery modes that this server implements.
func (s *Server) offered(e *notify.EventItem) []string {
	var out []string
	for _, m := range notify.DeliveryModes {
		if e.Supports(m) && s.serves(m) {
			out = append(out, m)
		}
	}
	return out
}

// dispatchEvents runs a request of the Events extension; without it, the
// methods are not found.
func (s *Server) dispatchEvents(ctx context.Context, ss *ServerSession, m *Message) (any, error) {
	if !s.eventsOn() {
		return nil, Errorf(CodeMethodNotFound, "method not found: %s (this server does not offer the Events extension)", m.Method)
	}
	switch m.Method {
	case "events/list":
		return s.listEvents(ctx, m.Params)
	case "events/poll":
		return s.pollEvents(ctx, ss, m.Params)
	case "events/stream":
		// Served by the HTTP handler as a held stream
		// (serveEventStream): here only in a batch.
		return nil, Errorf(CodeInvalidRequest, "invalid request: events/stream must be the only message of its POST (its answer is an SSE stream)")
	case "events/subscribe", "events/unsubscribe":
		// Without webhook delivery the methods are still the extension's
		// (it is declared): checkWebhookKey answers Unsupported, or
		// Forbidden for an anonymous caller, naming MCPUSH_AUTH.
		if m.Method == "events/subscribe" {
			return s.subscribeEvents(ctx, ss, m.Params)
		}
		return s.unsubscribeEvents(ctx, ss, m.Params)
	}
	return nil, Errorf(CodeMethodNotFound, "method not found: %s (this server offers events/list, events/poll, events/stream, events/subscribe and events/unsubscribe)", m.Method)
}

// listEvents answers events/list: the event types with a delivery mode
// this server implements, sorted by name, a page at a time.
func (s *Server) listEvents(ctx context.Context, raw json.RawMessage) (*ListEventsResult, error) {
	p, err := decodeParams[ListEventsParams](raw)
	if err != nil {
		return nil, err
	}
	types, err := s.eventTypes(ctx)
	if err != nil {
		return nil, err
	}
	listed := map[string]*EventType{}
	for name, e := range types {
		modes := s.offered(e)
		if len(modes) == 0 || !s.permitsEvent(ctx, ActionEventsList, e) {
			continue
		}
		listed[name] = &EventType{Name: e.Name, Description: e.Description, Delivery: modes, InputSchema: e.InputSchema, PayloadSchema: e.PayloadSchema}
	}
	list, next, err := page(sortedKeys(listed), func(k string) *EventType { return listed[k] }, p.Cursor, s.opts.PageSize)
	if err != nil {
		return nil, err
	}
	return &ListEventsResult{ResultType: resultComplete, Events: list, NextCursor: next}, nil
}

// Package eventtools adds mcpush's event tools and the events://{topic}
// resource template to an *mcp.Server, with one call: Add. The tools
// return data (structuredContent with an output schema, never a bare
// "success" string) about the session and the external events published
// through SNS (package ingest writes them to the store):
//
//   - session_info: the session's id, protocol version, client, log
//     level, subscriptions and expiry;
//   - topics_list: the topics that have events, with their last sequence;
//   - events_recent: a topic's recent events, or those after a sequence;
//   - events_wait: waits for the next event of a topic, reporting
//     progress while it waits.
//
// events://{topic} reads a topic's recent events as JSON; a session
// subscribed to it is told of each new event (notifications/resources/
// updated), pushed by the ingest.
package eventtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// Tool names. A registry message may enable, disable or re-describe them
// (see ingest.BuiltinTools).
const (
	SessionInfo  = "session_info"
	TopicsList   = "topics_list"
	EventsRecent = "events_recent"
	EventsWait   = "events_wait"
)

// Names lists the tools Add registers.
var Names = []string{EventsRecent, EventsWait, SessionInfo, TopicsList}

// Store is what the event tools read: the topics and their events. Every
// notify.Store is one.
type Store interface {
	// Topics lists the topics that have events.
	Topics(ctx context.Context) ([]notify.Topic, error)
	// ReadTopicEvents returns up to limit events of topic with a
	// sequence number greater than after, oldest first.
	ReadTopicEvents(ctx context.Context, topic string, after int64, limit int) ([]notify.TopicEvent, error)
}

// Options tune the event tools. Nil means defaults.
type Options struct {
	// PollInterval is how often events_wait looks for a new event.
	// Default: 100ms.
	PollInterval time.Duration
	// MaxWait bounds events_wait's timeout. Default: 5 minutes.
	MaxWait time.Duration
}

// Add adds the event tools and the events://{topic} template to s,
// reading events from store. Call it before serving s.
func Add(s *mcp.Server, store Store, opts *Options) {
	b := &tools{store: store, srv: s}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.PollInterval <= 0 {
		b.opts.PollInterval = 100 * time.Millisecond
	}
	if b.opts.MaxWait <= 0 {
		b.opts.MaxWait = 5 * time.Minute
	}
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s, &mcp.Tool{Name: SessionInfo, Title: "Session info", Annotations: readOnly,
		Description: "Returns this MCP session's id, negotiated protocol version, client, log level, resource subscriptions and expiry."}, b.sessionInfo)
	mcp.AddTool(s, &mcp.Tool{Name: TopicsList, Title: "List event topics", Annotations: readOnly,
		Description: "Lists the topics that have received external events (published to SNS), with the last sequence number and time of each."}, b.topicsList)
	mcp.AddTool(s, &mcp.Tool{Name: EventsRecent, Title: "Recent events", Annotations: readOnly,
		Description: "Returns events of a topic: the most recent ones, or those after a sequence number."}, b.eventsRecent)
	// events_wait runs as a task for the clients that support tasks
	// (2026 era): the wait is bounded by MaxWait, not by the request.
	mcp.AddTool(s, &mcp.Tool{Name: EventsWait, Title: "Wait for an event", Annotations: readOnly,
		Execution:   &mcp.ToolExecution{TaskSupport: mcp.TaskOptional},
		Description: "Waits for the next event on a topic (after a sequence number; by default the next new one) and returns it, reporting progress while it waits."}, b.eventsWait)
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: "events://{topic}",
		Name:        "events",
		Title:       "Topic events",
		Description: "The recent external events of a topic as JSON. Subscribe to be told of each new event.",
		MimeType:    "application/json",
	}, b.readTopic)
	s.AddResourceLister(b.listTopics)
}

// MaxListedTopics bounds the topics that resources/list names as
// events://<topic> resources: the most recently updated ones (all of them
// stay readable and subscribable, and topics_list names every one).
const MaxListedTopics = 1000

// listTopics lists the known topics as concrete events://<topic>
// resources, for resources/list (which pages them).
func (b *tools) listTopics(ctx context.Context) ([]*mcp.Resource, error) {
	ts, err := b.store.Topics(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing topics: %w", err)
	}
	if len(ts) > MaxListedTopics {
		slices.SortFunc(ts, func(a, b notify.Topic) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
		ts = ts[:MaxListedTopics]
	}
	out := make([]*mcp.Resource, 0, len(ts))
	for _, t := range ts {
		if a, err := b.access(ctx, t.Name); err != nil {
			return nil, err
		} else if !a.Allowed() {
			continue
		}
		out = append(out, &mcp.Resource{
			URI:         "events://" + t.Name,
			Name:        t.Name,
			Title:       "Events of " + t.Name,
			Description: fmt.Sprintf("The recent events of topic %q as JSON (last sequence %d). Subscribe to be told of each new event.", t.Name, t.LastSeq),
			MimeType:    "application/json",
		})
	}
	return out, nil
}

type tools struct {
	store Store
	srv   *mcp.Server // for TopicAccess
	opts  Options
}

// access is what the caller of ctx may read of topic
// (mcp.Server.TopicAccess): a topic named by event types with access
// rules is readable only as far as they allow, and one the caller may not
// read at all is answered as a topic without events.
func (b *tools) access(ctx context.Context, topic string) (*mcp.TopicAccess, error) {
	a, err := b.srv.TopicAccess(ctx, topic)
	if err != nil {
		return nil, mcp.InternalError(fmt.Errorf("reading the events registry: %w", err))
	}
	return a, nil
}

// SessionInfoOutput is the result of session_info. A request of the
// 2026-07-28 era has no session: SessionID is empty, and CreatedAt and
// ExpiresAt are zero and left out of the result.
type SessionInfoOutput struct {
	SessionID       string    `json:"sessionId" jsonschema:"the Mcp-Session-Id; empty in the 2026-07-28 era, which has no sessions"`
	ProtocolVersion string    `json:"protocolVersion"`
	ClientName      string    `json:"clientName"`
	ClientVersion   string    `json:"clientVersion"`
	LogLevel        string    `json:"logLevel" jsonschema:"the level set with logging/setLevel; empty when never set (all levels are sent)"`
	Subscriptions   []string  `json:"subscriptions"`
	CreatedAt       time.Time `json:"createdAt,omitzero" jsonschema:"when the session was created; absent in the 2026-07-28 era"`
	ExpiresAt       time.Time `json:"expiresAt,omitzero" jsonschema:"when the session expires if idle; absent in the 2026-07-28 era"`
}

func (b *tools) sessionInfo(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, SessionInfoOutput, error) {
	ss := req.Session
	info := ss.ClientInfo()
	subs := ss.Subscriptions()
	if subs == nil {
		subs = []string{}
	}
	return nil, SessionInfoOutput{
		SessionID:       ss.ID(),
		ProtocolVersion: ss.ProtocolVersion(),
		ClientName:      info.Name,
		ClientVersion:   info.Version,
		LogLevel:        string(ss.LogLevel()),
		Subscriptions:   subs,
		CreatedAt:       ss.CreatedAt().UTC(),
		ExpiresAt:       ss.ExpiresAt().UTC(),
	}, nil
}

// TopicInfo describes one topic.
type TopicInfo struct {
	Name         string    `json:"name"`
	URI          string    `json:"uri" jsonschema:"read or subscribe to this resource for the topic's events"`
	LastSequence int64     `json:"lastSequence"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// TopicsListOutput is the result of topics_list.
type TopicsListOutput struct {
	Topics []TopicInfo `json:"topics"`
}

func (b *tools) topicsList(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, TopicsListOutput, error) {
	ts, err := b.store.Topics(ctx)
	if err != nil {
		return nil, TopicsListOutput{}, mcp.InternalError(fmt.Errorf("listing topics: %w", err))
	}
	out := TopicsListOutput{Topics: []TopicInfo{}}
	for _, t := range ts {
		if a, err := b.access(ctx, t.Name); err != nil {
			return nil, TopicsListOutput{}, err
		} else if !a.Allowed() {
			continue
		}
		out.Topics = append(out.Topics, TopicInfo{Name: t.Name, URI: "events://" + t.Name, LastSequence: t.LastSeq, UpdatedAt: t.UpdatedAt.UTC()})
	}
	return nil, out, nil
}

// Event is one external event as the tools return it.
type Event struct {
	Topic      string          `json:"topic"`
	Sequence   int64           `json:"sequence"`
	MessageID  string          `json:"messageId"`
	ReceivedAt time.Time       `json:"receivedAt"`
	Data       json.RawMessage `json:"data"`
}

func toEvent(e notify.TopicEvent) Event {
	return Event{Topic: e.Topic, Sequence: e.Seq, MessageID: e.MessageID, ReceivedAt: e.ReceivedAt.UTC(), Data: e.Data}
}

// EventsRecentInput are the arguments of events_recent.
type EventsRecentInput struct {
	Topic string `json:"topic" jsonschema:"the topic name"`
	Limit int    `json:"limit,omitempty" jsonschema:"how many events, 1 to 100 (default 20)"`
	After *int64 `json:"after,omitempty" jsonschema:"return events with a sequence number greater than this; omit for the most recent ones"`
}

// EventsOutput is the result of events_recent.
type EventsOutput struct {
	Topic  string  `json:"topic"`
	Events []Event `json:"events"`
	// LastSequence is the sequence of the last event returned, or the
	// given after when none: pass it as after to page on.
	LastSequence int64 `json:"lastSequence"`
}

func (b *tools) eventsRecent(ctx context.Context, req *mcp.CallToolRequest, in EventsRecentInput) (*mcp.CallToolResult, EventsOutput, error) {
	if in.Topic == "" {
		return nil, EventsOutput{}, fmt.Errorf("%w: topic is required", errBadArgs)
	}
	limit := in.Limit
	if limit == 0 {
		limit = 20
	}
	if limit < 1 || limit > 100 {
		return nil, EventsOutput{}, fmt.Errorf("%w: limit must be between 1 and 100, not %d", errBadArgs, limit)
	}
	evs, last, err := b.recent(ctx, in.Topic, limit, in.After)
	if err != nil {
		return nil, EventsOutput{}, err
	}
	out := EventsOutput{Topic: in.Topic, Events: []Event{}, LastSequence: last}
	for _, e := range evs {
		out.Events = append(out.Events, toEvent(e))
	}
	return nil, out, nil
}

// recent reads up to limit events after *after, or the last limit
// events, and returns those the caller may read and the sequence of the
// last one read (after, or 0, when none).
func (b *tools) recent(ctx context.Context, topic string, limit int, after *int64) ([]notify.TopicEvent, int64, error) {
	a, err := b.access(ctx, topic)
	if err != nil {
		return nil, 0, err
	}
	var from int64
	if after != nil {
		from = *after
	}
	if !a.Allowed() {
		return nil, from, nil // as a topic without events
	}
	if after == nil {
		last, err := b.lastSeq(ctx, topic)
		if err != nil {
			return nil, 0, err
		}
		from = max(0, last-int64(limit))
	}
	evs, err := b.store.ReadTopicEvents(ctx, topic, from, limit)
	if err != nil {
		return nil, 0, mcp.InternalError(fmt.Errorf("reading events of %q: %w", topic, err))
	}
	last := from
	if len(evs) > 0 {
		last = evs[len(evs)-1].Seq
	}
	return slices.DeleteFunc(evs, func(e notify.TopicEvent) bool { return !a.Admits(e.Data) }), last, nil
}

func (b *tools) lastSeq(ctx context.Context, topic string) (int64, error) {
	ts, err := b.store.Topics(ctx)
	if err != nil {
		return 0, mcp.InternalError(fmt.Errorf("listing topics: %w", err))
	}
	for _, t := range ts {
		if t.Name == topic {
			return t.LastSeq, nil
		}
	}
	return 0, nil
}

// EventsWaitInput are the arguments of events_wait.
type EventsWaitInput struct {
	Topic          string  `json:"topic" jsonschema:"the topic name"`
	After          *int64  `json:"after,omitempty" jsonschema:"wait for an event with a sequence number greater than this; omit to wait for the next new event"`
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty" jsonschema:"how long to wait, in seconds (default 30, at most the server's limit)"`
}

// EventsWaitOutput is the result of events_wait.
type EventsWaitOutput struct {
	Topic    string `json:"topic"`
	Event    *Event `json:"event,omitempty" jsonschema:"the event; absent when the wait timed out"`
	TimedOut bool   `json:"timedOut"`
	// WaitedSeconds is how long the tool waited.
	WaitedSeconds float64 `json:"waitedSeconds"`
}

func (b *tools) eventsWait(ctx context.Context, req *mcp.CallToolRequest, in EventsWaitInput) (*mcp.CallToolResult, EventsWaitOutput, error) {
	if in.Topic == "" {
		return nil, EventsWaitOutput{}, fmt.Errorf("%w: topic is required", errBadArgs)
	}
	timeout := 30 * time.Second
	if in.TimeoutSeconds < 0 {
		return nil, EventsWaitOutput{}, fmt.Errorf("%w: timeoutSeconds must not be negative", errBadArgs)
	}
	if in.TimeoutSeconds > b.opts.MaxWait.Seconds() {
		// Compared as seconds: a huge value would overflow a Duration.
		return nil, EventsWaitOutput{}, fmt.Errorf("%w: timeoutSeconds must be at most %v", errBadArgs, b.opts.MaxWait.Seconds())
	}
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds * float64(time.Second))
	}
	if timeout > b.opts.MaxWait {
		return nil, EventsWaitOutput{}, fmt.Errorf("%w: timeoutSeconds must be at most %v", errBadArgs, b.opts.MaxWait.Seconds())
	}
	a, err := b.access(ctx, in.Topic)
	if err != nil {
		return nil, EventsWaitOutput{}, err
	}
	var after int64
	if in.After != nil {
		after = *in.After
	} else if a.Allowed() { // else as a topic without events: from 0
		if after, err = b.lastSeq(ctx, in.Topic); err != nil {
			return nil, EventsWaitOutput{}, err
		}
	}
	start := time.Now()
	reported := -1 // whole seconds of waiting last reported as progress
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(b.opts.PollInterval)
	defer t.Stop()
	for {
		var evs []notify.TopicEvent
		if a.Allowed() {
			evs, err = b.store.ReadTopicEvents(ctx, in.Topic, after, waitBatch)
			if err != nil && ctx.Err() == nil {
				return nil, EventsWaitOutput{}, mcp.InternalError(fmt.Errorf("reading events of %q: %w", in.Topic, err))
			}
		}
		for _, e := range evs {
			if a.Admits(e.Data) {
				ev := toEvent(e)
				return nil, EventsWaitOutput{Topic: in.Topic, Event: &ev, WaitedSeconds: time.Since(start).Seconds()}, nil
			}
			after = e.Seq // one the caller may not read: skipped
		}
		if waited := time.Since(start); int(waited.Seconds()) > reported {
			reported = int(waited.Seconds())
			req.Session.NotifyProgress(ctx, waited.Seconds(), timeout.Seconds(), fmt.Sprintf("waiting for an event on %s after #%d", in.Topic, after))
		}
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return nil, EventsWaitOutput{Topic: in.Topic, TimedOut: true, WaitedSeconds: time.Since(start).Seconds()}, nil
			}
			return nil, EventsWaitOutput{}, ctx.Err()
		case <-t.C:
		}
	}
}

// waitBatch bounds the events one look of events_wait reads (those the
// caller may not read are skipped).
const waitBatch = 25

func (b *tools) readTopic(ctx context.Context, req *mcp.ServerRequest[*mcp.ReadResourceParams]) (*mcp.ReadResourceResult, error) {
	vars := mcp.TemplateVars("events://{topic}", req.Params.URI)
	topic := vars["topic"]
	if topic == "" {
		return nil, mcp.ResourceNotFound(req.Params.URI)
	}
	evs, _, err := b.recent(ctx, topic, 20, nil)
	if err != nil {
		return nil, err
	}
	out := EventsOutput{Topic: topic, Events: []Event{}}
	for _, e := range evs {
		out.Events = append(out.Events, toEvent(e))
		out.LastSequence = e.Seq
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MimeType: "application/json", Text: string(data)}}}, nil
}

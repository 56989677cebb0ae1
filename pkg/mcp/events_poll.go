package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/eventcursor"
)

// events/poll: stateless on the server. A poll names the event type, its
// arguments and a cursor (events_cursor.go); the server reads the type's
// topic log after the cursor's position and answers the events whose
// data match the arguments, with the cursor to poll from next. Any
// process answers any poll.

// Bounds of events/poll.
const (
	// DefaultPollEvents is the maxEvents of a poll that names none;
	// MaxPollEvents the most one poll returns (a larger maxEvents is
	// taken as this).
	DefaultPollEvents = 50
	MaxPollEvents     = 100
	// MaxEventArgumentsBytes bounds the arguments of a subscription.
	MaxEventArgumentsBytes = 16 << 10
	// maxPollBytes bounds the data of the events one poll returns (at
	// least one event is returned, up to notify.MaxItemBytes).
	maxPollBytes = 1 << 20
	// maxPollScan bounds the events one poll reads from the topic's log
	// (those the arguments do not match included); hasMore says there
	// are more.
	maxPollScan = 1000
	// pollBatch bounds the events of one read of the log.
	pollBatch = 25
	// activePollInterval is the nextPollMs after a poll that returned
	// events.
	activePollInterval = time.Second
)

// PollEventsParams are the params of events/poll. A nil Cursor starts
// from now.
type PollEventsParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Cursor    *string         `json:"cursor"`
	MaxAgeMs  *int64          `json:"maxAgeMs,omitempty"`
	MaxEvents *int            `json:"maxEvents,omitempty"`
	Meta      Meta            `json:"_meta,omitempty"`
}

// EventOccurrence is one event as a client receives it. EventID is the
// same however the event is delivered: derived from the event type and
// the SNS MessageId of the event (see EventID). Cursor is set by push and
// webhook deliveries only (a poll's cursor is the result's).
type EventOccurrence struct {
	EventID   string          `json:"eventId"`
	Name      string          `json:"name"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
	Cursor    *string         `json:"cursor,omitempty"`
	Meta      Meta            `json:"_meta,omitempty"`
}

// PollEventsResult is the result of events/poll.
type PollEventsResult struct {
	ResultType string             `json:"resultType,omitempty"`
	Events     []*EventOccurrence `json:"events"`
	Cursor     *string            `json:"cursor"`
	Truncated  bool               `json:"truncated"`
	HasMore    bool               `json:"hasMore"`
	NextPollMs int64              `json:"nextPollMs"`
}

// metaMessageID is the _meta member of an EventOccurrence that holds the
// event's SNS MessageId.
const metaMessageID = "mcpush/messageId"

// EventID returns the eventId of the event with SNS MessageId messageID
// as an event of type name: "evt_" and 22 base64url characters of a
// SHA-256 of both. Every delivery of the event as that type carries it;
// the same event seen as two types (two types of one topic) has two, so
// that a receiver deduplicating on eventId (or webhook-id) never drops
// one type's event as the other's duplicate.
func EventID(name, messageID string) string { return eventcursor.EventID(name, messageID) }

// eventsError is an error of the extension with its data: code is its
// SEP-3415 code (CodeNotFound ...), answered in the server's dialect
// (ServerOptions.EventsErrors).
func (s *Server) eventsError(code int, msg string, data any) *Error {
	e := &Error{Code: s.opts.EventsErrors.Code(code), Message: msg}
	e.Data, _ = json.Marshal(data)
	return e
}

// eventType returns the event type name offering delivery mode mode:
// NotFound if there is none, Unsupported if it does not offer mode.
func (s *Server) eventType(ctx context.Context, name, mode string) (*notify.EventItem, error) {
	if name == "" {
		return nil, Errorf(CodeInvalidParams, "invalid params: name is required")
	}
	if len(name) > notify.MaxEventNameLen {
		return nil, Errorf(CodeInvalidParams, "invalid params: name is %d bytes, more than %d", len(name), notify.MaxEventNameLen)
	}
	types, err := s.eventTypes(ctx)
	if err != nil {
		return nil, err
	}
	e := types[name]
	if err := s.checkEventAccess(ctx, types, e, name, mode); err != nil {
		return nil, err
	}
	if e == nil {
		return nil, s.eventsError(CodeNotFound, "NotFound: no event type "+clipText(name, 64), map[string]string{"kind": "event"})
	}
	if !e.Supports(mode) || !s.serves(mode) {
		return nil, s.eventsError(CodeUnsupported, "Unsupported: event type "+name+" does not offer "+mode+" delivery", map[string]string{"feature": "deliveryMode", "value": mode})
	}
	return e, nil
}

// eventFilter checks a subscription's arguments against e's inputSchema
// and returns them as filters: member F with value V admits the events
// whose data is an object with a member F equal to V (JSON equality).
// Defaults of the schema are not applied (they would become filters).
func eventFilter(e *notify.EventItem, raw json.RawMessage) (map[string]json.RawMessage, error) {
	if len(raw) > MaxEventArgumentsBytes {
		return nil, Errorf(CodeInvalidParams, "invalid params: arguments are %d bytes, more than %d", len(raw), MaxEventArgumentsBytes)
	}
	var args map[string]json.RawMessage
	if len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(raw, &args) != nil {
			return nil, Errorf(CodeInvalidParams, "invalid params: arguments must be a JSON object")
		}
	}
	var sc jsonschema.Schema
	if err := json.Unmarshal(e.InputSchema, &sc); err != nil {
		return nil, fmt.Errorf("event type %s: inputSchema: %w", e.Name, err)
	}
	resolved, err := sc.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("event type %s: inputSchema: %w", e.Name, err)
	}
	var v any // numbers as float64: what the validator knows
	if err := json.Unmarshal(orEmpty(raw), &v); err != nil {
		return nil, Errorf(CodeInvalidParams, "invalid params: arguments: %v", err)
	}
	if v == nil {
		v = map[string]any{}
	}
	if err := resolved.Validate(v); err != nil {
		return nil, Errorf(CodeInvalidParams, "invalid params: arguments do not match the inputSchema of %s: %s", e.Name, clipText(err.Error(), 300))
	}
	return args, nil
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}

// matches reports whether data (a topic event's) passes the filters
// (eventcursor.Matches).
func matches(filters map[string]json.RawMessage, data json.RawMessage) bool {
	return eventcursor.Matches(filters, data)
}

func decodeNumbers(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// occurrence returns ev as an event of type name. Data that is not a
// JSON object (a plain-text SNS message, an array) is delivered as
// {"value": data}: SEP-3415 requires an object.
func occurrence(name string, ev *notify.TopicEvent) *EventOccurrence {
	data := eventcursor.ObjectData(ev.Data)
	return &EventOccurrence{
		EventID:   EventID(name, ev.MessageID),
		Name:      name,
		Timestamp: ev.ReceivedAt.UTC().Format("2006-01-02T15:04:05.000Z"),
		Data:      data,
		Meta:      Meta{metaMessageID: ev.MessageID},
	}
}

// pollEvents answers events/poll.
func (s *Server) pollEvents(ctx context.Context, _ *ServerSession, raw json.RawMessage) (*PollEventsResult, error) {
	p, err := decodeParams[PollEventsParams](raw)
	if err != nil {
		return nil, err
	}
	e, err := s.eventType(ctx, p.Name, notify.DeliveryPoll)
	if err != nil {
		return nil, err
	}
	filters, err := s.boundFilter(ctx, e, p.Arguments)
	if err != nil {
		return nil, err
	}
	limit := DefaultPollEvents
	if p.MaxEvents != nil {
		if *p.MaxEvents < 1 {
			return nil, Errorf(CodeInvalidParams, "invalid params: maxEvents must be at least 1")
		}
		limit = min(*p.MaxEvents, MaxPollEvents)
	}
	var floor time.Time
	if p.MaxAgeMs != nil {
		if *p.MaxAgeMs < 0 {
			return nil, Errorf(CodeInvalidParams, "invalid params: maxAgeMs must not be negative")
		}
		floor = s.opts.Now().Add(-time.Duration(min(*p.MaxAgeMs, int64(1<<62)/int64(time.Millisecond))) * time.Millisecond)
	}
	res := &PollEventsResult{ResultType: resultComplete, Events: []*EventOccurrence{}, NextPollMs: s.opts.EventsPollInterval.Milliseconds()}
	cursor := func(seq int64) *string {
		c := s.states.signCursor(eventCursor{Name: e.Name, Topic: e.Topic, Seq: seq})
		return &c
	}
	var pos int64
	if p.Cursor == nil {
		// Start from now: no events, the head as the cursor (maxAgeMs is
		// ignored, as SEP-3415 says).
		head, err := s.store.TopicHead(ctx, e.Topic)
		if err != nil {
			return nil, err
		}
		res.Cursor = cursor(head)
		return res, nil
	}
	c, err := s.states.verifyCursor(*p.Cursor, e.Name)
	if err != nil {
		return nil, Errorf(CodeInvalidParams, "invalid params: cursor: %v", err)
	}
	pos = c.Seq
	if c.Topic != e.Topic {
		// The event type moved to another topic: its position means
		// nothing there. Start from now, and say events may be lost.
		head, err := s.store.TopicHead(ctx, e.Topic)
		if err != nil {
			return nil, err
		}
		res.Cursor, res.Truncated = cursor(head), true
		return res, nil
	}

	r, err := s.readEventsAfter(ctx, e, filters, pos, floor, limit)
	if err != nil {
		return nil, err
	}
	res.Events, res.Truncated, res.HasMore, pos = r.events, r.truncated, r.hasMore, r.pos
	res.Cursor = cursor(pos)
	if len(res.Events) > 0 {
		res.NextPollMs = activePollInterval.Milliseconds()
	}
	return res, nil
}

// eventsRead is what one readEventsAfter read.
type eventsRead struct {
	events []*EventOccurrence
	seqs   []int64 // the position of each of events in the topic's log
	// pos is the position up to which the log was read: after the last
	// event scanned, matched or not.
	pos int64
	// truncated: the log no longer keeps what came after the position
	// read from, or maxAgeMs skipped events.
	truncated bool
	// hasMore: the read stopped at limit, maxPollBytes or maxPollScan.
	hasMore bool
}

// readEventsAfter reads the events of e's topic after position pos that
// pass filters, at most limit (and maxPollBytes of data, at least one
// event), skipping those received before floor (if not zero): at most
// maxPollScan events scanned, in reads of pollBatch. events/poll and
// events/stream read the same way, so that the same position yields the
// same events either way.
func (s *Server) readEventsAfter(ctx context.Context, e *notify.EventItem, filters map[string]json.RawMessage, pos int64, floor time.Time, limit int) (*eventsRead, error) {
	res := &eventsRead{events: []*EventOccurrence{}} // never null: an idle poll's "events" is []
	size, scanned := 0, 0
	for first := true; ; first = false {
		evs, err := s.store.ReadTopicEvents(ctx, e.Topic, pos, pollBatch)
		if err != nil {
			return nil, err
		}
		if first {
			if len(evs) == 0 {
				// Nothing after the cursor: either nothing new, or what
				// came after it has left the log. The head tells (read
				// before the log again, so that an event appended
				// meanwhile is never skipped).
				head, err := s.store.TopicHead(ctx, e.Topic)
				if err != nil {
					return nil, err
				}
				if head != pos {
					if head > pos {
						if evs, err = s.store.ReadTopicEvents(ctx, e.Topic, pos, pollBatch); err != nil {
							return nil, err
						}
					}
					if len(evs) == 0 {
						pos, res.truncated = head, true
					}
				}
			}
			if len(evs) > 0 && evs[0].Seq > pos+1 {
				res.truncated = true // the log no longer keeps what the cursor is after
			}
		}
		full := false
		for i := range evs {
			ev := &evs[i]
			if len(res.events) == limit || (len(res.events) > 0 && size+len(ev.Data) > maxPollBytes) {
				full = true
				break
			}
			pos = ev.Seq
			scanned++
			if !floor.IsZero() && ev.ReceivedAt.Before(floor) {
				res.truncated = true // older than maxAgeMs: skipped
				continue
			}
			if !matches(filters, ev.Data) {
				continue
			}
			res.events = append(res.events, occurrence(e.Name, ev))
			res.seqs = append(res.seqs, ev.Seq)
			size += len(ev.Data)
		}
		if full || (len(evs) == pollBatch && scanned >= maxPollScan) {
			res.hasMore = true
			break
		}
		if len(evs) < pollBatch {
			break // the end of the log
		}
	}
	res.pos = pos
	return res, nil
}

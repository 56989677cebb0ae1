package webhook

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Control envelope types (the body's "type").
const (
	ControlGap          = "gap"
	ControlTerminated   = "terminated"
	ControlVerification = "verification"
)

// TimestampLayout formats an event's timestamp: UTC with milliseconds, as
// events/poll writes it, so an event reads the same however it is
// delivered.
const TimestampLayout = "2006-01-02T15:04:05.000Z"

// EventOccurrence is the body of an event delivery (SEP-3415's
// EventOccurrence): a JSON object without a "type" member.
type EventOccurrence struct {
	EventID   string          `json:"eventId"`
	Name      string          `json:"name"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
	// Cursor is the safe-to-persist watermark; nil (absent or null) for
	// event types without replay.
	Cursor *string `json:"cursor,omitempty"`
}

// Control is the body of a control envelope, told apart from an event by
// its top-level "type".
type Control struct {
	Type      string        `json:"type"`
	Cursor    *string       `json:"cursor,omitempty"`    // gap
	Error     *ControlError `json:"error,omitempty"`     // terminated
	Challenge string        `json:"challenge,omitempty"` // verification
}

// ControlError is a terminated envelope's error: a JSON-RPC error object.
type ControlError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// EventBody returns the body of an event delivery: {"eventId", "name",
// "timestamp" (UTC, milliseconds), "data", "cursor"}; cursor "" is
// written as null (a type without replay), and empty data is null. data
// must be valid JSON.
func EventBody(eventID, name string, ts time.Time, data json.RawMessage, cursor string) ([]byte, error) {
	if eventID == "" || name == "" {
		return nil, errors.New("webhook: an event body needs an eventId and a name")
	}
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	var e struct {
		EventOccurrence
		Cursor *string `json:"cursor"` // written as null, as ChatGPT's guide shows it
	}
	e.EventOccurrence = EventOccurrence{EventID: eventID, Name: name, Timestamp: ts.UTC().Format(TimestampLayout), Data: data}
	if cursor != "" {
		e.Cursor = &cursor
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("webhook: event body: %w", err)
	}
	return b, nil
}

// NotFoundCode returns the code of the Events extension's NotFound error
// in dialect, the value of MCPUSH_EVENTS_ERRORS: -32011 for "chatgpt",
// else (SEP-3415's numbering, the default) -32023. It is the code of a
// terminated envelope whose event type is gone (TerminatedBody). This
// package links nothing of mcpush, so it keeps a copy of what
// mcp.EventsErrors.Code says, and pkg/mcp's TestWebhookNotFoundCode
// holds the two equal.
func NotFoundCode(dialect string) int {
	if dialect == "chatgpt" {
		return -32011
	}
	return -32023
}

// ForbiddenCode is NotFoundCode's sibling for Forbidden: -32012 for
// "chatgpt", else -32024. It is the code of a terminated envelope whose
// subscriber no longer qualifies for the event type's access rule.
func ForbiddenCode(dialect string) int {
	if dialect == "chatgpt" {
		return -32012
	}
	return -32024
}

// TerminatedBody returns {"type":"terminated","error":{"code","message",
// "data"}}, sent when a subscription ends; data nil is omitted.
func TerminatedBody(code int, message string, data any) ([]byte, error) {
	ce := &ControlError{Code: code, Message: message}
	if data != nil {
		d, err := json.Marshal(data)
		if err != nil {
			return nil, fmt.Errorf("webhook: terminated body: %w", err)
		}
		ce.Data = d
	}
	return json.Marshal(Control{Type: ControlTerminated, Error: ce})
}

// GapBody returns {"type":"gap","cursor":"<cursor>"}; cursor "" is
// written as null (an event type without replay).
func GapBody(cursor string) ([]byte, error) {
	var c struct {
		Type   string  `json:"type"`
		Cursor *string `json:"cursor"`
	}
	c.Type = ControlGap
	if cursor != "" {
		c.Cursor = &cursor
	}
	return json.Marshal(c)
}

// ControlID returns a fresh webhook-id for a control envelope of type kind:
// msg_<kind>_<random> (22 characters of base64url, 128 bits).
func ControlID(kind string) string {
	return "msg_" + kind + "_" + randomToken(16)
}

// randomToken returns n random bytes in unpadded base64url.
func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

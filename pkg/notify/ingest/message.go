// Package ingest turns SNS messages into mcpush state: external events
// appended to topic logs and fanned out to the sessions subscribed to
// them, and changes to the dynamic registries of tools, resources,
// prompts and event types (the Events extension).
//
// Parse classifies and validates one message body; an Ingester applies a
// whole events.SNSEvent to a notify.Store. Both are strict: a message is
// either applied whole or refused with an error that names the offending
// field, so that a producer's mistake ends in the dead-letter queue
// instead of in what clients see.
//
// An event reaches each subscribed session once and in topic order: the
// fan-out appends to the subscribers in batches (notify.Store.AppendEach),
// each subscription keeps the topic sequence number it has reached, and a
// subscription found behind is caught up from the topic's log (CatchUp).
package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Message types: the value of a message's "type" member.
const (
	TypeEvent    = "event"
	TypeRegistry = "registry"
)

// MaxTopicLen is the longest topic name: that of an event type name
// (notify.MaxEventNameLen), whose rules a topic name shares.
const MaxTopicLen = notify.MaxEventNameLen

// ValidTopic reports whether name is a valid topic name: 1 to MaxTopicLen
// characters from A-Z, a-z, 0-9, '_', '.' and '-', but not "." or ".."
// (dot segments, which URI resolution removes). Such a name needs no
// escaping in the resource URI events://<name>. It is
// notify.ValidEventName: one rule for both.
func ValidTopic(name string) bool { return notify.ValidEventName(name) }

// Message is one parsed SNS message: an external event or a registry
// change.
type Message struct {
	Type string // TypeEvent or TypeRegistry

	// An event (Type == TypeEvent).
	Topic string
	Data  json.RawMessage // compact JSON, at most notify.MaxItemBytes; never nil (null is "null")
	// FromTopicARN reports a message without an envelope: Topic is the
	// last segment of the TopicArn and Data the message itself.
	FromTopicARN bool

	// A registry change (Type == TypeRegistry).
	Registry string                     // notify.RegistryTools, RegistryResources, RegistryPrompts or RegistryEvents
	Op       string                     // notify.OpPut, OpDelete or OpReplace
	Items    map[string]json.RawMessage // key (name or URI) -> canonical item JSON; empty only for replace
}

// Parse classifies and validates message, the body of one SNS message
// published to the topic topicARN.
//
// A JSON object whose "type" member is a string is an envelope, and must
// be one of
//
//	{"type":"event","topic":"orders","data":<any JSON>}
//	{"type":"registry","registry":"tools|resources|prompts|events","op":"put|delete|replace","items":[...]}
//
// Envelopes are strict: every member is required (data may be null, items
// may be empty only for replace), unknown members and members named twice
// are errors, and so is an unknown "type" (a producer whose own JSON has
// a "type" member wraps it in an event envelope). Registry items are
// validated by kind (see Prompt, Resource, Tool and Event) and re-encoded in
// canonical form, so that equal content hashes equally however it was
// written.
//
// Anything else is an event on the topic named by the last segment of
// topicARN (after the last ':'): valid JSON (an array, a number, an object
// without a string "type") is the event's data as is, compacted; any other
// text is the data as a JSON string. Text whose first non-blank character
// is '{' must be valid JSON: it is taken for a truncated or mangled
// envelope and refused rather than stored as text.
//
// Errors are *ParseError values wrapping ErrInvalidMessage or, for data
// or items larger than notify.MaxItemBytes, notify.ErrTooLarge. The
// message must be valid UTF-8, as SNS requires.
//
// A tools registry item may name only the BuiltinTools; an Ingester with
// Options.Tools accepts the tools listed there instead.
func Parse(topicARN, message string) (*Message, error) {
	return parse(topicARN, message, BuiltinTools)
}

// parse is Parse with the tools a tools registry item may name.
func parse(topicARN, message string, tools []string) (*Message, error) {
	if !utf8.ValidString(message) {
		return nil, invalidf("", "not valid UTF-8")
	}
	raw := json.RawMessage(message)
	valid := json.Valid(raw)
	if d := notify.JSONDepth(raw); valid && d > notify.MaxStoredJSONDepth {
		// The readers (the server's messages, the client) would refuse
		// every message that carries it: a poison event.
		return nil, invalidf("", "JSON nested %d levels deep, more than %d", d, notify.MaxStoredJSONDepth)
	}
	if !valid {
		if strings.HasPrefix(strings.TrimLeft(message, " \t\r\n"), "{") {
			return nil, syntaxError(raw)
		}
		data, err := marshal(message)
		if err != nil {
			return nil, invalidf("", "%v", err)
		}
		return arnEvent(topicARN, data)
	}
	if kindOf(raw) == "object" {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(raw, &top); err != nil {
			return nil, invalidf("", "%v", err)
		}
		if t, ok := top["type"]; ok && kindOf(t) == "a string" {
			return parseEnvelope(raw, tools)
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, invalidf("", "%v", err)
	}
	return arnEvent(topicARN, buf.Bytes())
}

// syntaxError describes why raw is not valid JSON.
func syntaxError(raw json.RawMessage) error {
	var v any
	err := json.Unmarshal(raw, &v)
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return invalidf("", "invalid JSON at byte %d of %d: %v", se.Offset, len(raw), se)
	}
	return invalidf("", "invalid JSON: %v", err)
}

// arnEvent returns the event of a message without an envelope.
func arnEvent(topicARN string, data json.RawMessage) (*Message, error) {
	i := strings.LastIndexByte(topicARN, ':')
	topic := topicARN[i+1:]
	if !ValidTopic(topic) {
		return nil, invalidf("TopicArn", "%s does not end in a valid topic name (1 to %d of A-Z a-z 0-9 _ . -, not . or ..); "+
			`publish {"type":"event","topic":...,"data":...} to name the topic`, quote(topicARN), MaxTopicLen)
	}
	if len(data) > notify.MaxItemBytes {
		return nil, tooLarge("", "message", len(data))
	}
	return &Message{Type: TypeEvent, Topic: topic, Data: data, FromTopicARN: true}, nil
}

// tooLarge returns a *ParseError wrapping notify.ErrTooLarge.
func tooLarge(path, what string, n int) error {
	return &ParseError{Path: path, Msg: fmt.Sprintf("%s is %d bytes, more than the %d bytes of one stored item", what, n, notify.MaxItemBytes), Err: notify.ErrTooLarge}
}

// parseEnvelope parses a message whose "type" member is a string.
func parseEnvelope(raw json.RawMessage, tools []string) (*Message, error) {
	members, err := decodeObject(raw, "")
	if err != nil {
		return nil, err
	}
	var typ string
	for _, m := range members {
		if m.name == "type" {
			if typ, err = stringValue(m.value, "type"); err != nil {
				return nil, err
			}
		}
	}
	switch typ {
	case TypeEvent:
		return parseEvent(members)
	case TypeRegistry:
		return parseRegistry(members, tools)
	}
	return nil, invalidf("type", `unknown message type %s (want "event" or "registry"; `+
		`a message without "type" is an event on the topic of its TopicArn)`, quote(typ))
}

var eventFields = []string{"type", "topic", "data"}

// parseEvent parses {"type":"event","topic":...,"data":...}.
func parseEvent(members []member) (*Message, error) {
	var (
		topic     *string
		data      json.RawMessage
		haveTopic bool
		err       error
	)
	for _, m := range members {
		switch m.name {
		case "type":
		case "topic":
			haveTopic = true
			if topic, err = optString(m.value, "topic"); err != nil {
				return nil, err
			}
		case "data":
			data = m.value
		default:
			return nil, unknownField("", m.name, eventFields)
		}
	}
	switch {
	case !haveTopic || topic == nil:
		return nil, invalidf("topic", "required")
	case !ValidTopic(*topic):
		return nil, invalidf("topic", "%s is not a valid topic name (1 to %d of A-Z a-z 0-9 _ . -, not . or ..)", quote(*topic), MaxTopicLen)
	case data == nil:
		return nil, invalidf("data", "required (null for an event without a payload)")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, invalidf("data", "%v", err)
	}
	if buf.Len() > notify.MaxItemBytes {
		return nil, tooLarge("data", "data", buf.Len())
	}
	return &Message{Type: TypeEvent, Topic: *topic, Data: buf.Bytes()}, nil
}

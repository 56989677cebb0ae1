package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"
)

// DecodePromptItem decodes and checks a stored prompts item.
func DecodePromptItem(raw json.RawMessage) (*PromptItem, error) {
	var p PromptItem
	if err := decodeItem(raw, &p); err != nil {
		return nil, err
	}
	if p.Name == "" {
		return nil, fmt.Errorf("%w: prompt without a name", ErrBadItem)
	}
	seen := make(map[string]bool, len(p.Arguments))
	for i, a := range p.Arguments {
		if a.Name == "" || seen[a.Name] {
			return nil, fmt.Errorf("%w: prompt argument %d: empty or duplicate name", ErrBadItem, i)
		}
		seen[a.Name] = true
	}
	for i, m := range p.Messages {
		if m.Role != "" && m.Role != "user" && m.Role != "assistant" {
			return nil, fmt.Errorf("%w: prompt message %d: role must be user or assistant", ErrBadItem, i)
		}
	}
	return &p, nil
}

// DecodeResourceItem decodes and checks a stored resources item.
func DecodeResourceItem(raw json.RawMessage) (*ResourceItem, error) {
	var r ResourceItem
	if err := decodeItem(raw, &r); err != nil {
		return nil, err
	}
	switch {
	case r.URI == "":
		return nil, fmt.Errorf("%w: resource without a uri", ErrBadItem)
	case r.Text != nil && r.Blob != nil:
		return nil, fmt.Errorf("%w: resource with both text and blob", ErrBadItem)
	}
	return &r, nil
}

// DecodeToolItem decodes and checks a stored tools item.
func DecodeToolItem(raw json.RawMessage) (*ToolItem, error) {
	var t ToolItem
	if err := decodeItem(raw, &t); err != nil {
		return nil, err
	}
	if t.Name == "" {
		return nil, fmt.Errorf("%w: tool without a name", ErrBadItem)
	}
	if err := t.Access.Check(); err != nil {
		return nil, fmt.Errorf("tool %s: %w", t.Name, err)
	}
	return &t, nil
}

// decodeItem decodes one JSON object of valid UTF-8 into v, refusing
// anything else (an array, null, trailing data, an item over
// MaxItemBytes).
func decodeItem(raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) > MaxItemBytes:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrBadItem, len(raw), MaxItemBytes)
	case len(raw) == 0 || raw[0] != '{':
		return fmt.Errorf("%w: not a JSON object", ErrBadItem)
	case !utf8.Valid(raw):
		return fmt.Errorf("%w: invalid UTF-8", ErrBadItem)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadItem, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: data after the object", ErrBadItem)
	}
	return nil
}

// MaxEventNameLen is the longest event type name (and topic name).
const MaxEventNameLen = 128

// ValidEventName reports whether name is a valid event type name: 1 to
// MaxEventNameLen characters from A-Z, a-z, 0-9, '_', '.' and '-' (the
// characters of a topic name; "order.created" is one), but not "." or
// "..".
func ValidEventName(name string) bool {
	if name == "" || len(name) > MaxEventNameLen || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

// DecodeEventItem decodes and checks a stored events item and returns it
// with its defaults filled in (EventItem.WithDefaults): a valid name and
// topic, delivery modes that are known and distinct, schemas that are
// JSON objects of type "object".
func DecodeEventItem(raw json.RawMessage) (*EventItem, error) {
	var e EventItem
	if err := decodeItem(raw, &e); err != nil {
		return nil, err
	}
	if !ValidEventName(e.Name) {
		return nil, fmt.Errorf("%w: event type name %q is not 1 to %d of A-Z a-z 0-9 _ . -", ErrBadItem, e.Name, MaxEventNameLen)
	}
	e = e.WithDefaults()
	if !ValidEventName(e.Topic) {
		return nil, fmt.Errorf("%w: event type %s: topic %q is not 1 to %d of A-Z a-z 0-9 _ . -", ErrBadItem, e.Name, e.Topic, MaxEventNameLen)
	}
	seen := map[string]bool{}
	for _, m := range e.Delivery {
		if seen[m] || !slices.Contains(DeliveryModes, m) {
			return nil, fmt.Errorf("%w: event type %s: delivery %q unknown or repeated", ErrBadItem, e.Name, m)
		}
		seen[m] = true
	}
	for _, sc := range []json.RawMessage{e.InputSchema, e.PayloadSchema} {
		var top struct {
			Type any `json:"type"`
		}
		if err := json.Unmarshal(sc, &top); err != nil || top.Type != "object" {
			return nil, fmt.Errorf("%w: event type %s: a schema is not a JSON object schema of type \"object\"", ErrBadItem, e.Name)
		}
	}
	if err := e.Access.Check(); err != nil {
		return nil, fmt.Errorf("event type %s: %w", e.Name, err)
	}
	return &e, nil
}

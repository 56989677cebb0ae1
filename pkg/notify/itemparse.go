package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrBadItem reports a stored registry item the server cannot serve: not
// a JSON object of its kind, a missing key, a duplicate argument name, an
// unknown role, invalid UTF-8. The server skips such an item (and logs
// it) rather than serving something half-read.
var ErrBadItem = errors.New("notify: bad registry item")

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

package ingest

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcpush/mcpush/pkg/notify"
)

// Event is an events registry item: an event type of the Events
// extension (SEP-3415).
type Event = notify.EventItem

var eventItemFields = []string{"name", "topic", "description", "delivery", "inputSchema", "payloadSchema", "access"}

// maxSchemaDepth bounds how deeply the objects and arrays of an event
// type's schema nest.
const maxSchemaDepth = 32

// parseEventItem validates an events item and returns its name and
// canonical form, with the defaults filled in (notify.EventItem
// .WithDefaults): the name and the topic are valid topic names
// (ValidTopic), delivery is a non-empty list of distinct modes (stored in
// the order of notify.DeliveryModes), each schema is a JSON Schema whose
// top-level type is "object", that resolves without loading anything,
// nests at most maxSchemaDepth deep and is stored with its members
// sorted. On delete only the name is required.
func parseEventItem(members []member, path, _ string) (string, any, error) {
	var (
		e    Event
		name *string
		s    *string
		err  error
	)
	for _, m := range members {
		mp := join(path, m.name)
		switch m.name {
		case "name":
			name, err = optString(m.value, mp)
		case "topic":
			if s, err = optString(m.value, mp); err == nil && s != nil {
				e.Topic = *s
				if !ValidTopic(e.Topic) {
					err = invalidf(mp, "%s is not a valid topic name (1 to %d of A-Z a-z 0-9 _ . -, not . or ..)", quote(e.Topic), MaxTopicLen)
				}
			}
		case "description":
			s, err = optString(m.value, mp)
			e.Description = deref(s)
		case "delivery":
			e.Delivery, err = parseDelivery(m.value, mp)
		case "inputSchema":
			e.InputSchema, err = parseObjectSchema(m.value, mp)
		case "payloadSchema":
			e.PayloadSchema, err = parseObjectSchema(m.value, mp)
		case "access":
			e.Access, err = parseAccess(m.value, mp)
		default:
			err = unknownField(path, m.name, eventItemFields)
		}
		if err != nil {
			return "", nil, err
		}
	}
	if e.Name, err = requireName(name, join(path, "name")); err != nil {
		return "", nil, err
	}
	if !notify.ValidEventName(e.Name) {
		return "", nil, invalidf(join(path, "name"), "%s is not a valid event type name (1 to %d of A-Z a-z 0-9 _ . -)", quote(e.Name), notify.MaxEventNameLen)
	}
	e = e.WithDefaults()
	return e.Name, &e, nil
}

// parseDelivery validates an event type's delivery modes: null (every
// mode) or a non-empty array of distinct modes, returned in canonical
// order.
func parseDelivery(raw json.RawMessage, path string) ([]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	elems, err := decodeArray(raw, path)
	if err != nil {
		return nil, err
	}
	if len(elems) == 0 {
		return nil, invalidf(path, `empty: name at least one of "poll", "push", "webhook" (or leave delivery out for all three)`)
	}
	seen := map[string]bool{}
	for i, e := range elems {
		m, err := stringValue(e, index(path, i))
		if err != nil {
			return nil, err
		}
		if !slices.Contains(notify.DeliveryModes, m) {
			return nil, invalidf(index(path, i), `unknown delivery mode %s (want "poll", "push" or "webhook")`, quote(m))
		}
		if seen[m] {
			return nil, invalidf(index(path, i), "delivery mode %s named twice", quote(m))
		}
		seen[m] = true
	}
	var out []string
	for _, m := range notify.DeliveryModes {
		if seen[m] {
			out = append(out, m)
		}
	}
	return out, nil
}

// parseObjectSchema validates an event type's schema (null: the default)
// and returns its canonical form: members sorted, numbers as written.
func parseObjectSchema(raw json.RawMessage, path string) (json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	if k := kindOf(raw); k != "object" {
		return nil, invalidf(path, "want a JSON Schema object, got %s", k)
	}
	if d := notify.JSONDepth(raw); d > maxSchemaDepth {
		return nil, invalidf(path, "nests %d deep, more than %d", d, maxSchemaDepth)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, invalidf(path, "%v", err)
	}
	canon, err := marshal(v)
	if err != nil {
		return nil, invalidf(path, "%v", err)
	}
	var sc jsonschema.Schema
	if err := json.Unmarshal(canon, &sc); err != nil {
		return nil, invalidf(path, "not a JSON Schema: %s", clip(err.Error()))
	}
	if sc.Type != "object" {
		return nil, invalidf(path, `the top-level "type" must be "object" (arguments and event data are JSON objects)`)
	}
	if _, err := sc.Resolve(nil); err != nil {
		return nil, invalidf(path, "not a usable JSON Schema: %s", clip(err.Error()))
	}
	return canon, nil
}

// parseAccess validates an access rule (notify.ParseAccess); null is no
// rule.
func parseAccess(raw json.RawMessage, path string) (*notify.Access, error) {
	if isNull(raw) {
		return nil, nil
	}
	a, err := notify.ParseAccess(raw)
	if err != nil {
		return nil, invalidf(path, "%s", strings.TrimPrefix(err.Error(), notify.ErrBadItem.Error()+": "))
	}
	return a, nil
}

// clip shortens an error text from a library to 200 bytes.
func clip(s string) string {
	if len(s) <= 200 {
		return s
	}
	return strings.ToValidUTF8(s[:200], "") + "..."
}

package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// member is one name/value pair of a JSON object, in document order.
type member struct {
	name  string
	value json.RawMessage
}

// decodeObject splits raw, which must be valid JSON, into the members of
// the object it holds. A value that is not an object, and an object that
// names a member twice (which encoding/json would silently resolve to
// the last one), are errors at path.
func decodeObject(raw json.RawMessage, path string) ([]member, error) {
	if k := kindOf(raw); k != "object" {
		return nil, invalidf(path, "want an object, got %s", k)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, invalidf(path, "%v", err)
	}
	var (
		members []member
		seen    = make(map[string]bool)
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalidf(path, "%v", err)
		}
		name, _ := tok.(string)
		if seen[name] {
			return nil, invalidf(join(path, name), "member appears twice in one object")
		}
		seen[name] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, invalidf(join(path, name), "%v", err)
		}
		members = append(members, member{name, v})
	}
	return members, nil
}

// decodeArray splits raw, which must be valid JSON, into the elements of
// the array it holds.
func decodeArray(raw json.RawMessage, path string) ([]json.RawMessage, error) {
	if k := kindOf(raw); k != "array" {
		return nil, invalidf(path, "want an array, got %s", k)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, invalidf(path, "%v", err)
	}
	return elems, nil
}

// kindOf names the kind of JSON value raw holds; raw must be valid JSON.
func kindOf(raw json.RawMessage) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// isNull reports whether raw is the JSON null.
func isNull(raw json.RawMessage) bool { return kindOf(raw) == "null" }

// stringValue decodes a JSON string at path.
func stringValue(raw json.RawMessage, path string) (string, error) {
	if k := kindOf(raw); k != "a string" {
		return "", invalidf(path, "want a string, got %s", k)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalidf(path, "%v", err)
	}
	return s, nil
}

// optString decodes an optional JSON string at path: null means absent.
func optString(raw json.RawMessage, path string) (*string, error) {
	if isNull(raw) {
		return nil, nil
	}
	s, err := stringValue(raw, path)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// optBool decodes an optional JSON boolean at path: null means absent.
func optBool(raw json.RawMessage, path string) (*bool, error) {
	if isNull(raw) {
		return nil, nil
	}
	if k := kindOf(raw); k != "a boolean" {
		return nil, invalidf(path, "want a boolean, got %s", k)
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, invalidf(path, "%v", err)
	}
	return &b, nil
}

// unknownField reports a member that a shape does not define, with a hint
// when it differs from a known one only in case.
func unknownField(path, name string, known []string) error {
	for _, k := range known {
		if strings.EqualFold(k, name) {
			return invalidf(join(path, name), "unknown field (did you mean %q?)", k)
		}
	}
	sorted := append([]string(nil), known...)
	sort.Strings(sorted)
	return invalidf(join(path, name), "unknown field (known: %s)", strings.Join(sorted, ", "))
}

// join appends a member name to a path, shortening a long name.
func join(path, name string) string {
	if len(name) > maxQuote {
		name = cut(name) + "..."
	}
	if path == "" {
		return name
	}
	return path + "." + name
}

// index appends an array index to a path.
func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// marshal encodes v as compact JSON without escaping HTML characters, the
// form in which the stores keep JSON.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

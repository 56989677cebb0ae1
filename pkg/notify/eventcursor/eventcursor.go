// Package eventcursor signs and verifies the cursors of the Events
// extension: "ev1." base64url(JSON body) "." base64url(HMAC-SHA256). The
// body names the event type, its topic and the position in the topic's
// log up to which the subscription has seen every event (the Seq of
// notify.TopicEvent). The MAC uses the state keys (the first signs, every
// one verifies) under a label of its own, so that any process, the MCP
// server's or the ingest's (webhook payloads), signs a cursor every other
// accepts, no client can make one, a cursor is refused for another event
// type, and no other token passes for one. A cursor does not expire.
package eventcursor

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strings"
)

// MaxBytes bounds a cursor a client sends (one this package signs is
// under 400 bytes).
const MaxBytes = 1024

const tag = "ev1."

// Cursor is the signed content of a cursor.
type Cursor struct {
	Name  string `json:"n"`
	Topic string `json:"t"`
	Seq   int64  `json:"s"`
}

func mac(key []byte, payload string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("mcpush events cursor v1\x00"))
	h.Write([]byte(payload))
	return h.Sum(nil)
}

// Sign returns the cursor of c, signed with key.
func Sign(key []byte, c Cursor) string {
	raw, _ := json.Marshal(c)
	payload := base64.RawURLEncoding.EncodeToString(raw)
	return tag + payload + "." + base64.RawURLEncoding.EncodeToString(mac(key, payload))
}

// Verify checks a client's cursor for event type name against keys.
func Verify(keys [][]byte, token, name string) (*Cursor, error) {
	rest, ok := strings.CutPrefix(token, tag)
	if !ok || len(token) > MaxBytes {
		return nil, ErrMalformed
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok || payload == "" {
		return nil, ErrMalformed
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return nil, ErrMalformed
	}
	verified := false
	for _, k := range keys {
		if hmac.Equal(got, mac(k, payload)) {
			verified = true
			break
		}
	}
	if !verified {
		return nil, ErrSignature
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, ErrMalformed
	}
	var c Cursor
	if json.Unmarshal(raw, &c) != nil || c.Name == "" || c.Topic == "" || c.Seq < 0 {
		return nil, ErrMalformed
	}
	if c.Name != name {
		return nil, ErrOtherType
	}
	return &c, nil
}

// EventID returns the eventId of the event with SNS MessageId messageID
// as an event of type name: "evt_" and 22 base64url characters of a
// SHA-256 of both. Every delivery of the event as that type carries it
// (poll, push, webhook: it is a webhook's webhook-id); the same event
// seen as two types (two types of one topic) has two, so that a receiver
// deduplicating on eventId never drops one type's event as the other's
// duplicate.
func EventID(name, messageID string) string {
	sum := sha256.Sum256([]byte("mcpush event\x00" + name + "\x00" + messageID))
	return "evt_" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// ObjectData returns a topic event's data as an event's data: itself
// when it is a JSON object, else {"value": data} (a plain-text SNS
// message, an array: SEP-3415 requires an object).
func ObjectData(data json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		if len(t) == 0 {
			t = []byte("null")
		}
		return append(append([]byte(`{"value":`), t...), '}')
	}
	return data
}

// Matches reports whether data (a topic event's) passes a subscription's
// arguments: every member F with value V of filters admits the events
// whose data is an object with a member F equal to V (JSON equality:
// objects with the same members, arrays of the same elements, numbers of
// the same value, 1 equal to 1.0).
func Matches(filters map[string]json.RawMessage, data json.RawMessage) bool {
	if len(filters) == 0 {
		return true
	}
	var obj map[string]json.RawMessage
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' || json.Unmarshal(data, &obj) != nil {
		return false
	}
	for f, want := range filters {
		got, ok := obj[f]
		if !ok || !jsonEqual(got, want) {
			return false
		}
	}
	return true
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b json.RawMessage) bool {
	x, errX := decodeNumbers(a)
	y, errY := decodeNumbers(b)
	return errX == nil && errY == nil && valuesEqual(x, y)
}

func decodeNumbers(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func valuesEqual(x, y any) bool {
	switch x := x.(type) {
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !valuesEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := y.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !valuesEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := y.(json.Number)
		if !ok {
			return false
		}
		rx, okx := new(big.Rat).SetString(string(x))
		ry, oky := new(big.Rat).SetString(string(y))
		return okx && oky && rx.Cmp(ry) == 0
	default: // string, bool, nil
		return x == y
	}
}

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
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// Errors of a refused cursor.
var (
	// ErrMalformed: not a cursor this deployment issues.
	ErrMalformed = errors.New("malformed cursor")
	// ErrSignature: no key verifies the cursor (forged, tampered with,
	// or signed with a key no longer configured).
	ErrSignature = errors.New("cursor signature does not verify")
	// ErrOtherType: the cursor was issued for another event type.
	ErrOtherType = errors.New("cursor belongs to another event type")
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

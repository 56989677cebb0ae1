package mcp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// Event cursors (events/poll): "ev1." base64url(JSON body) "."
// base64url(HMAC-SHA256). The body names the event type, its topic and
// the position in the topic's log up to which the subscription has seen
// every event (the Seq of notify.TopicEvent). The MAC uses the keys of
// requestState (ServerOptions.StateKeys: the first signs, every one
// verifies) under a label of its own, so that any process accepts a
// cursor any other issued, no client can make one, a cursor is refused
// for another event type, and neither kind of token passes for the
// other. A cursor does not expire: a client keeps it as long as it
// likes, and one older than what the topic's log keeps is answered with
// truncated: true.

// Errors of a refused cursor. They reach the client as the message of an
// invalid-params error.
var (
	// ErrCursorMalformed: not a cursor this server issues.
	ErrCursorMalformed = errors.New("malformed cursor")
	// ErrCursorSignature: no key verifies the cursor (forged, tampered
	// with, or signed with a key no longer configured).
	ErrCursorSignature = errors.New("cursor signature does not verify")
	// ErrCursorOtherType: the cursor was issued for another event type.
	ErrCursorOtherType = errors.New("cursor belongs to another event type")
)

// maxCursorBytes bounds a cursor a client sends (one this server issues
// is under 400 bytes).
const maxCursorBytes = 1024

const cursorTag = "ev1."

// eventCursor is the signed content of a cursor.
type eventCursor struct {
	Name  string `json:"n"`
	Topic string `json:"t"`
	Seq   int64  `json:"s"`
}

func cursorMAC(key []byte, payload string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("mcpush events cursor v1\x00"))
	h.Write([]byte(payload))
	return h.Sum(nil)
}

// signCursor returns the cursor of c.
func (s *stateSigner) signCursor(c eventCursor) string {
	raw, _ := json.Marshal(c)
	payload := base64.RawURLEncoding.EncodeToString(raw)
	return cursorTag + payload + "." + base64.RawURLEncoding.EncodeToString(cursorMAC(s.keys[0], payload))
}

// verifyCursor checks a client's cursor for event type name.
func (s *stateSigner) verifyCursor(token, name string) (*eventCursor, error) {
	rest, ok := strings.CutPrefix(token, cursorTag)
	if !ok || len(token) > maxCursorBytes {
		return nil, ErrCursorMalformed
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok || payload == "" {
		return nil, ErrCursorMalformed
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return nil, ErrCursorMalformed
	}
	verified := false
	for _, k := range s.keys {
		if hmac.Equal(got, cursorMAC(k, payload)) {
			verified = true
			break
		}
	}
	if !verified {
		return nil, ErrCursorSignature
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, ErrCursorMalformed
	}
	var c eventCursor
	if json.Unmarshal(raw, &c) != nil || c.Name == "" || c.Topic == "" || c.Seq < 0 {
		return nil, ErrCursorMalformed
	}
	if c.Name != name {
		return nil, ErrCursorOtherType
	}
	return &c, nil
}

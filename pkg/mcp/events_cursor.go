package mcp

import (
	"github.com/mcpush/mcpush/pkg/notify/eventcursor"
)

// Event cursors (events/poll, events/subscribe): package eventcursor,
// under the keys of requestState (ServerOptions.StateKeys: the first
// signs, every one verifies), so that any process accepts a cursor any
// other issued, the ingest's webhook payloads included. A cursor older
// than what the topic's log keeps is answered with truncated: true.

// Errors of a refused cursor. They reach the client as the message of an
// invalid-params error.
var (
	// ErrCursorMalformed: not a cursor this server issues.
	ErrCursorMalformed = eventcursor.ErrMalformed
	// ErrCursorSignature: no key verifies the cursor (forged, tampered
	// with, or signed with a key no longer configured).
	ErrCursorSignature = eventcursor.ErrSignature
	// ErrCursorOtherType: the cursor was issued for another event type.
	ErrCursorOtherType = eventcursor.ErrOtherType
)

// eventCursor is the signed content of a cursor.
type eventCursor = eventcursor.Cursor

// signCursor returns the cursor of c.
func (s *stateSigner) signCursor(c eventCursor) string { return eventcursor.Sign(s.keys[0], c) }

// verifyCursor checks a client's cursor for event type name.
func (s *stateSigner) verifyCursor(token, name string) (*eventCursor, error) {
	return eventcursor.Verify(s.keys, token, name)
}

package eventcursor

import "errors"

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

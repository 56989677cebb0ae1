package notify

import (
	"context"
	"fmt"
)

// SessionCounter counts the live sessions of a principal, shared by every
// process of a deployment: what bounds the sessions one principal holds.
// Both stores implement it, keeping a per-principal index of sessions
// that CreateSession writes and DeleteSession removes in the same atomic
// step as the session; it is not part of Store so that wrappers of a
// Store need not. Safe for concurrent use by many processes.
type SessionCounter interface {
	// CountSessions returns the number of live (not deleted, not expired)
	// sessions whose Principal is principal ("" is the anonymous
	// principal), counting no further than limit: a result of limit
	// means "limit or more". A limit < 1 is ErrInvalid; a principal over
	// MaxURIBytes is ErrTooLarge.
	CountSessions(ctx context.Context, principal string, limit int) (int, error)
}

// CheckCountSessions validates the arguments of
// SessionCounter.CountSessions the same way for every store.
func CheckCountSessions(principal string, limit int) error {
	switch {
	case limit < 1:
		return fmt.Errorf("%w: session count limit %d", ErrInvalid, limit)
	case len(principal) > MaxURIBytes:
		return fmt.Errorf("%w: principal of %d bytes, limit %d", ErrTooLarge, len(principal), MaxURIBytes)
	}
	return nil
}

package notify

import (
	"context"
	"fmt"
	"time"
)

// SessionCounter counts the live sessions of a principal, shared by every
// process of a deployment: what bounds the sessions one principal holds.
// Both stores implement it, keeping a per-principal index of sessions
// that CreateSession writes and DeleteSession removes in the same atomic
// step as the session; it is a capability beside Store, which its
// consumers require in their own interfaces (mcp.Store). Safe for concurrent use by many processes.
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

// CheckProfiles validates the arguments of ProfileLister.PrincipalProfiles
// the same way for every store.
func CheckProfiles(principal string, match ListenMatch, limit int) error {
	for _, f := range []string{match.Request, match.Parked, match.Session} {
		if len(f) > MaxURIBytes {
			return fmt.Errorf("%w: match of %d bytes, limit %d", ErrTooLarge, len(f), MaxURIBytes)
		}
	}
	return CheckCountSessions(principal, limit)
}

// SessionReclaimer finds sessions that a principal at its live-session
// bound may give up for a new one: sessions that hold nothing but their
// profile, as clients that never DELETE leave them behind. Both stores
// implement it; the server decides when to reclaim (at the bound, one
// session per new one, so the bound still holds for sessions in use).
// Safe for concurrent use by many processes.
type SessionReclaimer interface {
	// IdleSessions returns up to limit live sessions of principal that
	// expire no later than expiresBy and hold nothing: no subscription,
	// no stream (no GET stream opened, no response streamed, no event
	// logged for it), no Append idempotency key, no mailbox message;
	// least recently extended (ExpiresAt) first. A store may examine only the
	// MaxIdleSessionScan least recently extended sessions, and so
	// return fewer. A limit < 1 is ErrInvalid; a principal over
	// MaxURIBytes is ErrTooLarge.
	IdleSessions(ctx context.Context, principal string, expiresBy time.Time, limit int) ([]string, error)
}

// ProfileLister reads the profiles of a principal's sessions in one go,
// for a server that must look at each of them: a listen stream's
// cancellation or adoption looks for the backing session whose
// ListenState records a request id or a parked filter, and a reclaim for
// those whose serving process is gone. Both stores implement it; it is a
// capability beside Store that mcp.Store requires. Safe for concurrent
// use by many processes.
type ProfileLister interface {
	// PrincipalProfiles returns up to limit live sessions of principal
	// (those CountSessions counts) whose Listen matches match (the zero
	// ListenMatch: all of them), sorted by ID, each as GetSession returns
	// it but without Subscriptions and StreamHead: one read of the
	// principal's index and (DynamoDB) one batched read of the sessions
	// per 100, which a store may filter where it reads (SQLite: only the
	// matching rows are read). A limit < 1 is ErrInvalid; a principal or
	// a field of match over MaxURIBytes is ErrTooLarge.
	PrincipalProfiles(ctx context.Context, principal string, match ListenMatch, limit int) ([]*Session, error)
}

// MaxIdleSessionScan is how many of a principal's least recently extended
// sessions SessionReclaimer.IdleSessions examines at most, where that
// costs a read each (DynamoDB).
const MaxIdleSessionScan = 10

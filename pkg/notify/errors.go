package notify

import (
	"errors"
	"fmt"
)

// Sentinel errors returned by every Store implementation. Callers test them
// with errors.Is; implementations wrap them with context.
var (
	// ErrNotFound reports a missing, expired or deleted item.
	ErrNotFound = errors.New("notify: not found")
	// ErrExists reports that an item that must be new already exists.
	ErrExists = errors.New("notify: already exists")
	// ErrConflict reports a failed optimistic-concurrency check: the item
	// changed since it was read. Re-read and try again.
	ErrConflict = errors.New("notify: conflict")
	// ErrTooLarge reports a value too large for one stored item. Nothing
	// is stored and nothing is truncated.
	ErrTooLarge = errors.New("notify: item too large")
	// ErrInvalid reports an argument the store refuses (empty key, bad
	// registry kind, ...). Nothing is stored.
	ErrInvalid = errors.New("notify: invalid argument")
	// ErrLimit reports a bound on stored items reached (a principal's
	// webhook subscriptions). Nothing is stored.
	ErrLimit = errors.New("notify: limit reached")
	// ErrUnavailable reports a store that could not serve the call now:
	// busy (an SQLite write lock held by another process past the busy
	// timeout), throttled, unreachable or timed out. Nothing is known to
	// be stored; the same call may succeed later, so callers answer
	// "retry" (HTTP 503 with Retry-After, a retryable exit status, a
	// failed Lambda invocation that SNS delivers again), never "invalid".
	ErrUnavailable = errors.New("notify: store unavailable")
)

// ErrSessionGone reports that the session a call names does not exist
// (never created, expired or deleted), where the call could also fail
// for a missing item inside a live session: GetMessage returns it for a
// missing session and a plain ErrNotFound for a missing message. It
// wraps ErrNotFound, so errors.Is(err, ErrNotFound) holds for both.
var ErrSessionGone = fmt.Errorf("session: %w", ErrNotFound)

// ErrBadItem reports a stored registry item the server cannot serve: not
// a JSON object of its kind, a missing key, a duplicate argument name, an
// unknown role, invalid UTF-8. The server skips such an item (and logs
// it) rather than serving something half-read.
var ErrBadItem = errors.New("notify: bad registry item")

// ErrUnsealable reports a sealed value no key opens (tampered with, moved
// to another record, or sealed under a key no longer configured).
var ErrUnsealable = errors.New("notify: sealed value does not open")

package notify

import (
	"fmt"
	"math"
	"time"
)

// CheckAppend validates the arguments of Store.Append the same way for
// every implementation: an empty session or stream id, no data, more than
// MaxAppendBatch values or an unknown registry in opts is ErrInvalid; a
// value over MaxItemBytes, or more than MaxAppendBytes in all, is
// ErrTooLarge.
func CheckAppend(sessionID, streamID string, data [][]byte, opts *AppendOptions) error {
	switch {
	case sessionID == "":
		return fmt.Errorf("%w: empty session id", ErrInvalid)
	case streamID == "":
		return fmt.Errorf("%w: empty stream id", ErrInvalid)
	case len(data) == 0:
		return fmt.Errorf("%w: no events", ErrInvalid)
	case len(data) > MaxAppendBatch:
		return fmt.Errorf("%w: %d events in one append (at most %d)", ErrInvalid, len(data), MaxAppendBatch)
	case opts != nil && opts.NotifiedHash != nil && !ValidRegistry(opts.NotifiedHash.Registry):
		return fmt.Errorf("%w: registry kind %q", ErrInvalid, opts.NotifiedHash.Registry)
	}
	total := 0
	for i, d := range data {
		if len(d) > MaxItemBytes {
			return fmt.Errorf("%w: event %d is %d bytes, limit %d", ErrTooLarge, i, len(d), MaxItemBytes)
		}
		total += len(d)
	}
	if total > MaxAppendBytes {
		return fmt.Errorf("%w: one append of %d bytes in all, limit %d", ErrTooLarge, total, MaxAppendBytes)
	}
	return nil
}

// MaxAppendEach is the most sessions one Store.AppendEach call may
// name: on DynamoDB, two BatchGetItem requests read their session items,
// stream heads and subscriptions.
const MaxAppendEach = 50

// CheckAppendEach validates the arguments of Store.AppendEach the same way
// for every implementation: no ids, an empty id, more than MaxAppendEach
// distinct ids or an upTo below 1 is ErrInvalid, and uri is checked as
// by CheckSubscription. It returns the ids without repeats, in their first
// order.
func CheckAppendEach(ids []string, uri string, upTo int64) ([]string, error) {
	switch {
	case len(ids) == 0:
		return nil, fmt.Errorf("%w: no session ids", ErrInvalid)
	case upTo < 1:
		return nil, fmt.Errorf("%w: position %d (at least 1)", ErrInvalid, upTo)
	}
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if err := CheckSubscription(id, uri); err != nil {
			return nil, err
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	if len(out) > MaxAppendEach {
		return nil, fmt.Errorf("%w: %d sessions in one AppendEach (at most %d)", ErrInvalid, len(out), MaxAppendEach)
	}
	return out, nil
}

// MaxURIBytes bounds a subscription URI; both stores refuse a longer one
// with ErrTooLarge, so that a subscription costs the same bounded storage
// on both.
const MaxURIBytes = 2048

// CheckSubscription validates the arguments of Subscribe and Unsubscribe
// the same way for every implementation: an empty session id or URI is
// ErrInvalid, a URI over MaxURIBytes is ErrTooLarge.
func CheckSubscription(sessionID, uri string) error {
	switch {
	case sessionID == "":
		return fmt.Errorf("%w: empty session id", ErrInvalid)
	case uri == "":
		return fmt.Errorf("%w: empty URI", ErrInvalid)
	case len(uri) > MaxURIBytes:
		return fmt.Errorf("%w: URI of %d bytes, limit %d", ErrTooLarge, len(uri), MaxURIBytes)
	}
	return nil
}

// Stores keep times as Unix nanoseconds, the zero time.Time as 0. Times
// outside the range of int64 nanoseconds (years 1678 to 2262) are clamped.
var (
	minNanoTime = time.Unix(0, math.MinInt64+1)
	maxNanoTime = time.Unix(0, math.MaxInt64)
)

// UnixNanos returns t as stored: Unix nanoseconds, 0 for the zero time.
func UnixNanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Before(minNanoTime):
		return math.MinInt64 + 1
	case t.After(maxNanoTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// FromUnixNanos is the inverse of UnixNanos, in UTC.
func FromUnixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

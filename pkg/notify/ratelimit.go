package notify

import (
	"context"
	"fmt"
	"time"
)

// RateCounter counts events in fixed time windows, shared by every
// process of a deployment: the store-backed half of a rate limit. Both
// stores implement it; it is a capability beside Store, which its
// consumers require in their own interfaces (mcp.Store). Safe for concurrent use by many processes.
type RateCounter interface {
	// CountInWindow adds n (at least 1) to the counter of (key, window)
	// and returns its new value, in one write. The counter may be
	// forgotten after expires. An empty key or n < 1 is ErrInvalid; a key
	// over MaxURIBytes is ErrTooLarge.
	CountInWindow(ctx context.Context, key string, window, n int64, expires time.Time) (int64, error)
}

// CheckRateKey validates the arguments of RateCounter.CountInWindow the
// same way for every store.
func CheckRateKey(key string, n int64) error {
	switch {
	case n < 1:
		return fmt.Errorf("%w: rate counter increment %d", ErrInvalid, n)
	case key == "":
		return fmt.Errorf("%w: empty rate counter key", ErrInvalid)
	case len(key) > MaxURIBytes:
		return fmt.Errorf("%w: rate counter key of %d bytes, limit %d", ErrTooLarge, len(key), MaxURIBytes)
	}
	return nil
}

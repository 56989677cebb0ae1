package storetest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// testRateCounter checks notify.RateCounter: counts per (key, window)
// start at 1, are independent across keys and windows, lose no increment
// under concurrent writers, and bad keys are refused.
func testRateCounter(t *testing.T, s *suite) {
	st := s.store(t)
	rc := st
	ctx := t.Context()
	exp := time.Now().Add(time.Hour)
	count := func(key string, window int64) int64 {
		t.Helper()
		n, err := rc.CountInWindow(ctx, key, window, 1, exp)
		if err != nil {
			t.Fatalf("CountInWindow(%q, %d): %v", key, window, err)
		}
		return n
	}
	for want := int64(1); want <= 3; want++ {
		if got := count("p#a", 7); got != want {
			t.Errorf("count %d of p#a/7 = %d", want, got)
		}
	}
	if got := count("p#b", 7); got != 1 {
		t.Errorf("first count of another key = %d, want 1", got)
	}
	if got := count("p#a", 8); got != 1 {
		t.Errorf("first count of a new window = %d, want 1", got)
	}
	// A process whose clock lags still counts into the earlier window,
	// which is not forgotten before it expires.
	if got := count("p#a", 7); got != 4 {
		t.Errorf("count of the earlier, unexpired window after a later one = %d, want 4", got)
	}
	const writers, each = 4, 5
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				if _, err := rc.CountInWindow(ctx, "p#c", 1, 1, exp); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got := count("p#c", 1); got != writers*each+1 {
		t.Errorf("after %d concurrent counts the next is %d, want %d", writers*each, got, writers*each+1)
	}
	if n, err := rc.CountInWindow(ctx, "p#c", 1, 10, exp); err != nil || n != writers*each+11 {
		t.Errorf("adding 10 = %d, %v; want %d", n, err, writers*each+11)
	}
	if _, err := rc.CountInWindow(ctx, "", 1, 1, exp); !errors.Is(err, notify.ErrInvalid) {
		t.Errorf("empty key: %v, want ErrInvalid", err)
	}
	if _, err := rc.CountInWindow(ctx, "p#c", 1, 0, exp); !errors.Is(err, notify.ErrInvalid) {
		t.Errorf("increment 0: %v, want ErrInvalid", err)
	}
	if _, err := rc.CountInWindow(ctx, strings.Repeat("k", notify.MaxURIBytes+1), 1, 1, exp); !errors.Is(err, notify.ErrTooLarge) {
		t.Errorf("long key: %v, want ErrTooLarge", err)
	}
}

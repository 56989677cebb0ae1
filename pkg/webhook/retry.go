package webhook

import (
	"math/rand/v2"
	"time"
)

// Default retry schedule: 5 attempts (the first and 4 retries) at 30 s,
// 1, 2 and 4 min after each failure, so the last attempt is 7.5 min after
// the first, within SEP-3415's "3 to 5 attempts over no more than 10 to
// 15 minutes".
const (
	DefaultAttempts    = 5
	DefaultRetryBase   = 30 * time.Second
	DefaultRetryMax    = 5 * time.Minute
	DefaultRetryWindow = 15 * time.Minute
)

// Retry is an exponential backoff schedule with bounded attempts and a
// bounded window. Zero fields take the defaults above. A Retry is a
// value; it is safe for concurrent use.
type Retry struct {
	Attempts int           // attempts in all, the first included
	Base     time.Duration // the delay after the first failure; doubled after each
	Max      time.Duration // the longest delay
	Window   time.Duration // no attempt starts later than this after the first
	// Jitter, if positive, adds a random delay in [0, Jitter) to each
	// retry, spreading retries of many messages that failed together.
	Jitter time.Duration
}

// Next returns when to make the next attempt after attempt attempts (1
// after the first failure) of a message first tried at firstTry, failing
// at now; false when the message is to be given up: attempts exhausted,
// or the next attempt would start after the window. Time during which a
// subscription's delivery was suspended is not the schedule's concern:
// the caller moves firstTry forward by it.
func (r Retry) Next(attempt int, firstTry, now time.Time) (time.Time, bool) {
	attempts, base, maxDelay, window := r.Attempts, r.Base, r.Max, r.Window
	if attempts <= 0 {
		attempts = DefaultAttempts
	}
	if base <= 0 {
		base = DefaultRetryBase
	}
	if maxDelay <= 0 {
		maxDelay = DefaultRetryMax
	}
	if window <= 0 {
		window = DefaultRetryWindow
	}
	if attempt < 1 {
		attempt = 1
	}
	if attempt >= attempts {
		return time.Time{}, false
	}
	delay := base
	for i := 1; i < attempt && delay < maxDelay; i++ {
		delay *= 2
	}
	delay = min(delay, maxDelay)
	if r.Jitter > 0 {
		delay += rand.N(r.Jitter)
	}
	next := now.Add(delay)
	if next.Sub(firstTry) > window {
		return time.Time{}, false
	}
	return next, true
}

package webhook

import (
	"math/rand/v2"
	"time"
)

// DefaultDelays is the default retry schedule: after a failed attempt the
// next one waits 1 s, then 5 s, 15 s, 30 s, 2 min and 10 min, each
// stretched by up to a tenth at random (jitter), so that the 7 attempts of
// an event span about 13 minutes, within SEP-3415's "no more than 10 to 15
// minutes". The first steps are short so that a receiver that was down
// briefly gets its backlog promptly: after an outage of up to 30 s the next
// attempt comes at most 35 s after the receiver is back (TestRetryRecovery
// checks every outage length).
var DefaultDelays = []time.Duration{
	time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second,
	2 * time.Minute, 10 * time.Minute,
}

// Defaults of the exponential schedule (Retry.Base) and of the window.
const (
	DefaultAttempts    = 5
	DefaultRetryBase   = 30 * time.Second
	DefaultRetryMax    = 5 * time.Minute
	DefaultRetryWindow = 15 * time.Minute
)

// Retry is a retry schedule with bounded attempts and a bounded window:
// either a list of delays (Delays; the zero Retry is DefaultDelays) or an
// exponential backoff (Base set: doubled after each failure up to Max,
// Attempts in all). A Retry is a value; it is safe for concurrent use.
type Retry struct {
	// Delays are the waits before the second, third, ... attempt; the
	// attempts are len(Delays)+1. Nil (with Base zero): DefaultDelays.
	Delays []time.Duration

	Attempts int           // exponential: attempts in all, the first included
	Base     time.Duration // exponential: the delay after the first failure; doubled after each
	Max      time.Duration // exponential: the longest delay
	// Window: no attempt starts later than this after the first. Zero:
	// DefaultRetryWindow.
	Window time.Duration
	// Jitter, if positive, adds a random delay in [0, Jitter) to each
	// retry, spreading retries of many messages that failed together.
	// With Delays (or the default schedule) and Jitter zero, each delay
	// is stretched by up to a tenth instead.
	Jitter time.Duration
}

// Next returns when to make the next attempt after attempt attempts (1
// after the first failure) of a message first tried at firstTry, failing
// at now; false when the message is to be given up: attempts exhausted,
// or the next attempt would start after the window. Time during which a
// subscription's delivery was suspended is not the schedule's concern:
// the caller moves firstTry forward by it.
func (r Retry) Next(attempt int, firstTry, now time.Time) (time.Time, bool) {
	window := r.Window
	if window <= 0 {
		window = DefaultRetryWindow
	}
	if attempt < 1 {
		attempt = 1
	}
	delay, ok := r.delay(attempt)
	if !ok {
		return time.Time{}, false
	}
	next := now.Add(delay)
	if next.Sub(firstTry) > window {
		return time.Time{}, false
	}
	return next, true
}

// delay is the wait after attempt failed attempts, jitter included; false
// when no attempt is left.
func (r Retry) delay(attempt int) (time.Duration, bool) {
	if r.Base <= 0 {
		delays := r.Delays
		if delays == nil {
			delays = DefaultDelays
		}
		if attempt > len(delays) {
			return 0, false
		}
		d := delays[attempt-1]
		switch {
		case r.Jitter > 0:
			d += rand.N(r.Jitter)
		case d >= 10:
			d += rand.N(d / 10)
		}
		return d, true
	}
	attempts, maxDelay := r.Attempts, r.Max
	if attempts <= 0 {
		attempts = DefaultAttempts
	}
	if maxDelay <= 0 {
		maxDelay = DefaultRetryMax
	}
	if attempt >= attempts {
		return 0, false
	}
	delay := r.Base
	for i := 1; i < attempt && delay < maxDelay; i++ {
		delay *= 2
	}
	delay = min(delay, maxDelay)
	if r.Jitter > 0 {
		delay += rand.N(r.Jitter)
	}
	return delay, true
}

// MaxAttempts returns how many attempts the schedule makes at most.
func (r Retry) MaxAttempts() int {
	switch {
	case r.Base > 0 && r.Attempts > 0:
		return r.Attempts
	case r.Base > 0:
		return DefaultAttempts
	case r.Delays != nil:
		return len(r.Delays) + 1
	}
	return len(DefaultDelays) + 1
}

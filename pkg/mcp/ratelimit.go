package mcp

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// rateLimiter enforces fixed-window limits per key (a principal) across
// every process that shares the store, cheaply: each process counts
// locally and adds its count to the store's counter (notify.RateCounter)
// once per batch of a twentieth of the limit, so a key costs one store
// write per batch, not one per request. The event that completes a batch
// is decided on the store's fresh total; the others on the last total
// read plus the local count, so across n processes a key may overshoot
// its limit by less than n batches in a window. Safe for concurrent use.
type rateLimiter struct {
	counter notify.RateCounter
	now     func() time.Time
	log     *slog.Logger

	mu     sync.Mutex
	states map[string]*rateState
}

type rateState struct {
	window  int64 // index of the window counted
	total   int64 // the store's count, as last read
	pending int64 // counted here, not yet added to the store
}

// maxRateStates bounds the keys one process tracks; beyond it the states
// of past windows are dropped.
const maxRateStates = 10000

// allow counts one event of key against limit per window. When the limit
// is reached it returns false and how long until the window ends.
func (rl *rateLimiter) allow(ctx context.Context, key string, limit int, window time.Duration) (bool, time.Duration) {
	if limit <= 0 {
		return true, 0
	}
	now := rl.now()
	w := now.UnixNano() / int64(window)
	end := time.Unix(0, (w+1)*int64(window))
	rl.mu.Lock()
	if rl.states == nil {
		rl.states = map[string]*rateState{}
	}
	st := rl.states[key]
	if st == nil || st.window != w {
		if len(rl.states) >= maxRateStates {
			for k, s := range rl.states {
				if s.window != w {
					delete(rl.states, k)
				}
			}
		}
		st = &rateState{window: w}
		rl.states[key] = st
	}
	if st.total+st.pending >= int64(limit) {
		rl.mu.Unlock()
		return false, end.Sub(now)
	}
	st.pending++
	if st.pending < max(int64(limit)/20, 1) {
		rl.mu.Unlock()
		return true, 0
	}
	// A batch is complete: add it to the store, and decide this event on
	// the fresh total.
	delta := st.pending
	st.pending = 0
	rl.mu.Unlock()
	total, err := rl.counter.CountInWindow(ctx, key, w, delta, end.Add(window))
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if err != nil {
		st.pending += delta // try again with the next batch
		rl.log.WarnContext(ctx, "counting for a rate limit", "err", err)
		return true, 0
	}
	st.total = max(st.total, total)
	if total > int64(limit) {
		return false, end.Sub(now)
	}
	return true, 0
}

// rateLimited is a refusal of a request over a rate or a quota (429) with
// Retry-After retry (whole seconds, at least 1).
func rateLimited(retry time.Duration, what string) *refusal {
	secs := max(int64((retry+time.Second-1)/time.Second), 1)
	return &refusal{kind: errTooManyRequests, msg: "Too Many Requests: " + what + "; retry after " + strconv.FormatInt(secs, 10) + "s", retryAfter: int(secs)}
}

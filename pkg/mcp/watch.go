package mcp

import (
	"context"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// A process's held streams (GET streams, listen streams) learn of what
// other processes wrote for them from one watcher per Server: it reads
// the store's change feed (notify.Store.Changes) once per PollInterval
// while a stream it serves is active (within StreamHold of its start or
// last message, or held without StreamHold), else once per
// idleWatchInterval, whatever the number of streams, and wakes the streams of the sessions
// it names; a change of the dynamic registries (the feed names it:
// ChangeSet.Registries) wakes every stream. A woken stream reads its
// session and log as a poll did. An idle stream thus costs no store read
// of its own but one check per idleCheck (its session's expiry and
// existence), and N idle streams cost about 1/PollInterval (all idle:
// 1/idleWatchInterval) + N/idleCheck reads per second, plus a read of the
// registry hashes per registry change and per registryFallbackAge.
//
// The feed is a hint: a stream always reads its log from its own
// position, so exactly-once and order come from the log, as before; a
// missed hint (a writer that died between its change and the hint) only
// delays delivery to the stream's next check.

// idleCheck is how often a held stream with a watcher reads its session
// by itself: it notices an expired session, extends its own expiry (see
// touch) and picks up a change whose hint was lost. Capped at a quarter of
// the session idle timeout.
const idleCheck = 10 * time.Minute

// idleWatchInterval is how often the watcher reads the feed while every
// stream it serves is idle: the delivery latency of an idle stream.
const idleWatchInterval = 500 * time.Millisecond

// watcher is the per-Server reader of the change feed. Safe for
// concurrent use.
type watcher struct {
	srv *Server

	startMu sync.Mutex // held while starting the loop

	mu       sync.Mutex
	waiters  map[string]map[chan struct{}]struct{} // by session id
	n        int                                   // registered waiters
	running  bool
	cursor   string
	lastRead time.Time // of the last successful feed read

	busyUntil  time.Time // the latest end of a stream's activity
	alwaysBusy int       // streams held without StreamHold
}

// streamWatch is a stream's registration with the watcher. The zero
// value is no registration.
type streamWatch struct {
	w       *watcher
	wake    <-chan struct{} // nil: no watcher, poll every PollInterval
	release func()
}

// stop ends the registration.
func (sw *streamWatch) stop() {
	if sw.release != nil {
		sw.release()
		sw.release = nil
	}
}

// busy tells the watcher that the stream is active until until: the
// watcher reads the feed every PollInterval until then.
func (sw *streamWatch) busy(until time.Time) {
	if sw.wake == nil {
		return
	}
	sw.w.mu.Lock()
	if until.After(sw.w.busyUntil) {
		sw.w.busyUntil = until
	}
	sw.w.mu.Unlock()
}

// watch registers a stream of the session id with the watcher: its wake
// channel receives (without blocking the watcher; wake-ups coalesce) when
// the change feed names the session, the registries change, or the feed
// cannot be read. The caller must read its session after watch returns,
// and call its stop when done. always: the stream is held without StreamHold
// (always active). A nil wake channel means there is no watcher (the feed
// is unreadable): the caller polls every PollInterval instead.
func (s *Server) watch(ctx context.Context, id string, always bool) *streamWatch {
	w := &s.watcher
	c := make(chan struct{}, 1)
	if err := w.add(ctx, id, c); err != nil {
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "starting the change feed watcher; the stream polls instead", "err", err)
		}
		return &streamWatch{w: w}
	}
	if always {
		w.mu.Lock()
		w.alwaysBusy++
		w.mu.Unlock()
	}
	return &streamWatch{w: w, wake: c, release: func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.waiters[id], c)
		if len(w.waiters[id]) == 0 {
			delete(w.waiters, id)
		}
		if always {
			w.alwaysBusy--
		}
		w.n--
	}}
}

// add registers c for id, starting the loop unless it runs: then it reads
// the feed's end first, so that every change committed after add returns
// is reported.
func (w *watcher) add(ctx context.Context, id string, c chan struct{}) error {
	w.startMu.Lock()
	defer w.startMu.Unlock()
	register := func() {
		if w.waiters == nil {
			w.waiters = map[string]map[chan struct{}]struct{}{}
		}
		if w.waiters[id] == nil {
			w.waiters[id] = map[chan struct{}]struct{}{}
		}
		w.waiters[id][c] = struct{}{}
		w.n++
	}
	w.mu.Lock()
	if w.running {
		register() // under mu: the loop does not end while n > 0
		w.mu.Unlock()
		return nil
	}
	w.mu.Unlock()
	_, cursor, err := w.srv.store.Changes(ctx, "")
	if err != nil {
		return err
	}
	var hashes map[string]string
	if w.srv.opts.DynamicRegistries {
		if hashes, err = w.srv.registryHashes(ctx, false); err != nil {
			return err
		}
	}
	w.mu.Lock()
	w.running, w.cursor, w.lastRead = true, cursor, time.Now()
	register()
	w.mu.Unlock()
	go w.loop(maps.Clone(hashes))
	return nil
}

// loop reads the feed until no stream watches (the next stream starts it
// again, with one read more; an idle reconnection, which ends after one
// check, never starts it).
func (w *watcher) loop(hashes map[string]string) {
	s := w.srv
	t := time.NewTimer(s.opts.PollInterval)
	defer t.Stop()
	ctx := context.Background()
	for range t.C {
		w.mu.Lock()
		if w.n == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		cursor, last := w.cursor, w.lastRead
		busy := w.alwaysBusy > 0 || s.opts.Now().Before(w.busyUntil) // busyUntil is on the streams' clock
		w.mu.Unlock()
		interval := s.opts.PollInterval
		if !busy {
			interval = max(interval, idleWatchInterval)
		}
		t.Reset(interval)

		all := false
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		changes, next, err := s.store.Changes(rctx, cursor)
		if s.opts.DynamicRegistries {
			// A registry change is in the feed (Registries):
			// read the hashes then. Otherwise this process's cached
			// hashes, renewed in the background once per
			// registryFallbackAge (no read of their own): what a change
			// that the feed did not name (an older ingest, a feed read
			// that failed) waits for.
			var h map[string]string
			var herr error
			if err == nil && changes.Registries {
				h, herr = s.readRegistryHashes(rctx)
			} else {
				h, herr = s.registryHashesAged(ctx, false, max(s.opts.RegistryRefresh, registryFallbackAge))
			}
			if herr == nil && !maps.Equal(h, hashes) {
				hashes, all = maps.Clone(h), true
			}
		}
		cancel()
		now := time.Now()
		w.mu.Lock()
		switch {
		case err != nil:
			// The next read retries from the same cursor: nothing is
			// lost while the feed keeps it. Past that, every stream
			// checks by itself, once (not at every failure: a herd of
			// reads on a store that already fails would make it worse).
			s.log.Warn("reading the change feed", "err", err)
			if now.Sub(last) > changeFeedStale {
				all = true
				w.lastRead = now
			}
		case now.Sub(last) > changeFeedStale:
			// Too long since the last read (a frozen Lambda environment,
			// a stalled process): the feed may have dropped changes.
			all = true
			fallthrough
		default:
			w.cursor, w.lastRead = next, now
		}
		if changes.Overflow {
			all = true // more changed than one read reports
		}
		if all {
			for _, cs := range w.waiters {
				for c := range cs {
					notifyChan(c)
				}
			}
		} else {
			for _, id := range changes.Sessions {
				for c := range w.waiters[id] {
					notifyChan(c)
				}
			}
		}
		w.mu.Unlock()
		if err == nil && changes.Full {
			// A full read: the rest of a large fan-out follows at once,
			// not one read per interval (100,000 sessions would take
			// 10 s at MaxChangesRead per PollInterval).
			t.Reset(0)
		}
	}
}

// registryFallbackAge is how old the watcher lets this process's registry
// hashes grow when the change feed names no registry change: the feed
// names every change an ApplyRegistry makes (ChangeSet.Registries), so
// this only bounds the delay of one it does not (written by an ingest
// older than the feed's registry entries).
const registryFallbackAge = idleRegistryAge

// changeFeedStale is how old the watcher's last read may be before it
// distrusts the feed: half of what the feed keeps.
const changeFeedStale = notify.ChangeFeedTTL / 2

// wake wakes this process's streams of the session id: a writer in this
// process need not wait for the feed.
func (w *watcher) wake(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.waiters[id] {
		notifyChan(c)
	}
}

// readRetry is a held stream's schedule of reads after a failed one. A
// stream with a watcher reads its log only when woken (or once per
// idleCheck), and a wake-up that led to a failed read is spent: without
// a retry of its own the stream would deliver what woke it only at its
// next check, minutes later. The retries back off from PollInterval,
// doubling, to maxReadRetry, with jitter, so that the streams of a process do not
// retry together against a store that already fails. The zero value is
// no retry due.
type readRetry struct {
	failures int
	at       time.Time
}

// maxReadRetry caps the backoff of readRetry: against a store that keeps
// failing, N streams read about N/(0.75·maxReadRetry) times a second,
// about as often as the watcher's wake-up of all of them when the feed
// itself fails (changeFeedStale).
const maxReadRetry = 30 * time.Second

// failed schedules the next read after another failure at now.
func (r *readRetry) failed(base time.Duration, now time.Time) {
	r.failures++
	d := min(base<<min(r.failures-1, 16), maxReadRetry)
	d = d/2 + rand.N(d/2+1)
	r.at = now.Add(d)
}

// succeeded clears the schedule.
func (r *readRetry) succeeded() { *r = readRetry{} }

// wait returns how long after now the retry is due, and whether one is
// scheduled.
func (r *readRetry) wait(now time.Time) (time.Duration, bool) {
	if r.at.IsZero() {
		return 0, false
	}
	return max(r.at.Sub(now), 0), true
}

// due reports whether a scheduled retry is due at now.
func (r *readRetry) due(now time.Time) bool {
	d, ok := r.wait(now)
	return ok && d == 0
}

// notifyChan sends on a wake-up channel without blocking.
func notifyChan(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// idleCheckEvery is idleCheck for this server's session idle timeout.
func (s *Server) idleCheckEvery() time.Duration {
	return min(idleCheck, s.opts.SessionIdleTimeout/4)
}

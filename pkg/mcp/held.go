package mcp

import (
	"context"
	"errors"
	"time"

	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/notify"
)

// A held stream is an SSE response that waits for what other requests,
// other processes and the ingest write to a log. Four kinds run the one
// loop below, [heldStream.run]; what differs (what a read returns, how the
// stream ends) is the kind's [heldSource]:
//
//   - a 2025-era GET stream: [getSource] on the session's log (getstream.go);
//   - a resumed POST response stream (a GET with the Last-Event-ID of a
//     request's stream): [getSource] on the request's log (getstream.go;
//     resume.go checks the resume);
//   - a 2026-era subscriptions/listen stream: [listenSource] on its
//     backing session's log (listen.go);
//   - an events/stream, in either era: [eventStream], woken by its backing
//     session's log and reading its event type's topic log
//     (events_stream.go).
//
// docs/held-streams.md walks through it for a newcomer.
//
// The loop, on the server's clock (ServerOptions.Now; timers run on the
// monotonic clock):
//
//  1. read: the source reads its log from its own position (a store read
//     of the session, and of the log only when it has something new);
//  2. write what was read, in order; the source records what was written;
//  3. end when the source says so (a response, a takeover, a
//     cancellation), when a stream that ends idle (SSE polling) has been
//     idle for its hold, when the client leaves, at the request's
//     deadline, when the request's credentials expire
//     (ExpiringAuthenticator) and on shutdown;
//  4. register with the process's watcher (watch.go) before the first
//     wait, and read once more after registering: nothing committed
//     between the last read and the registration is missed (a resumed
//     POST stream does not register: it polls every PollInterval);
//  5. wait for the first of: the watcher's wake-up (the change feed
//     named the session), the keepalive, the end of the hold, the
//     stream's own check (idleCheck), the source's upkeep, a read retry
//     after a failed read, the deadline, shutdown, the client leaving.
//
// A wake-up is a channel of capacity one: one that arrives during a read
// or a write is kept and makes the next wait return at once, so a change
// committed at any point of the loop is read.

// heldEnd is why a held stream's loop ended.
type heldEnd int

const (
	endLeft     heldEnd = iota // the client left, or a write to it failed
	endDone                    // the source ended it: a response, a takeover, a cancellation
	endGone                    // the session (or backing session) is gone
	endIdle                    // idle for its hold: SSE polling, the client comes back
	endDeadline                // the request's deadline or credentials expiry, or the server shuts down
)

// heldMsg is one message a held stream writes: its SSE event id (""
// for none), the JSON-RPC message, and its sequence number in the log.
type heldMsg struct {
	id   string
	data []byte
	seq  int64
	// quiet: the message says the stream is alive (an events/stream
	// heartbeat), and does not make the stream active (the hold).
	quiet bool
}

// heldBatch is what one read of a held stream's source returns.
type heldBatch struct {
	msgs []heldMsg
	end  bool // the stream ends once msgs are written
	more bool // a full batch: read again at once
}

// heldSource is what one kind of held stream reads and how it ends. Its
// methods are called from the stream's one goroutine.
type heldSource interface {
	// read reads what the stream delivers next; registryAge is how old
	// this process's cached registry hashes may be for the registry
	// check. notify.ErrNotFound: the session is gone. A batch may come
	// with an error (a failed registry check): it is written, and the
	// loop reads again after a back-off.
	read(ctx context.Context, registryAge time.Duration) (heldBatch, error)
	// wrote records that m was written to the client.
	wrote(m heldMsg)
	// delivered runs after a batch is written (more: a full batch).
	delivered(ctx context.Context, more bool)
	// upkeepIn is how long until the source's own upkeep is due, which a
	// stream woken only by the watcher must wake for by itself.
	upkeepIn(now time.Time) time.Duration
	// upkeep does what upkeepIn announced, without a read of the log,
	// and returns what to write then (an events/stream heartbeat).
	upkeep(ctx context.Context) []heldMsg
	// finish writes the stream's last words for why, if any, and records
	// what the stream delivered. It runs once, on every way out.
	finish(ctx context.Context, sse *sseWriter, why heldEnd)
}

// noUpkeep is upkeepIn for a source without upkeep.
const noUpkeep = time.Duration(1<<63 - 1)

// heldStream is one held stream: the loop's settings.
type heldStream struct {
	h   *StreamableHandler
	sse *sseWriter
	src heldSource
	// session is the session whose change-feed entries wake the stream;
	// "" for none: the stream polls every PollInterval.
	session string
	// hold is how long the stream counts as active after it starts or
	// last writes a message; < 0: always active.
	hold time.Duration
	// endIdle ends the stream once it is idle (hold >= 0): SSE polling.
	endIdle bool
	// startIdle starts the stream idle: with nothing to send, it ends
	// after one read (an idle reconnection).
	startIdle bool
	// watchFirst registers with the watcher before the first read
	// (else before the first wait, so that a stream that ends after its
	// first read never starts the watcher).
	watchFirst bool
	// hooks, for tests only, run at the loop's racy points.
	hooks *heldHooks
}

// heldHooks are a test's callbacks at the points of the held-stream loop
// where a wake-up can race it (held_test.go). nil in production.
type heldHooks struct {
	beforeRegister func() // after a read, before the stream registers with the watcher
	afterRead      func() // after a read, before its messages are written
	afterWrite     func() // after a message is written
}

// at runs the hook f if there is one.
func (hs *heldStream) at(f func(*heldHooks) func()) {
	if hs.hooks != nil {
		if g := f(hs.hooks); g != nil {
			g()
		}
	}
}

// run serves the stream until it ends, and returns why (after the
// source's finish).
func (hs *heldStream) run(ctx context.Context) (why heldEnd) {
	h, s := hs.h, hs.h.srv
	now := s.opts.Now
	defer func() { hs.src.finish(ctx, hs.sse, why) }()
	defer metrics.HeldStream(ctx, hs.kind())()

	var deadline <-chan time.Time
	d, ok := h.streamDeadline(ctx)
	if exp, has := credentialsExpiry(ctx); has && (!ok || exp.Before(d)) {
		// The credentials expire first (on the wall clock, as the
		// Authenticator judges them): the client comes back with fresh
		// ones.
		d, ok = exp, true
	}
	if ok {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		deadline = t.C
	}
	start := now()
	lastWrite, lastPoll, active := start, start, start
	if hs.startIdle {
		active = active.Add(-hs.hold)
	}
	idle := func(t time.Time) bool { return hs.hold >= 0 && t.Sub(active) >= hs.hold }

	sw := &streamWatch{}
	defer func() { sw.stop() }()
	watching := hs.session == ""
	register := func() bool {
		hs.at(func(k *heldHooks) func() { return k.beforeRegister })
		watching = true
		sw = s.watch(ctx, hs.session, hs.hold < 0)
		sw.busy(active.Add(hs.hold))
		return sw.wake != nil
	}
	if !watching && hs.watchFirst {
		register()
	}

	// write writes msgs in order; false: the client left.
	write := func(msgs []heldMsg) bool {
		for _, m := range msgs {
			if hs.sse.event(m.id, m.data) != nil {
				return false
			}
			lastWrite = now()
			if !m.quiet {
				active = lastWrite
				sw.busy(active.Add(hs.hold))
			}
			hs.src.wrote(m)
			hs.at(func(k *heldHooks) func() { return k.afterWrite })
		}
		return true
	}

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	poll := true
	var retry readRetry
	for {
		if poll {
			age := s.opts.RegistryRefresh
			if idle(now()) {
				age = max(age, idleRegistryAge)
			}
			b, err := hs.src.read(ctx, age)
			lastPoll = now()
			hs.at(func(k *heldHooks) func() { return k.afterRead })
			switch {
			case err == nil:
				retry.succeeded()
			case ctx.Err() != nil:
				return endLeft
			case errors.Is(err, notify.ErrNotFound):
				return endGone
			default:
				s.log.WarnContext(ctx, "reading a held stream's log", "session", hs.session, "err", err)
				retry.failed(s.opts.PollInterval, lastPoll)
			}
			if !write(b.msgs) {
				return endLeft
			}
			hs.src.delivered(ctx, b.more)
			if b.end {
				return endDone
			}
			if b.more {
				continue
			}
		}
		t := now()
		if hs.endIdle && idle(t) {
			return endIdle
		}
		if t.Sub(lastWrite) >= h.opts.KeepAlive {
			if hs.sse.comment("keepalive") != nil {
				return endLeft
			}
			lastWrite = t
		}
		if !watching {
			if register() {
				poll = true
				continue
			}
			t = now() // the registration may have taken a while
		}
		// Sleep until the next of: the keepalive, the end of the hold,
		// the next poll (without a watcher) or own check and upkeep (with
		// one), a read retry.
		next := h.opts.KeepAlive - t.Sub(lastWrite)
		if hs.endIdle {
			next = min(next, hs.hold-t.Sub(active))
		}
		switch {
		case sw.wake != nil:
			next = min(next, s.idleCheckEvery()-t.Sub(lastPoll), hs.src.upkeepIn(t))
		case idle(t):
			// An idle stream that is not ended idle polls every
			// RetryInterval: the delay after which an idle GET client
			// reconnects, the same latency.
			next = min(next, max(s.opts.PollInterval, h.opts.RetryInterval))
		default:
			next = min(next, s.opts.PollInterval)
		}
		if d, ok := retry.wait(t); ok {
			next = min(next, d)
		}
		timer.Reset(max(next, 0))
		select {
		case <-ctx.Done():
			return endLeft
		case <-h.closing:
			return endDeadline
		case <-deadline:
			return endDeadline
		case <-sw.wake:
			poll = true
		case <-timer.C:
			t := now()
			poll = sw.wake == nil || t.Sub(lastPoll) >= s.idleCheckEvery() || retry.due(t)
			if !poll && !write(hs.src.upkeep(ctx)) {
				return endLeft
			}
		}
	}
}

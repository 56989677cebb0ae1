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
//
// run's frame stays on the request's goroutine's stack while the stream
// waits, under its callers' (net/http's, ServeHTTP's, serveGET's ...): it
// holds only the loop's state (heldLoop) and its wait; the steps are
// methods of heldLoop whose frames are gone by then, as the callers leave
// what opens a stream to functions of its own (openGETStream,
// openListenStream, openEventStream, admit, acceptPOST). The store reads
// that open a stream grow that stack to 16 KiB; Go halves a waiting
// goroutine's stack at a GC only if it uses less than a quarter of it
// (with a guard of 800 bytes: under about 3.2 KiB of frames), else an
// idle stream keeps 16 KiB of stack instead of 8 (docs/held-streams.md,
// Memory).
func (hs *heldStream) run(ctx context.Context) (why heldEnd) {
	defer func() { hs.src.finish(ctx, hs.sse, why) }()
	defer metrics.HeldStream(ctx, hs.kind())()

	var deadline <-chan time.Time
	if t := hs.deadlineTimer(ctx); t != nil {
		defer t.Stop()
		deadline = t.C
	}
	var l heldLoop // not a composite literal: its temporary would double it in the frame
	l.start(ctx, hs)
	defer func() { l.sw.stop() }()
	if !l.watching && hs.watchFirst {
		l.register()
	}

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// One return: with more, the defers above would not be open-coded,
	// and their records would take room in the frame.
loop:
	for {
		next, end := time.Duration(0), false
		if next, why, end = l.step(); end {
			break
		}
		timer.Reset(max(next, 0))
		select {
		case <-ctx.Done():
			why = endLeft
			break loop
		case <-hs.h.closing:
			why = endDeadline
			break loop
		case <-deadline:
			why = endDeadline
			break loop
		case <-l.sw.wake:
			l.poll = true
		case <-timer.C:
			if !l.timedOut() {
				why = endLeft
				break loop
			}
		}
	}
	return why
}

// deadlineTimer returns a timer that fires at the stream's deadline: the
// request's (StreamableOptions.MaxStreamDuration, the Lambda deadline) or
// the expiry of its credentials, whichever comes first; nil for none.
//
//go:noinline
func (hs *heldStream) deadlineTimer(ctx context.Context) *time.Timer {
	d, ok := hs.h.streamDeadline(ctx)
	if exp, has := credentialsExpiry(ctx); has && (!ok || exp.Before(d)) {
		// The credentials expire first (on the wall clock, as the
		// Authenticator judges them): the client comes back with fresh
		// ones.
		d, ok = exp, true
	}
	if !ok {
		return nil
	}
	return time.NewTimer(time.Until(d))
}

// heldLoop is the state of one run of a held stream's loop.
type heldLoop struct {
	hs  *heldStream
	ctx context.Context
	// lastWrite is when the stream last wrote to the client (a message or
	// a keepalive), lastPoll when it last read its source, active when it
	// last wrote a message that makes it active (or started).
	lastWrite, lastPoll, active time.Time
	sw                          *streamWatch
	watching                    bool // registered with the watcher, or polls
	poll                        bool // read the source at the next step
	retry                       readRetry
}

// now is the server's clock.
func (l *heldLoop) now() time.Time { return l.hs.h.srv.opts.Now() }

// start starts the loop of hs, on ctx, and its clocks.
//
//go:noinline
func (l *heldLoop) start(ctx context.Context, hs *heldStream) {
	*l = heldLoop{hs: hs, ctx: ctx, sw: &streamWatch{}, watching: hs.session == "", poll: true}
	start := l.now()
	l.lastWrite, l.lastPoll, l.active = start, start, start
	if l.hs.startIdle {
		l.active = l.active.Add(-l.hs.hold)
	}
}

// idle reports whether the stream is idle at t: it has a hold, and has
// not been active for as long.
func (l *heldLoop) idle(t time.Time) bool {
	return l.hs.hold >= 0 && t.Sub(l.active) >= l.hs.hold
}

// register registers the stream with the watcher; false: it polls.
func (l *heldLoop) register() bool {
	hs := l.hs
	hs.at(func(k *heldHooks) func() { return k.beforeRegister })
	l.watching = true
	l.sw = hs.h.srv.watch(l.ctx, hs.session, hs.hold < 0)
	l.sw.busy(l.active.Add(hs.hold))
	return l.sw.wake != nil
}

// write writes msgs in order; false: the client left.
func (l *heldLoop) write(msgs []heldMsg) bool {
	hs := l.hs
	for _, m := range msgs {
		if hs.sse.event(m.id, m.data) != nil {
			return false
		}
		l.lastWrite = l.now()
		if !m.quiet {
			l.active = l.lastWrite
			l.sw.busy(l.active.Add(hs.hold))
		}
		hs.src.wrote(m)
		hs.at(func(k *heldHooks) func() { return k.afterWrite })
	}
	return true
}

// step runs the loop up to its next wait: it reads the source if a read
// is due (again at once after a full batch), writes what it read, ends
// an idle stream that ends idle, writes a keepalive when one is due and
// registers with the watcher (then reads once more). It returns how long
// to wait, or why the stream ends (end).
//
//go:noinline
func (l *heldLoop) step() (next time.Duration, why heldEnd, end bool) {
	hs := l.hs
	h, s := hs.h, hs.h.srv
	for {
		if l.poll {
			age := s.opts.RegistryRefresh
			if l.idle(l.now()) {
				age = max(age, idleRegistryAge)
			}
			b, err := hs.src.read(l.ctx, age)
			l.lastPoll = l.now()
			hs.at(func(k *heldHooks) func() { return k.afterRead })
			switch {
			case err == nil:
				l.retry.succeeded()
			case l.ctx.Err() != nil:
				return 0, endLeft, true
			case errors.Is(err, notify.ErrNotFound):
				return 0, endGone, true
			default:
				s.log.WarnContext(l.ctx, "reading a held stream's log", "session", hs.session, "err", err)
				l.retry.failed(s.opts.PollInterval, l.lastPoll)
			}
			if !l.write(b.msgs) {
				return 0, endLeft, true
			}
			hs.src.delivered(l.ctx, b.more)
			if b.end {
				return 0, endDone, true
			}
			if b.more {
				continue
			}
		}
		t := l.now()
		if hs.endIdle && l.idle(t) {
			return 0, endIdle, true
		}
		if t.Sub(l.lastWrite) >= h.opts.KeepAlive {
			if hs.sse.comment("keepalive") != nil {
				return 0, endLeft, true
			}
			l.lastWrite = t
		}
		if !l.watching {
			if l.register() {
				l.poll = true
				continue
			}
			t = l.now() // the registration may have taken a while
		}
		// Sleep until the next of: the keepalive, the end of the hold,
		// the next poll (without a watcher) or own check and upkeep (with
		// one), a read retry.
		next = h.opts.KeepAlive - t.Sub(l.lastWrite)
		if hs.endIdle {
			next = min(next, hs.hold-t.Sub(l.active))
		}
		switch {
		case l.sw.wake != nil:
			next = min(next, s.idleCheckEvery()-t.Sub(l.lastPoll), hs.src.upkeepIn(t))
		case l.idle(t):
			// An idle stream that is not ended idle polls every
			// RetryInterval: the delay after which an idle GET client
			// reconnects, the same latency.
			next = min(next, max(s.opts.PollInterval, h.opts.RetryInterval))
		default:
			next = min(next, s.opts.PollInterval)
		}
		if d, ok := l.retry.wait(t); ok {
			next = min(next, d)
		}
		return next, 0, false
	}
}

// timedOut runs when the wait's timer fires: it decides whether the next
// step reads (without a watcher, at the own check, or for a read retry)
// and otherwise does the source's upkeep. false: the client left.
//
//go:noinline
func (l *heldLoop) timedOut() bool {
	t := l.now()
	l.poll = l.sw.wake == nil || t.Sub(l.lastPoll) >= l.hs.h.srv.idleCheckEvery() || l.retry.due(t)
	return l.poll || l.write(l.hs.src.upkeep(l.ctx))
}

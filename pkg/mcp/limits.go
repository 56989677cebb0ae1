package mcp

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Limits bound what one client can make a server hold or produce. Every
// limit is checked before anything is stored; a client over a limit gets
// an error that names it. Zero fields mean the defaults (DefaultLimits).
type Limits struct {
	// MaxClientInfoBytes bounds the capabilities and clientInfo of an
	// initialize request together, as JSON (-32602 beyond it).
	MaxClientInfoBytes int
	// MaxPromptArgumentBytes bounds each argument of prompts/get (-32602).
	MaxPromptArgumentBytes int
	// MaxPromptBytes bounds the rendered text of a registry prompt
	// (-32602): placeholders cannot multiply an argument without bound.
	MaxPromptBytes int
	// MaxSubscriptionURIBytes bounds a resources/subscribe URI (-32602).
	// It is at most notify.MaxURIBytes, which both stores enforce.
	MaxSubscriptionURIBytes int
	// MaxSubscriptions bounds the subscriptions of one session (-32602).
	MaxSubscriptions int
	// MaxInFlightPerSession bounds the requests of one session running at
	// once on one process (HTTP 429 with Retry-After beyond it).
	MaxInFlightPerSession int
	// MaxInFlight bounds the requests running at once on one process, all
	// sessions together (HTTP 429 with Retry-After beyond it).
	MaxInFlight int
	// MaxStreamsPerSession bounds the SSE streams (GET and resumed) of
	// one session open at once on one process (HTTP 429 beyond it).
	MaxStreamsPerSession int
	// BodyReadTimeout bounds the time to read a POST body where the
	// transport allows it (the local HTTP server): a body trickled slower
	// gets HTTP 408.
	BodyReadTimeout time.Duration
	// MaxRequestsPerMinute bounds the HTTP requests of one principal per
	// minute (a fixed window), over all processes sharing the store
	// (HTTP 429 with Retry-After beyond it).
	MaxRequestsPerMinute int
	// MaxSessionsPerHour bounds the sessions one principal creates per
	// hour (a fixed window), over all processes sharing the store (HTTP
	// 429 with Retry-After beyond it). With the idle timeout this bounds
	// the sessions, subscriptions and stored bytes a principal holds.
	MaxSessionsPerHour int
	// MaxSessionsPerPrincipal bounds the live sessions of one principal,
	// over all processes sharing the store, when the store implements
	// notify.SessionCounter (both stores do): initialize beyond it gets
	// HTTP 429 with Retry-After and stores nothing. With the per-session
	// bounds it bounds what a principal holds (docs/limits.md).
	MaxSessionsPerPrincipal int
	// MaxListensPerPrincipal bounds the open subscriptions/listen streams
	// (2026 era) and events/stream streams (either era) of one
	// principal together, parked ones included, over all
	// processes sharing the store, when the store implements
	// notify.SessionCounter: a listen beyond it gets HTTP 429 with
	// Retry-After and stores nothing. Each stream has at most
	// MaxListenSubscriptions resource subscriptions, so this bounds their
	// total too. Listen streams do not count against
	// MaxSessionsPerPrincipal.
	MaxListensPerPrincipal int
	// MaxTasksPerPrincipal bounds the live (not terminal, not expired)
	// tasks of one principal, over all processes sharing the store: a
	// tools/call that would create one more gets -32600 and creates
	// nothing.
	MaxTasksPerPrincipal int
	// MaxTaskResultBytes bounds the encoded result of a task: a larger
	// one fails the task (status failed, error -32603 naming the limit).
	MaxTaskResultBytes int
	// MaxTaskBytesPerPrincipal bounds the stored records of one
	// principal's tasks that have not expired (ended ones included: they
	// are kept for their TaskTTL), over all processes sharing the store:
	// a tools/call that would create a task while they hold this much
	// gets -32600 naming the limit and creates nothing. Checked at
	// creation, so the tasks still working may add their results beyond
	// it (at most MaxTasksPerPrincipal records of notify.MaxItemBytes).
	MaxTaskBytesPerPrincipal int
	// MaxTaskInputRounds bounds how often one task may ask the client for
	// input: one more round fails the task (-32603).
	MaxTaskInputRounds int
	// TaskTTL is how long a task is kept from its creation (its ttlMs);
	// tasks/get finds it no more after that (-32602).
	TaskTTL time.Duration
}

// DefaultLimits are the limits of a server whose options leave them zero.
var DefaultLimits = Limits{
	MaxClientInfoBytes:      64 << 10,
	MaxPromptArgumentBytes:  64 << 10,
	MaxPromptBytes:          1 << 20,
	MaxSubscriptionURIBytes: 1024,
	MaxSubscriptions:        100,
	MaxInFlightPerSession:   16,
	MaxInFlight:             256,
	MaxStreamsPerSession:    4,
	BodyReadTimeout:         30 * time.Second,
	MaxRequestsPerMinute:    6000,
	MaxSessionsPerHour:      1000,
	MaxSessionsPerPrincipal: 100,
	MaxListensPerPrincipal:  20,
	MaxTasksPerPrincipal:    32,
	MaxTaskResultBytes:      256 << 10,
	// 8 MiB: 32 results of the 256 KiB limit.
	MaxTaskBytesPerPrincipal: 8 << 20,
	MaxTaskInputRounds:       16,
	TaskTTL:                  time.Hour,
}

// withDefaults returns l with every zero (or negative) field set to its
// default, and URIs capped at what the stores accept.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.MaxClientInfoBytes, d.MaxClientInfoBytes)
	set(&l.MaxPromptArgumentBytes, d.MaxPromptArgumentBytes)
	set(&l.MaxPromptBytes, d.MaxPromptBytes)
	set(&l.MaxSubscriptionURIBytes, d.MaxSubscriptionURIBytes)
	set(&l.MaxSubscriptions, d.MaxSubscriptions)
	set(&l.MaxInFlightPerSession, d.MaxInFlightPerSession)
	set(&l.MaxInFlight, d.MaxInFlight)
	set(&l.MaxStreamsPerSession, d.MaxStreamsPerSession)
	set(&l.MaxRequestsPerMinute, d.MaxRequestsPerMinute)
	set(&l.MaxSessionsPerHour, d.MaxSessionsPerHour)
	set(&l.MaxSessionsPerPrincipal, d.MaxSessionsPerPrincipal)
	set(&l.MaxListensPerPrincipal, d.MaxListensPerPrincipal)
	set(&l.MaxTasksPerPrincipal, d.MaxTasksPerPrincipal)
	set(&l.MaxTaskResultBytes, d.MaxTaskResultBytes)
	set(&l.MaxTaskBytesPerPrincipal, d.MaxTaskBytesPerPrincipal)
	set(&l.MaxTaskInputRounds, d.MaxTaskInputRounds)
	if l.TaskTTL <= 0 {
		l.TaskTTL = d.TaskTTL
	}
	if l.BodyReadTimeout <= 0 {
		l.BodyReadTimeout = d.BodyReadTimeout
	}
	l.MaxSubscriptionURIBytes = min(l.MaxSubscriptionURIBytes, notify.MaxURIBytes)
	return l
}

// gauge counts what is open at once, in all and per key, against bounds.
// Safe for concurrent use.
type gauge struct {
	mu    sync.Mutex
	total int
	byKey map[string]int
}

// acquire takes one slot for key unless that would exceed perKey for the
// key or total in all (total 0: no overall bound). It reports whether it
// took one; a taken slot is given back with release.
func (g *gauge) acquire(key string, perKey, total int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byKey == nil {
		g.byKey = map[string]int{}
	}
	if g.byKey[key] >= perKey || (total > 0 && g.total >= total) {
		return false
	}
	g.byKey[key]++
	g.total++
	return true
}

func (g *gauge) release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byKey[key]--; g.byKey[key] <= 0 {
		delete(g.byKey, key)
	}
	g.total--
}

// tooMany is a refusal of a request over a bound (429) with Retry-After:
// the client may try again soon.
func tooMany(msg string) *refusal {
	return &refusal{kind: errTooManyRequests, msg: "Too Many Requests: " + msg, retryAfter: 1}
}

// readBody reads a POST body within max bytes and, where the transport
// supports read deadlines, within timeout. The error is the refusal to
// answer: 413, 408 or 400.
func readBody(w http.ResponseWriter, r *http.Request, max int64, timeout time.Duration) ([]byte, *refusal) {
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err == nil {
		if deadline {
			rc.SetReadDeadline(time.Time{}) // the stream that may follow is not bound by it
		}
		return body, nil
	}
	// The deadline stays: the server must not wait for the rest of a
	// trickled body before it answers and closes.
	w.Header().Set("Connection", "close")
	var tooBig *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooBig):
		return nil, refuse(errBodyTooLarge, "Request Entity Too Large: the body exceeds "+itoa(max)+" bytes")
	case errors.As(err, &ne) && ne.Timeout():
		return nil, refuse(errBodyTimeout, "Request Timeout: the body was not read within "+timeout.String())
	}
	return nil, refuse(errUnreadableBody, "Bad Request: reading body: "+err.Error())
}

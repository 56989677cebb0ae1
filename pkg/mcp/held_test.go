package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// The held-stream loop (held.go) under testing/synctest: the clock is the
// bubble's, so each test runs its minutes of stream life at once and
// asserts when, in the stream's own time, a message arrives. The store is
// a real SQLite file; the writes of "another process" go through a second
// Store on the same file, so they reach the stream only through the change
// feed, as they do in production.

// heldPoll is the tests' PollInterval: the watcher's pace while a stream
// is active.
const heldPoll = 100 * time.Millisecond

// heldWithin is how soon after a write a woken stream must have sent it:
// a few of the watcher's reads. A lost wake-up waits for the stream's own
// check (idleCheck, 10 minutes) instead.
const heldWithin = 5 * heldPoll

// syncRecorder is an http.ResponseWriter whose body can be read while the
// handler writes it.
type syncRecorder struct {
	mu   sync.Mutex
	hdr  http.Header
	code int
	buf  bytes.Buffer
}

func newSyncRecorder() *syncRecorder { return &syncRecorder{hdr: http.Header{}} }

func (r *syncRecorder) Header() http.Header { return r.hdr }

func (r *syncRecorder) WriteHeader(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.code == 0 {
		r.code = code
	}
}

func (r *syncRecorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(b)
}

func (r *syncRecorder) Flush() {}

func (r *syncRecorder) body() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// got returns the n of every test message the stream sent (heldMessage),
// in order.
func (r *syncRecorder) got() []int {
	var ns []int
	for line := range strings.Lines(r.body()) {
		var n int
		if _, err := fmt.Sscanf(line, `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%d}}`, &n); err == nil {
			ns = append(ns, n)
		}
	}
	return ns
}

// heldMessage is the n-th test message appended to a session's log.
func heldMessage(n int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%d}}`, n)
}

// heldRig is a server on a SQLite file and another process's store on
// the same file, inside a synctest bubble.
type heldRig struct {
	t     *testing.T
	st    *sqlitestore.Store // the server's
	other *sqlitestore.Store // another process's
	srv   *Server
	h     *StreamableHandler
	n     atomic.Int64 // test messages written
}

// newHeldRig starts the rig; wrap, if not nil, wraps the server's store.
func newHeldRig(t *testing.T, hold time.Duration, wrap func(Store) Store) *heldRig {
	path := filepath.Join(t.TempDir(), "held.db")
	st, err := sqlitestore.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := sqlitestore.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var store Store = st
	if wrap != nil {
		store = wrap(st)
	}
	srv := NewServer(&Implementation{Name: "held", Version: "1"}, store, &ServerOptions{PollInterval: heldPoll,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	h := NewStreamableHandler(srv, &StreamableOptions{StreamHold: hold})
	r := &heldRig{t: t, st: st, other: other, srv: srv, h: h}
	t.Cleanup(func() {
		h.Close()
		// The watcher ends at its next read without streams.
		time.Sleep(time.Second)
		other.Close()
		st.Close()
	})
	return r
}

// session creates a 2025-11-25 session.
func (r *heldRig) session() string {
	now := time.Now()
	id := randomID(16)
	if err := r.st.CreateSession(context.Background(), &notify.Session{ID: id, ProtocolVersion: "2025-11-25", Initialized: true,
		CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
		r.t.Fatal(err)
	}
	return id
}

// heldGET is a GET stream being served.
type heldGET struct {
	rec  *syncRecorder
	stop context.CancelFunc
	done chan struct{}
}

// ended reports whether the stream's handler returned.
func (g *heldGET) ended() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// get opens a GET stream of session id and lets it settle (every
// goroutine of the bubble blocked: the stream waits).
func (r *heldRig) get(id string) *heldGET {
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	g := &heldGET{rec: newSyncRecorder(), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		r.h.ServeHTTP(g.rec, req)
	}()
	r.t.Cleanup(func() { cancel(); <-g.done })
	synctest.Wait()
	return g
}

// write appends the next test message to session id's log through the
// other process's store, and returns its n.
func (r *heldRig) write(id string) int {
	n := int(r.n.Add(1))
	if _, _, err := r.other.Append(context.Background(), id, notify.SessionStream, [][]byte{heldMessage(n)}, nil); err != nil {
		r.t.Error(err)
	}
	return n
}

// expect waits up to heldWithin of the bubble's time for the stream to
// have sent exactly want, in order.
func (r *heldRig) expect(g *heldGET, what string, want ...int) {
	r.t.Helper()
	deadline := time.Now().Add(heldWithin)
	for !slices.Equal(g.rec.got(), want) && time.Now().Before(deadline) {
		time.Sleep(heldPoll / 10)
	}
	if got := g.rec.got(); !slices.Equal(got, want) {
		r.t.Fatalf("%s: the stream sent %v within %v, want %v", what, got, heldWithin, want)
	}
}

// TestHeldLoopWakeBeforeRegistration: a change committed after the
// stream's first read and before it registers with the watcher (the
// watcher starts at the feed's end then, past the change) is read by the
// read that follows the registration.
func TestHeldLoopWakeBeforeRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHeldRig(t, -1, nil)
		id := r.session()
		var once atomic.Bool
		r.h.heldHooks = &heldHooks{beforeRegister: func() {
			if once.CompareAndSwap(false, true) {
				r.write(id)
			}
		}}
		g := r.get(id)
		r.expect(g, "a change before the registration", 1)
		n := r.write(id)
		r.expect(g, "a later change", 1, n)
	})
}

// TestHeldLoopWakeDuringRead: a wake-up that arrives while the stream
// reads (a change committed after the read's snapshot) is kept, and the
// stream reads again.
func TestHeldLoopWakeDuringRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHeldRig(t, -1, nil)
		id := r.session()
		var armed atomic.Bool
		r.h.heldHooks = &heldHooks{afterRead: func() {
			if armed.CompareAndSwap(true, false) {
				r.write(id)
				time.Sleep(2 * heldPoll) // the watcher reads the feed and wakes the stream now
			}
		}}
		g := r.get(id)
		armed.Store(true)
		r.write(id) // wakes the stream, whose read writes 2 (hook)
		r.expect(g, "a change during the read", 1, 2)
	})
}

// TestHeldLoopWakeDuringWrite: a wake-up that arrives while the stream
// writes to its client is kept.
func TestHeldLoopWakeDuringWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHeldRig(t, -1, nil)
		id := r.session()
		var armed atomic.Bool
		r.h.heldHooks = &heldHooks{afterWrite: func() {
			if armed.CompareAndSwap(true, false) {
				r.write(id)
				time.Sleep(2 * heldPoll)
			}
		}}
		g := r.get(id)
		armed.Store(true)
		r.write(id)
		r.expect(g, "a change during the write", 1, 2)
	})
}

// TestHeldLoopFullFeedRead: the stream of the last session of a fan-out
// larger than one feed read (notify.MaxChangesRead) is woken by the reads
// that follow the first at once, not one page per PollInterval.
func TestHeldLoopFullFeedRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHeldRig(t, -1, nil)
		ids := make([]string, notify.MaxChangesRead+10)
		const uri = "events://pages"
		for i := range ids {
			ids[i] = r.session()
			if err := r.st.Subscribe(context.Background(), ids[i], uri); err != nil {
				t.Fatal(err)
			}
		}
		last := ids[len(ids)-1]
		g := r.get(last)
		for chunk := range slices.Chunk(ids, notify.MaxAppendEach) {
			if _, err := r.other.AppendEach(context.Background(), chunk, uri, 1, func(*notify.Session, notify.Position) [][]byte {
				return [][]byte{heldMessage(7)}
			}); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		for len(g.rec.got()) == 0 && time.Since(start) < time.Minute {
			time.Sleep(heldPoll / 10)
		}
		// Two pages at one per poll: two polls; at once: one.
		if took := time.Since(start); len(g.rec.got()) != 1 || took > heldPoll+heldPoll/2 {
			t.Fatalf("the last of %d changed sessions got %v after %v; want its message within one poll (%v)", len(ids), g.rec.got(), took, heldPoll)
		}
	})
}

// overflowOnce is a store whose next change feed read reports
// an overflow in place of the sessions, as dynamostore does when more
// changed than one read returns.
type overflowOnce struct {
	Store
	armed atomic.Bool
}

func (o *overflowOnce) Changes(ctx context.Context, cursor string) (notify.ChangeSet, string, error) {
	ch, next, err := o.Store.Changes(ctx, cursor)
	if err == nil && cursor != "" && len(ch.Sessions) > 0 && o.armed.CompareAndSwap(true, false) {
		ch = notify.ChangeSet{Overflow: true}
	}
	return ch, next, err
}

// TestHeldLoopOverflow: a feed read that overflows (names no session)
// wakes every stream, and each reads what is new for it.
func TestHeldLoopOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var feed *overflowOnce
		r := newHeldRig(t, -1, func(st Store) Store { feed = &overflowOnce{Store: st}; return feed })
		a, b := r.session(), r.session()
		ga, gb := r.get(a), r.get(b)
		feed.armed.Store(true)
		na := r.write(a)
		r.expect(ga, "after an overflow", na)
		r.expect(gb, "after an overflow, another session", []int(nil)...)
		nb := r.write(b)
		r.expect(gb, "after an overflow, a later change", nb)
	})
}

// failingFeed is a store whose change feed reads fail while failing is
// set.
type failingFeed struct {
	Store
	failing atomic.Bool
	fails   atomic.Int64
}

func (f *failingFeed) Changes(ctx context.Context, cursor string) (notify.ChangeSet, string, error) {
	if f.failing.Load() && cursor != "" {
		f.fails.Add(1)
		return notify.ChangeSet{}, "", errors.New("the feed is unavailable")
	}
	return f.Store.Changes(ctx, cursor)
}

// TestHeldLoopFeedFails: while the change feed cannot be read, a change
// reaches the stream once the feed is read again (the watcher reads from
// its cursor: nothing is lost), and, if the feed stays unreadable longer
// than what it keeps, the watcher wakes every stream to read its log.
func TestHeldLoopFeedFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var feed *failingFeed
		r := newHeldRig(t, -1, func(st Store) Store { feed = &failingFeed{Store: st}; return feed })
		id := r.session()
		g := r.get(id)

		// A short outage: the change arrives after it, from the feed.
		feed.failing.Store(true)
		n1 := r.write(id)
		time.Sleep(5 * time.Second)
		if got := g.rec.got(); len(got) != 0 {
			t.Fatalf("the stream sent %v while the feed failed, before any check of its own", got)
		}
		feed.failing.Store(false)
		r.expect(g, "after a short outage of the feed", n1)

		// A long one: past changeFeedStale every stream reads by itself.
		feed.failing.Store(true)
		n2 := r.write(id)
		start := time.Now()
		for len(g.rec.got()) < 2 && time.Since(start) < 2*changeFeedStale {
			time.Sleep(heldPoll)
		}
		if took := time.Since(start); !slices.Equal(g.rec.got(), []int{n1, n2}) || took > changeFeedStale+time.Second {
			t.Fatalf("with the feed unreadable, the stream sent %v after %v; want %v within %v (changeFeedStale)", g.rec.got(), took, []int{n1, n2}, changeFeedStale)
		}
		if feed.fails.Load() == 0 {
			t.Fatal("the feed never failed: the test tested nothing")
		}
	})
}

// failingSessionReads is a store whose reads of sessions and their logs
// fail while failing is set.
type failingSessionReads struct {
	Store
	failing atomic.Bool
}

func (f *failingSessionReads) GetSession(ctx context.Context, id string) (*notify.Session, error) {
	if f.failing.Load() {
		return nil, errors.New("the store is unavailable")
	}
	return f.Store.GetSession(ctx, id)
}

func (f *failingSessionReads) ReadEvents(ctx context.Context, id, stream string, after int64, limit int) ([]notify.Event, error) {
	if f.failing.Load() {
		return nil, errors.New("the store is unavailable")
	}
	return f.Store.ReadEvents(ctx, id, stream, after, limit)
}

// TestHeldLoopReadFails: a woken stream whose read fails reads again
// after a back-off (readRetry), not at its next check minutes later.
func TestHeldLoopReadFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reads *failingSessionReads
		r := newHeldRig(t, -1, func(st Store) Store { reads = &failingSessionReads{Store: st}; return reads })
		id := r.session()
		g := r.get(id)
		reads.failing.Store(true)
		n := r.write(id)
		time.Sleep(time.Second) // woken, and the read failed
		if got := g.rec.got(); len(got) != 0 {
			t.Fatalf("the stream sent %v with its reads failing", got)
		}
		reads.failing.Store(false)
		start := time.Now()
		for len(g.rec.got()) == 0 && time.Since(start) < time.Hour {
			time.Sleep(heldPoll)
		}
		if took := time.Since(start); !slices.Equal(g.rec.got(), []int{n}) || took > maxReadRetry {
			t.Fatalf("after its read failed the stream sent %v %v later; want %v within the retry back-off (%v)", g.rec.got(), took, []int{n}, maxReadRetry)
		}
	})
}

// TestHeldLoopTakeover: a fresh GET stream of the session ends the one
// before it, which writes nothing more; the new one delivers what follows,
// each message once.
func TestHeldLoopTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHeldRig(t, -1, nil)
		id := r.session()
		first := r.get(id)
		n1 := r.write(id)
		r.expect(first, "before the takeover", n1)
		second := r.get(id) // on this process: it wakes the first at once
		synctest.Wait()
		if !first.ended() {
			t.Fatal("the stream taken over still runs")
		}
		n2 := r.write(id)
		r.expect(second, "after the takeover", n2)
		r.expect(first, "the stream taken over", n1)
	})
}

// TestHeldLoopHoldAndKeepalive: on the injected clock, an idle GET stream
// held for hold sends keepalives every KeepAlive and ends with "retry:"
// at its hold, and a message restarts the hold.
func TestHeldLoopHoldAndKeepalive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hold = time.Minute
		r := newHeldRig(t, hold, nil)
		id := r.session()
		g := r.get(id)
		time.Sleep(30 * time.Second)
		n := r.write(id)
		r.expect(g, "a message while held", n)
		written := time.Now()
		for !g.ended() && time.Since(written) < 10*time.Minute {
			time.Sleep(time.Second)
		}
		if took := time.Since(written); !g.ended() || took < hold || took > hold+2*time.Second {
			t.Fatalf("the stream ended %v after its last message (ended: %v); want its hold %v", took, g.ended(), hold)
		}
		body := g.rec.body()
		if k := strings.Count(body, ": keepalive"); k != 3 { // 25 s, 50 s after the message, and 25 s before it
			t.Errorf("%d keepalives in %v of stream; want 3 (KeepAlive 25 s)", k, time.Since(written)+30*time.Second)
		}
		if !strings.HasSuffix(body, "retry: 1000\ndata: \n\n") && !strings.Contains(body[strings.LastIndex(body, "id: "):], "retry: 1000") {
			t.Errorf("the stream did not end with an id and retry:\n%s", body)
		}
	})
}

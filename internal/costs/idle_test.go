package costs

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// sseResult is what one GET stream gave before the server ended it.
type sseResult struct {
	lastID string
	retry  time.Duration
	data   []string
	held   time.Duration // from sending the request to the end of the stream
}

// getStream opens a GET stream (resuming from lastID when set) and reads
// it until the server ends it.
func getStream(tb testing.TB, url, sid, lastID string) sseResult {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		tb.Fatalf("GET (Last-Event-ID %q): status %d", lastID, resp.StatusCode)
	}
	res := sseResult{lastID: lastID}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		field, value, _ := strings.Cut(sc.Text(), ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			res.lastID = value
		case "retry":
			ms, _ := strconv.Atoi(value)
			res.retry = time.Duration(ms) * time.Millisecond
		case "data":
			if value != "" {
				res.data = append(res.data, value)
			}
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("reading GET stream: %v", err)
	}
	res.held = time.Since(start)
	return res
}

// idleServer serves the shipped configuration (dynamic registries, the
// default registry refresh), with streamOpts, except that one principal
// may hold as many sessions as the cost model's subscribers need.
func idleServer(tb testing.TB, b backend, streamOpts *mcp.StreamableOptions) string {
	url, _ := idleHandler(tb, b, streamOpts)
	return url
}

// idleHandler is idleServer, with its handler (whose Close ends its
// streams: a listen stream parks, as at an invocation's deadline).
func idleHandler(tb testing.TB, b backend, streamOpts *mcp.StreamableOptions) (string, *mcp.StreamableHandler) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpush", Version: "costs"}, b.store, &mcp.ServerOptions{
		DynamicRegistries: true,
		Limits:            mcp.Limits{MaxSessionsPerPrincipal: 100_000, MaxSessionsPerHour: 100_000, MaxListensPerPrincipal: 100_000},
	})
	eventtools.Add(srv, b.store, nil)
	h := mcp.NewStreamableHandler(srv, streamOpts)
	ts := httptest.NewServer(h)
	tb.Cleanup(func() { ts.Close(); h.Close() })
	return ts.URL, h
}

// idleFigures are the measured costs of an idle client.
type idleFigures struct {
	retry         time.Duration
	cycles        int
	reads, writes float64       // store requests per reconnection
	rru, wru      float64       // their request units
	sessionReads  float64       // of which reads of the session
	registryReads float64       // of which reads of the registry hashes (per process, shared)
	held          time.Duration // mean invocation of a reconnection
	detail        string
	dollars       float64 // per month
	invocations   float64 // per month
	delivered     bool    // an event appended while idle came on the next reconnection
	latency       time.Duration
}

// measureIdle follows an idle client the way the Go and TypeScript SDKs
// do: after the server ends its GET stream with retry:, it reconnects after
// the retry delay with Last-Event-ID. It counts the store requests of
// cycles reconnections, then appends one message to the session's GET
// stream log (as event fan-out does) right after a reconnection and checks
// that the next reconnection delivers it.
func measureIdle(tb testing.TB, b backend, cycles int) idleFigures {
	url := idleServer(tb, b, &mcp.StreamableOptions{StreamHold: 100 * time.Millisecond})
	sid, _ := post(tb, url, "", initReq)
	post(tb, url, sid, initNote)
	post(tb, url, sid, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"events://orders"}}`)
	first := getStream(tb, url, sid, "") // fresh: takes over, holds StreamHold
	if first.retry <= 0 || first.lastID == "" {
		tb.Fatalf("the fresh GET stream ended without an id and retry: %+v", first)
	}
	f := idleFigures{retry: first.retry, cycles: cycles}
	last := first
	b.reset()
	var held time.Duration
	ids := map[string]bool{}
	for range cycles {
		time.Sleep(last.retry)
		res := getStream(tb, url, sid, last.lastID)
		if len(res.data) > 0 {
			tb.Fatalf("an idle reconnection delivered %q", res.data)
		}
		if ids[res.lastID] || res.lastID == last.lastID {
			tb.Errorf("reconnection %d repeated the event id %q: a client that counts reconnections without a new id gives up", len(ids), res.lastID)
		}
		ids[res.lastID] = true
		held += res.held
		last = res
	}
	r, w, d := b.tally.counts()
	f.reads, f.writes = float64(r)/float64(cycles), float64(w)/float64(cycles)
	f.sessionReads = float64(b.tally.count(b.sessionRead)) / float64(cycles)
	f.registryReads = float64(b.tally.count(b.registryRead)) / float64(cycles)
	f.held = held / time.Duration(cycles)
	f.detail = d
	rru, wru := b.units()
	f.rru, f.wru = rru/float64(cycles), wru/float64(cycles)
	f.dollars, f.invocations = idleMonth(f.retry, f.held, f.rru, f.wru)

	msg := `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"events://orders"}}`
	if _, _, err := b.store.Append(context.Background(), sid, notify.SessionStream, [][]byte{[]byte(msg)}, nil); err != nil {
		tb.Fatal(err)
	}
	appended := time.Now()
	time.Sleep(last.retry)
	res := getStream(tb, url, sid, last.lastID)
	f.latency = time.Since(appended) - res.held/2
	f.delivered = len(res.data) == 1 && res.data[0] == msg
	if !f.delivered {
		tb.Errorf("the reconnection after an append delivered %q, want the appended message", res.data)
	}
	return f
}

// TestIdleClient checks the idle-client target: an idle client's
// reconnections make at most one store read and no write each, its event
// ids change every time, the next reconnection delivers what was appended
// meanwhile, and the month of reconnections, priced from the counted
// request units and the measured invocation time, stays under $1.00.
func TestIdleClient(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips the tests that start moto_server")
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			const cycles = 10
			f := measureIdle(t, b, cycles)
			// One read of the session per reconnection; the process's
			// registry hashes, read at most once per 10 s by idle
			// reconnections (the only requests here), add at most two
			// reads in 10 reconnections.
			if f.sessionReads > 1 || f.registryReads > 2.0/cycles || f.reads > f.sessionReads+f.registryReads || f.writes > 0 {
				t.Errorf("an idle reconnection made %.2g reads (%.2g of the session, %.2g of the registry hashes) and %.2g writes (%s); want one read of the session, at most one registry read per 10 s, and no write",
					f.reads, f.sessionReads, f.registryReads, f.writes, f.detail)
			}
			// The invocation time measured here is loopback's (moto's on
			// DynamoDB, which varies with the machine's load): the check
			// is that the counted requests leave room for a 15 ms
			// invocation, about twice a warm Lambda invocation that makes
			// one DynamoDB Query, within $1.00 a month.
			if room := maxIdleInvocation(f.retry, f.rru, f.wru, 1.00); room < 15*time.Millisecond {
				t.Errorf("with %.2g RRU and %.2g WRU per reconnection every %v, an idle client stays under $1.00 a month only if each invocation takes less than %v; want room for 15ms",
					f.rru, f.wru, f.retry, room)
			}
			t.Logf("%s: idle reconnection every %v: %.2g reads, %.2g writes (%s; %.2g RRU, %.2g WRU), %v held; $%.2f per client-month; an event appended while idle arrived after %v",
				b.name, f.retry, f.reads, f.writes, f.detail, f.rru, f.wru, f.held.Round(time.Millisecond), f.dollars, f.latency.Round(time.Millisecond))
		})
	}
}

// maxIdleInvocation is the longest invocation an idle client's
// reconnection may take for the client to cost at most budget dollars a
// month.
func maxIdleInvocation(retry time.Duration, rru, wru, budget float64) time.Duration {
	lo, hi := time.Duration(0), retry
	if d, _ := idleMonth(retry, lo, rru, wru); d > budget {
		return 0
	}
	for hi-lo > 100*time.Microsecond {
		mid := (lo + hi) / 2
		if d, _ := idleMonth(retry, mid, rru, wru); d > budget {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo
}

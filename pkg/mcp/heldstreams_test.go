package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/heldclients"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
)

func TestMain(m *testing.M) {
	heldclients.Main() // TestIdleHeldStreamReads's clients
	code := m.Run()
	moto.Stop()
	os.Exit(code)
}

// heldStore is a store flavour for the held-stream tests: open returns a
// new Store on one shared backing database each time it is called (a
// Store of its own per "process").
type heldStore struct {
	name string
	open func(t *testing.T) storeconfig.Store
}

// heldStores are SQLite (a file) and DynamoDB (moto, one table).
func heldStores(t *testing.T) []heldStore {
	path := filepath.Join(t.TempDir(), "held.db")
	return []heldStore{
		{"sqlite", func(t *testing.T) storeconfig.Store {
			st, err := sqlitestore.New(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
		{"dynamodb", func() func(t *testing.T) storeconfig.Store {
			var table string
			return func(t *testing.T) storeconfig.Store {
				endpoint := moto.Start(t)
				client := moto.NewClient(context.Background(), endpoint)
				if table == "" {
					table = fmt.Sprintf("held-%d", time.Now().UnixNano())
					if err := dynamostore.CreateTable(context.Background(), client, table); err != nil {
						t.Fatal(err)
					}
				}
				return dynamostore.New(client, table, nil)
			}
		}()},
	}
}

// heldServer serves a server on st whose GET streams are held hold.
func heldServer(t testing.TB, st mcp.Store, hold time.Duration, opts ...func(*mcp.ServerOptions)) string {
	so := &mcp.ServerOptions{
		DynamicRegistries: true,
		Limits:            mcp.Limits{MaxSessionsPerPrincipal: 100_000, MaxSessionsPerHour: 100_000, MaxRequestsPerMinute: 1_000_000, MaxListensPerPrincipal: 100_000},
	}
	for _, o := range opts {
		o(so)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "held", Version: "1"}, st, so)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "events://{topic}", Name: "events"},
		func(context.Context, *mcp.ServerRequest[*mcp.ReadResourceParams]) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
	// TestHeldStreamWakeups's tools: one that waits for the client's
	// answer to a sampling request, one that runs until cancelled.
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "model said " + string(res.Content)}}}, nil, nil
	})
	srv.AddTool(&mcp.Tool{Name: "block"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not cancelled"}}}, nil
		}
	})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, StreamHold: hold})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	return ts.URL
}

// publish ingests one event on topic through st, as the SNS ingest does.
func publish(t *testing.T, st mcp.Store, topic, id string, data any) {
	t.Helper()
	msg, _ := json.Marshal(map[string]any{"type": "event", "topic": topic, "data": data})
	ingestRaw(t, st, id, string(msg))
}

// TestHeldStreamsAtScale is the regression test of issue 17's stuck
// streams: hundreds of held streams opened concurrently on one process
// (half 2025-11-25 GET streams, half 2026-07-28 listen streams, all on
// events://T), on SQLite and on DynamoDB, each with two events ingested
// by another process while they are idle: every stream gets each event
// exactly once (GET streams: both notifications/message in sequence
// order and two resources/updated; listen streams: two
// resources/updated), within the bound, and every GET stream, idle after
// the second event, ends at its hold and not before.
func TestHeldStreamsAtScale(t *testing.T) {
	for _, hs := range heldStores(t) {
		// moto serves one request at a time per table: fewer streams,
		// and a hold longer than their opening.
		// late: how much after its hold a GET stream's end may be seen
		// on a loaded machine (moto answers the stream's last reads in
		// turn with every other stream's).
		perEra, hold, late := 150, 8*time.Second, 2*time.Second
		if hs.name == "dynamodb" {
			perEra, hold, late = 60, 30*time.Second, 6*time.Second
		}
		t.Run(hs.name, func(t *testing.T) {
			var counter storecount.Counter
			url := heldServer(t, storecount.Wrap(hs.open(t), &counter), hold)
			ingestStore := hs.open(t) // another process's store
			topic := fmt.Sprintf("T%d", time.Now().UnixNano())
			uri := ingest.EventURI(topic)
			ctx, cancel := context.WithCancel(context.Background())
			opening := time.Now()
			clients, wait := heldclients.Open(ctx, t.Errorf, heldclients.OpenOptions{URLs: []string{url}, URI: uri, N: 2 * perEra,
				Era2025: func(i int) bool { return i < perEra }, Concurrent: 50})
			defer func() { cancel(); wait() }()
			if err := heldclients.WaitOpen(clients, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d streams open after %v", hs.name, len(clients), time.Since(opening).Round(time.Millisecond))
			counter.Reset()
			time.Sleep(time.Second) // every stream idle
			t.Logf("%s: store requests of the %d idle streams in 1 s: %v", hs.name, len(clients), counter.Counts())
			start := time.Now()
			publish(t, ingestStore, topic, topic+"-1", 1)
			publish(t, ingestStore, topic, topic+"-2", 2)
			t.Logf("%s: published after %v", hs.name, time.Since(start).Round(time.Millisecond))
			done := func(c *heldclients.Stream) bool { return c.Record().Updated >= 2 }
			for time.Since(start) < 60*time.Second && !all(clients, done) {
				time.Sleep(50 * time.Millisecond)
			}
			delivered := time.Since(start)
			// Until every GET stream ended after its last event (at its
			// hold), or well past the hold.
			counter.Reset()
			waitEnd := time.Now()
			ended := func(c *heldclients.Stream) bool {
				r := c.Record()
				return len(r.Ends) > 0 && r.Ends[len(r.Ends)-1].After(r.Last)
			}
			for time.Since(waitEnd) < hold+late+5*time.Second && !all(clients[:perEra], ended) {
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("%s: store requests while held idle for %v: %v", hs.name, time.Since(waitEnd).Round(time.Second), counter.Counts())
			cancel()
			wait()
			var stuck []int
			for i, c := range clients {
				r := c.Record()
				var ended time.Time // the first end after the last event
				for _, e := range r.Ends {
					if e.After(r.Last) {
						ended = e
						break
					}
				}
				switch {
				case r.Updated != 2:
					stuck = append(stuck, i)
					t.Errorf("stream %d (%s) got %d resources/updated, want 2 (exactly once each)", i, era(i, perEra), r.Updated)
				case i < perEra && !slices.Equal(r.Seqs, []int64{1, 2}):
					t.Errorf("GET stream %d got event sequences %v, want [1 2]", i, r.Seqs)
				case i < perEra && ended.IsZero():
					t.Errorf("GET stream %d did not end after its last event; want an end at its hold %v", i, hold)
				case i < perEra && ended.Before(r.Last.Add(hold-500*time.Millisecond)):
					t.Errorf("GET stream %d ended %v after its last event, before its hold %v", i, ended.Sub(r.Last), hold)
				case i < perEra && ended.After(r.Last.Add(hold+late)):
					t.Errorf("GET stream %d ended %v after its last event; want its hold %v", i, ended.Sub(r.Last), hold)
				}
			}
			t.Logf("%s: %d streams (%d per era): every event on every stream within %v; %d not delivered",
				hs.name, len(clients), perEra, delivered.Round(time.Millisecond), len(stuck))
		})
	}
}

func all[T any](xs []T, f func(T) bool) bool {
	for _, x := range xs {
		if !f(x) {
			return false
		}
	}
	return true
}

func era(i, perEra int) string {
	if i < perEra {
		return "2025 GET"
	}
	return "2026 listen"
}

// heldFigures are what n idle held streams cost one process.
type heldFigures struct {
	n           int
	listens     int     // of the n, 2026 listen streams
	reads       float64 // store reads per second while idle
	writes      float64
	counts      storecount.Counts
	bytesPer    float64 // the server's heap and stacks per stream
	deliveredIn time.Duration
}

// measureIdleHeld opens n held streams on one process on SQLite (half
// 2025-11-25 GET streams held 15 minutes, half 2026-07-28 listen
// streams) from a child process (the clients' memory is not this
// process's), lets them idle, measures the memory this process holds for
// them, counts the store requests of window, and then checks that one
// event still reaches every stream.
func measureIdleHeld(t *testing.T, n int, era string, window time.Duration) heldFigures {
	path := filepath.Join(t.TempDir(), "idle.db")
	topic := fmt.Sprintf("idle%d%s", n, era)
	st, err := sqlitestore.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the server's
	var counter storecount.Counter
	url := heldServer(t, storecount.Wrap(st, &counter), 15*time.Minute)

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	child := heldclients.Start(t, heldclients.Options{URLs: []string{url}, N: n, Era: era, URI: ingest.EventURI(topic), Wait: time.Minute}, 2*time.Minute)
	time.Sleep(2 * time.Second) // idle: the watcher reads at its idle pace
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	f := heldFigures{n: n, listens: map[string]int{"both": n / 2, "2026": n}[era]}
	used := func(m *runtime.MemStats) float64 { return float64(m.HeapInuse + m.StackInuse) }
	f.bytesPer = (used(&after) - used(&before)) / float64(n)

	counter.Reset()
	time.Sleep(window)
	f.counts = counter.Counts()
	f.reads = float64(f.counts.Reads()) / window.Seconds()
	f.writes = float64(f.counts.Writes()) / window.Seconds()

	ingestStore, err := sqlitestore.New(path, nil) // another process's
	if err != nil {
		t.Fatal(err)
	}
	defer ingestStore.Close()
	start := time.Now()
	publish(t, ingestStore, topic, topic+"-1", 1)
	d, err := child.Delivered()
	if err != nil {
		t.Fatalf("n=%d: %v", n, err)
	}
	if d.Got != n {
		t.Fatalf("n=%d: the event reached %d of the streams within a minute of its first arrival", n, d.Got)
	}
	f.deliveredIn = heldclients.Percentile(heldclients.Latencies(start, d), 100)
	return f
}

// TestIdleHeldStreamReads: the store reads of N idle held streams on one
// process do not grow with N: at two values of N (both eras, half each),
// at most 20 reads per second at the larger and not more than at the
// smaller plus the streams' own checks (N/idleCheck); no writes. And an
// event still reaches every one of them. It measures the server's memory
// per held stream (heap and stacks) of both eras together, and without
// -race of each alone too: at most 64 KiB.
func TestIdleHeldStreamReads(t *testing.T) {
	small, large := 200, 2000
	const window = 5 * time.Second
	var figs []heldFigures
	// Each in a subtest: its server is gone before the next measures.
	measure := func(n int, era string, window time.Duration) (f heldFigures) {
		t.Run(fmt.Sprintf("%d-%s", n, era), func(t *testing.T) { f = measureIdleHeld(t, n, era, window) })
		if f.n == 0 {
			t.FailNow()
		}
		return f
	}
	for _, n := range []int{small, large} {
		f := measure(n, "both", window)
		t.Logf("%d idle held streams: %.1f reads/s, %.1f writes/s (%v); %.1f KiB of server memory per stream; one event reached all in %v",
			n, f.reads, f.writes, f.counts, f.bytesPer/1024, f.deliveredIn.Round(time.Millisecond))
		figs = append(figs, f)
	}
	lo, hi := figs[0], figs[1]
	if hi.reads > 20 {
		t.Errorf("%d idle held streams made %.1f store reads per second; want at most 20", hi.n, hi.reads)
	}
	if limit := lo.reads + float64(hi.n)/idleCheckSeconds + 2; hi.reads > limit {
		t.Errorf("store reads grew with N: %.1f/s at %d streams, %.1f/s at %d; want at most %.1f", lo.reads, lo.n, hi.reads, hi.n, limit)
	}
	if !testenv.RaceEnabled {
		// Each era on its own: the memory of its streams.
		for _, era := range []string{"2025", "2026"} {
			f := measure(1000, era, time.Second)
			t.Logf("1000 idle held %s streams: %.1f KiB of server memory per stream", era, f.bytesPer/1024)
			figs = append(figs, f)
		}
	}
	for _, f := range figs {
		// The one write an idle stream makes: a listen stream extends its
		// backing session's 30 s expiry once half of it is left (issue
		// 20: a crashed process's listens stop counting within 30 s), so
		// at most once per listen stream in a window shorter than 15 s.
		// Writes grow with the listen streams; reads do not.
		if other := f.counts.Writes() - f.counts["UpdateSession"]; other > 0 || f.counts["UpdateSession"] > int64(f.listens) {
			t.Errorf("%d idle held streams (%d listen streams) made %v in %v: want no writes but at most one UpdateSession per listen stream", f.n, f.listens, f.counts, window)
		}
		// The fixed cost of the server shows in the per-stream figure of
		// few streams, and -race adds to every goroutine: under -race
		// only the 2,000 are held to the bound (46 KiB measured there).
		if (!testenv.RaceEnabled || f.n == large) && f.bytesPer > 64<<10 {
			t.Errorf("an idle held stream holds %.1f KiB of the server's memory; want at most 64 KiB", f.bytesPer/1024)
		}
	}
}

// idleCheckSeconds is mcp's idleCheck (a held stream's own check).
const idleCheckSeconds = 600

// TestHeldStreamsPlainClients holds streams as a plain client does (issue
// 25): every request on a connection of its own, the streams of both
// eras opened one after another and 50 at a time, a handful and several
// hundred of each era on one process, on SQLite and on DynamoDB; after
// an idle period three events are ingested by another process. Every
// stream gets every event exactly once (GET streams: their
// notifications/message in sequence order); on SQLite within 1 s (p99)
// of its ingest returning. On DynamoDB the bound is looser and the
// streams fewer: moto serves one request at a time, so its latency is
// moto's (docs/costs.md).
//
// Issue 25's repro (held_streams.py) found most streams silent in this
// setup; the server was not at fault: the script let Python collect the
// tasks that read its streams (asyncio keeps only a weak reference to a
// task), which closed their connections, so the server ended those
// streams as it must. This test keeps the setup, with a client that
// reads every stream it opens.
func TestHeldStreamsPlainClients(t *testing.T) {
	for _, hs := range heldStores(t) {
		sizes := []int{3, 150} // streams per era
		if hs.name == "dynamodb" {
			sizes = []int{3, 15} // moto serves one request at a time
		}
		for _, perEra := range sizes {
			for _, conc := range []int{1, 50} {
				t.Run(fmt.Sprintf("%s/%d-per-era/%d-at-a-time", hs.name, perEra, conc), func(t *testing.T) {
					heldPlainClients(t, hs, perEra, conc)
				})
			}
		}
	}
}

func heldPlainClients(t *testing.T, hs heldStore, perEra, conc int) {
	url := heldServer(t, hs.open(t), 15*time.Minute)
	ingestStore := hs.open(t) // another process's store
	topic := fmt.Sprintf("plain%d", time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	opening := time.Now()
	clients, wait := heldclients.Open(ctx, t.Errorf, heldclients.OpenOptions{URLs: []string{url}, URI: ingest.EventURI(topic), N: 2 * perEra,
		Era2025: func(i int) bool { return i%2 == 0 }, Concurrent: conc, ConnPerRequest: true})
	defer func() { cancel(); wait() }()
	if err := heldclients.WaitOpen(clients, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d streams open after %v", len(clients), time.Since(opening).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // every stream idle; the watcher at its idle pace
	const events = 3
	var lat []time.Duration
	for e := 1; e <= events; e++ {
		publish(t, ingestStore, topic, fmt.Sprintf("%s-%d", topic, e), e)
		ingested := time.Now()
		got := func(c *heldclients.Stream) bool { return c.Record().Updated >= e }
		for time.Since(ingested) < 30*time.Second && !all(clients, got) {
			time.Sleep(10 * time.Millisecond)
		}
		for _, c := range clients {
			if r := c.Record(); r.Updated >= e {
				lat = append(lat, max(r.Last.Sub(ingested), 0)) // 0: before the ingest returned
			}
		}
		time.Sleep(500 * time.Millisecond) // idle again
	}
	time.Sleep(500 * time.Millisecond) // any duplicate arrives
	for i, c := range clients {
		r := c.Record()
		if r.Updated != events {
			t.Errorf("stream %d (%s) got %d resources/updated, want %d (exactly once each)", i, map[bool]string{true: "2025 GET", false: "2026 listen"}[i%2 == 0], r.Updated, events)
		}
		if i%2 == 0 && !slices.Equal(r.Seqs, []int64{1, 2, 3}) {
			t.Errorf("GET stream %d got event sequences %v, want [1 2 3]", i, r.Seqs)
		}
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		t.Fatal("no stream got any event")
	}
	p99 := heldclients.Percentile(lat, 99)
	t.Logf("%d deliveries: p50 %v, p99 %v after the ingest returned", len(lat), heldclients.Percentile(lat, 50).Round(time.Millisecond), p99.Round(time.Millisecond))
	limit := time.Second
	if hs.name == "dynamodb" {
		limit = 10 * time.Second
	}
	if p99 > limit {
		t.Errorf("p99 delivery %v after the ingest returned; want at most %v", p99, limit)
	}
}

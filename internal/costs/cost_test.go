package costs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/mcpush/mcpush/internal/heldclients"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
)

func TestMain(m *testing.M) {
	heldclients.Main() // BenchmarkScaleCostModel's clients
	code := m.Run()
	moto.Stop()
	os.Exit(code)
}

// backend is a store with a request tally.
type backend struct {
	name  string
	store storeconfig.Store
	tally requests
	meter *meter // DynamoDB request units; nil on SQLite
	unit  string // what one counted request is
	// The counted requests that read a session and the registry hashes.
	sessionRead, registryRead string
	// reopen opens another Store on the same database: another
	// process's, as the ingest's.
	reopen func(tb testing.TB) storeconfig.Store
}

func backends(tb testing.TB) []backend {
	return []backend{sqliteBackend(tb), dynamoBackend(tb)}
}

// sqliteBackend is SQLite, a file, counted per Store call.
func sqliteBackend(tb testing.TB) backend {
	path := filepath.Join(tb.TempDir(), "costs.db")
	sq, err := sqlitestore.New(path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sq.Close() })
	var st storecount.Counter
	return backend{name: "sqlite", store: storecount.Wrap(sq, &st), tally: storeTally{&st}, unit: "Store call",
		sessionRead: "GetSession", registryRead: "RegistryHashes",
		reopen: func(tb testing.TB) storeconfig.Store {
			other, err := sqlitestore.New(path, nil)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { other.Close() })
			return other
		}}
}

// dynamoBackend is DynamoDB (moto, a table of its own), counted per API
// call and metered in request units.
func dynamoBackend(tb testing.TB) backend {
	endpoint := moto.Start(tb)
	dt := newTally(dynamoRead)
	dm := &meter{}
	table := fmt.Sprintf("costs-%d", time.Now().UnixNano())
	plain := moto.NewClient(context.Background(), endpoint)
	if err := dynamostore.CreateTable(context.Background(), plain, table); err != nil {
		tb.Fatal(err)
	}
	counted := moto.NewClient(context.Background(), endpoint, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, dt.middleware, dm.middleware)
	})
	return backend{name: "dynamodb", store: dynamostore.New(counted, table, nil), tally: dt, meter: dm, unit: "DynamoDB API call",
		sessionRead: "Query", registryRead: "GetItem",
		reopen: func(testing.TB) storeconfig.Store { return dynamostore.New(plain, table, nil) }}
}

// reset starts a measurement: no requests and no units counted.
func (b backend) reset() {
	b.tally.reset()
	if b.meter != nil {
		b.meter.reset()
	}
}

// units returns the request units of what was counted since reset, to be
// priced as DynamoDB on-demand read and write units: metered on DynamoDB;
// on SQLite one unit per Store call, as if each were one small DynamoDB
// request.
func (b backend) units() (rru, wru float64) {
	if b.meter != nil {
		return b.meter.units()
	}
	r, w, _ := b.tally.counts()
	return float64(r), float64(w)
}

const pollInterval = 100 * time.Millisecond

// server serves the shipped configuration (dynamic registries, built-in
// tools) on b's store. The registry refresh is long so that what is
// counted is the requests' own cost; the refresh costs one read per
// RegistryRefresh per process, in the background.
func server(tb testing.TB, b backend) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpush", Version: "costs"}, b.store, &mcp.ServerOptions{
		DynamicRegistries: true,
		RegistryRefresh:   time.Hour,
		PollInterval:      pollInterval,
		// What is counted is a short call's own cost: on a loaded
		// machine a call may run past the default 200ms, after which
		// it pays for being cancellable from other processes.
		CancelWatchAfter: 10 * time.Second,
	})
	eventtools.Add(srv, b.store, nil)
	h := mcp.NewStreamableHandler(srv, nil)
	ts := httptest.NewServer(h)
	tb.Cleanup(func() { ts.Close(); h.Close() })
	return ts.URL
}

func post(tb testing.TB, url, sid, body string) (string, []byte) {
	tb.Helper()
	resp, b := testutil.PostRead(tb, nil, url, sid, body)
	if resp.StatusCode >= 300 || strings.Contains(string(b), `"error"`) {
		tb.Fatalf("POST %s: %d %s", body, resp.StatusCode, b)
	}
	return resp.Header.Get("Mcp-Session-Id"), b
}

const (
	initReq  = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"costs","version":"1"}}}`
	initNote = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	callReq  = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"session_info","arguments":{}}}`
)

type row struct {
	what          string
	reads, writes float64
	detail        string
}

// TestCosts measures the store requests of the three operations the cost
// targets name, on both stores, checks the targets and logs the table
// that docs/costs.md shows.
func TestCosts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips the tests that start moto_server")
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			url := server(t, b)
			var rows []row

			// Creating a session: initialize and notifications/initialized.
			b.reset()
			sid, _ := post(t, url, "", initReq)
			post(t, url, sid, initNote)
			r, w, d := b.tally.counts()
			rows = append(rows, row{"create a session (initialize + initialized)", float64(r), float64(w), d})
			if w > 2 {
				t.Errorf("creating a session made %d writes (%s), want at most 2", w, d)
			}

			// A warm tools/call that emits no notification.
			post(t, url, sid, callReq) // warm: the process has its registry copy
			const calls = 20
			b.reset()
			for range calls {
				post(t, url, sid, callReq)
			}
			r, w, d = b.tally.counts()
			rows = append(rows, row{"warm tools/call (per call)", float64(r) / calls, float64(w) / calls, d})
			if r+w > calls || w > 0 {
				t.Errorf("%d warm tools/call made %d reads and %d writes (%s); want at most 1 request and no writes each", calls, r, w, d)
			}

			// An idle GET stream of a session subscribed to many topics.
			for i := range 10 {
				post(t, url, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"events://topic%d"}}`, 10+i, i))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			go io.Copy(io.Discard, bufio.NewReader(resp.Body))
			time.Sleep(3 * pollInterval) // past the stream's setup
			b.reset()
			const intervals = 20
			time.Sleep(intervals * pollInterval)
			r, w, d = b.tally.counts()
			cancel()
			resp.Body.Close()
			rows = append(rows, row{"idle GET stream, 10 subscriptions (per poll interval)", float64(r) / intervals, float64(w) / intervals, d})
			// One change feed read per interval (the process's watcher);
			// on DynamoDB one Query per feed shard, and a read within the
			// first second of a feed partition (10 s) also reads the
			// previous one's shards (the watcher's 1 s overlap).
			limit := intervals + 1
			if b.name == "dynamodb" {
				limit += min(intervals, int(time.Second/pollInterval))
				limit *= dynamostore.DefaultFeedShards
			}
			if r > limit || w > 0 {
				t.Errorf("an idle stream made %d reads and %d writes in %d poll intervals (%s); want at most %d reads (1 feed read per interval, 2 in a feed partition's first second on DynamoDB, each a Query per feed shard there) and no writes", r, w, intervals, d, limit)
			}

			var sb strings.Builder
			fmt.Fprintf(&sb, "\n%s (counting each %s):\n| operation | reads | writes | requests |\n|---|---|---|---|\n", b.name, b.unit)
			for _, r := range rows {
				fmt.Fprintf(&sb, "| %s | %.2g | %.2g | %s |\n", r.what, r.reads, r.writes, r.detail)
			}
			t.Log(sb.String())
		})
	}
}

// BenchmarkToolsCallStores times a warm tools/call round trip over
// loopback HTTP on each store (DynamoDB is moto_server on loopback) and
// reports DynamoDB's ratio to SQLite.
func BenchmarkToolsCallStores(b *testing.B) {
	bs := backends(b)
	type target struct{ url, sid string }
	var ts []target
	for _, be := range bs {
		url := server(b, be)
		sid, _ := post(b, url, "", initReq)
		post(b, url, sid, initNote)
		for range 20 {
			post(b, url, sid, callReq)
		}
		ts = append(ts, target{url, sid})
	}
	elapsed := make([]time.Duration, len(ts))
	b.ResetTimer()
	for b.Loop() {
		for i, tg := range ts {
			t0 := time.Now()
			post(b, tg.url, tg.sid, callReq)
			elapsed[i] += time.Since(t0)
		}
	}
	for i, be := range bs {
		b.ReportMetric(float64(elapsed[i].Microseconds())/float64(b.N), be.name+"-µs/call")
	}
	b.ReportMetric(float64(elapsed[1])/float64(elapsed[0]), "dynamodb/sqlite")
}

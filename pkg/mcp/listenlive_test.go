package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
)

// clockedStores are heldStores whose stores judge expiry by now: a fresh
// backing database per call, shared by every store its open returns.
func clockedStores(t *testing.T, now func() time.Time) []heldStore {
	path := filepath.Join(t.TempDir(), "live.db")
	var table string
	return []heldStore{
		{"sqlite", func(t *testing.T) storeconfig.Store {
			st, err := sqlitestore.New(path, &sqlitestore.Options{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
		{"dynamodb", func(t *testing.T) storeconfig.Store {
			endpoint := moto.Start(t)
			client := moto.NewClient(context.Background(), endpoint)
			if table == "" {
				table = fmt.Sprintf("live-%d", time.Now().UnixNano())
				if err := dynamostore.CreateTable(context.Background(), client, table); err != nil {
					t.Fatal(err)
				}
			}
			return dynamostore.New(client, table, &dynamostore.Options{Now: now})
		}},
	}
}

// liveServer serves a server on st with the clock now and at most limit
// listens per principal.
func liveServer(t *testing.T, st mcp.Store, now func() time.Time, limit int) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "live", Version: "1"}, st, &mcp.ServerOptions{
		DynamicRegistries: true, Now: now,
		Limits: mcp.Limits{MaxSessionsPerPrincipal: 100_000, MaxSessionsPerHour: 100_000, MaxRequestsPerMinute: 1_000_000, MaxListensPerPrincipal: limit},
	})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, KeepAlive: time.Hour})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	return ts.URL
}

// waitCount waits up to 15 s for counter's op to reach want and returns
// it.
func waitCount(counter *storecount.Counter, op string, want int64) int64 {
	for deadline := time.Now().Add(15 * time.Second); counter.Counts()[op] < want && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	return counter.Counts()[op]
}

// TestListenIdleWritesPerProcess (issue 17): n idle listen streams on one
// process cost store writes that do not grow with n. Over 160 s of a clock
// the test moves in steps of 16 s, both stores, n = small and large: the
// process's liveness record is refreshed once per step (one UpdateSession
// every 10 s or more: 10), and each stream's backing session, which lives
// 5 minutes, once (n), when less than half of that is left; no other
// write. Before the liveness record each stream refreshed its 30 s
// session every 15 s: 10n.
func TestListenIdleWritesPerProcess(t *testing.T) {
	for i, flavour := range []string{"sqlite", "dynamodb"} {
		ns := map[string][2]int{"sqlite": {20, 200}, "dynamodb": {10, 50}}[flavour]
		for _, n := range ns {
			t.Run(fmt.Sprintf("%s/%d", flavour, n), func(t *testing.T) {
				t.Parallel()
				clock := &fakeClock{now: time.Now()}
				raw := clockedStores(t, clock.Now)[i].open(t)
				var counter storecount.Counter
				url := liveServer(t, storecount.Wrap(raw, &counter), clock.Now, 100_000)
				for j := range n {
					if resp, b := openListen(t, t.Context(), url, fmt.Sprintf("I%d", j), `{"toolsListChanged":true}`); resp.StatusCode != http.StatusOK {
						t.Fatalf("listen %d: HTTP %d %s", j, resp.StatusCode, b)
					}
				}
				time.Sleep(300 * time.Millisecond)
				counter.Reset()
				const steps = 10
				for step := 1; step <= steps; step++ {
					clock.Add(16 * time.Second)
					want := int64(step)
					if step == steps { // 160 s: the backing sessions' refresh is due
						want += int64(n)
					}
					if got := waitCount(&counter, "UpdateSession", want); got < want {
						t.Fatalf("step %d (%v): %d UpdateSession, want %d", step, time.Duration(step)*16*time.Second, got, want)
					}
				}
				time.Sleep(500 * time.Millisecond)
				c := counter.Counts()
				t.Logf("%d idle listens, 160 s: %d writes (%v); %.4f writes/s per listen", n, c.Writes(), c, float64(c.Writes())/160/float64(n))
				if w, want := c.Writes(), int64(steps+n); w != want || c["UpdateSession"] != want {
					t.Errorf("%d idle listens over 160 s: %d writes (%v), want %d UpdateSession (%d liveness beats, one refresh per stream) and nothing else", n, w, c, want, steps)
				}
			})
		}
	}
}

// TestListenLiveProcessNotReclaimed (issue 17): two processes on one
// store and one clock; process A holds its principal's 20 listens, and
// over 44 s of the clock (longer than a liveness record lives without
// its refresh) its heartbeat keeps its record. A listen of the principal
// on process B is refused (429) after looking at A's streams, and deletes
// none of them: B's store sees no DeleteSession, A's streams all stay
// open. Once A's client ends a stream, B acknowledges a listen.
func TestListenLiveProcessNotReclaimed(t *testing.T) {
	for i, flavour := range []string{"sqlite", "dynamodb"} {
		t.Run(flavour, func(t *testing.T) {
			clock := &fakeClock{now: time.Now()}
			stores := clockedStores(t, clock.Now)
			rawA := stores[i].open(t)
			var ca, cb storecount.Counter
			urlA := liveServer(t, storecount.Wrap(rawA, &ca), clock.Now, 20)
			urlB := liveServer(t, storecount.Wrap(stores[i].open(t), &cb), clock.Now, 20)

			var streams []<-chan map[string]any
			var first context.CancelFunc
			for j := range 20 {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if first == nil {
					first = cancel
				}
				s := listenStreamID(t, ctx, urlA, fmt.Sprintf("A%d", j), `{"toolsListChanged":true}`)
				if m := <-s; m["method"] != "notifications/subscriptions/acknowledged" {
					t.Fatalf("listen A%d: %v, want the acknowledgement", j, m)
				}
				streams = append(streams, s)
			}
			for step := range 4 {
				clock.Add(11 * time.Second)
				if got := waitCount(&ca, "UpdateSession", int64(step+1)); got < int64(step+1) {
					t.Fatalf("A's heartbeat: %d UpdateSession after %d steps of 11 s", got, step+1)
				}
			}
			resp, b := openListen(t, t.Context(), urlB, "B0", `{"toolsListChanged":true}`)
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("listen on B over A's 20 live listens: HTTP %d %s, want 429", resp.StatusCode, b)
			}
			c := cb.Counts()
			if c["PrincipalProfiles"] == 0 || c["DeleteSession"] != 0 {
				t.Errorf("B's refused listen: %v; want A's streams looked at (PrincipalProfiles) and none deleted", c)
			}
			time.Sleep(500 * time.Millisecond) // a deleted backing session ends its stream
			for j, s := range streams {
				select {
				case m, ok := <-s:
					t.Errorf("A's stream %d: %v (open %v), want it idle", j, m, ok)
				default:
				}
			}
			first()
			for deadline := time.Now().Add(10 * time.Second); ; {
				resp, b := openListen(t, t.Context(), urlB, "B1", `{"toolsListChanged":true}`)
				if resp.StatusCode == http.StatusOK {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("listen on B after A's client ended a stream: HTTP %d %s", resp.StatusCode, b)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

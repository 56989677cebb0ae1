package delivery

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"

	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// BenchmarkWebhookFanOut: one event to N webhook subscriptions
// (MCPUSH_BENCH_WEBHOOKS, default 200; the target is 10,000 on SQLite) of
// one topic, all on one loopback webhook.Receiver that verifies every
// signature, through the local path: the event appended and its fan-out
// task handed to a Pool (32 workers) on SQLite, and on DynamoDB (moto).
// It reports the time from the append to each subscription's accepted
// delivery (p50, p99, max), the hand-off's own time (what a publisher
// waits), the store requests of the event (its fan-out and deliveries) in
// all and per subscription, and fails unless every subscription got the
// event exactly once.
func BenchmarkWebhookFanOut(b *testing.B) {
	n := 200
	if v := os.Getenv("MCPUSH_BENCH_WEBHOOKS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("MCPUSH_BENCH_WEBHOOKS=%q", v)
		}
	}
	stores := []string{"sqlite", "dynamodb"}
	if v := os.Getenv("MCPUSH_BENCH_WEBHOOK_STORES"); v != "" {
		stores = strings.Split(v, ",")
	}
	for _, name := range stores {
		b.Run(name, func(b *testing.B) { benchWebhookFanOut(b, name, n) })
	}
}

// webhookBenchStore is what the benchmark needs of a store.
type webhookBenchStore interface {
	notify.Store
	Store
	CreateWebhook(ctx context.Context, w *notify.WebhookSubscription, max int) error
}

func benchWebhookFanOut(b *testing.B, storeName string, n int) {
	ctx := context.Background()
	var (
		st     webhookBenchStore
		counts func() map[string]int64
	)
	switch storeName {
	case "sqlite":
		sq, err := sqlitestore.New(filepath.Join(b.TempDir(), "bench.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sq.Close() })
		c := &storecount.Counter{}
		st = storecount.Wrap(sq, c).(webhookBenchStore)
		counts = func() map[string]int64 { return c.Counts() }
	case "dynamodb":
		client := moto.NewClient(ctx, moto.Start(b))
		table := fmt.Sprintf("webhook-bench-%d", time.Now().UnixNano())
		if err := dynamostore.CreateTable(ctx, client, table); err != nil {
			b.Fatal(err)
		}
		counter := dynamostore.NewCounter(client)
		st = dynamostore.New(counter, table, nil)
		counts = counter.Counts
	default:
		b.Fatalf("MCPUSH_BENCH_WEBHOOK_STORES: unknown store %q", storeName)
	}

	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("bench-secret-of-32-bytes-0123456"))
	sec, err := webhook.ParseSecret(secret)
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu      sync.Mutex
		arrived = map[string][]time.Time{} // subscription id -> accepted deliveries
	)
	recv := &webhook.Receiver{
		Secrets: func(string) []webhook.Secret { return []webhook.Secret{sec} },
		Dedup:   -1,
		Handle: func(d webhook.Delivery) error {
			mu.Lock()
			arrived[d.SubscriptionID] = append(arrived[d.SubscriptionID], time.Now())
			mu.Unlock()
			return nil
		},
	}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	srv.Config.SetKeepAlivesEnabled(true)
	allow, _ := webhook.ParseAllow(srv.URL)
	keys := [][]byte{[]byte("bench-webhook-state-key-0123456789abc")}
	sealer, _ := notify.NewSealer(keys, notify.WebhookSealLabel)
	item, _ := json.Marshal(notify.EventItem{Name: "order.created", Topic: "orders"}.WithDefaults())
	if _, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order.created": item}, "reg"); err != nil {
		b.Fatal(err)
	}
	// The subscriptions, created concurrently (setup, not measured).
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			w := &notify.WebhookSubscription{Topic: "orders", ID: fmt.Sprintf("sub_%05d", i), Principal: fmt.Sprintf("p%d", i%(n/50+1)), Name: "order.created",
				URL: srv.URL + "/hooks/" + strconv.Itoa(i), CreatedAt: time.Now(), UpdatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Verified: true}
			w.SealSecrets(sealer, notify.WebhookSecrets{Current: secret})
			if err := st.CreateWebhook(ctx, w, 1<<30); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	// Origins: every subscription has its own path on one receiver, as
	// many receivers behind one host would; the per-origin bound is
	// lifted to the pool's size so the figure is the engine's, not the
	// bound's.
	pool := NewPool(&PoolOptions{PollInterval: time.Hour, SweepInterval: time.Hour})
	wh, err := New(Options{Store: st, Queue: pool, Sender: webhook.NewSender(webhook.Policy{Allow: allow}), Sealer: sealer, CursorKey: keys[0],
		EventTypes: RegistryEventTypes(st), PerOrigin: DefaultWorkers})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go pool.Run(runCtx, wh)
	time.Sleep(200 * time.Millisecond) // its first sweep (nothing to do yet) out of the way

	b.ResetTimer()
	for i := range b.N {
		mu.Lock()
		clear(arrived)
		mu.Unlock()
		before := counts()
		start := time.Now()
		ev, _, err := st.AppendTopicEvent(ctx, "orders", fmt.Sprintf("m-%d", i), start, json.RawMessage(`{"n":1}`))
		if err != nil {
			b.Fatal(err)
		}
		if err := pool.Enqueue(ctx, FanOut(&ev)); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
			mu.Lock()
			got := len(arrived)
			mu.Unlock()
			if got == n && pool.Pending() == 0 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d subscriptions got the event within 2 min", got, n)
			}
		}
		after := counts()
		var reqs int64
		for op, v := range after {
			reqs += v - before[op]
		}
		mu.Lock()
		var lat []time.Duration
		for id, ts := range arrived {
			if len(ts) != 1 {
				b.Errorf("%s: %d deliveries, want 1", id, len(ts))
			}
			lat = append(lat, ts[0].Sub(start))
		}
		mu.Unlock()
		if len(lat) != n {
			b.Fatalf("%d of %d subscriptions got the event", len(lat), n)
		}
		slices.Sort(lat)
		p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
		b.ReportMetric(float64(n), "subscribers")
		b.ReportMetric(float64(p(0.5).Milliseconds()), "p50-ms")
		b.ReportMetric(float64(p(0.99).Milliseconds()), "p99-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
		b.ReportMetric(float64(reqs), "store-requests/event")
		b.ReportMetric(float64(reqs)/float64(n), "requests/subscriber")
		b.ReportMetric(float64(took.Microseconds())/1000, "handoff-ms")
		b.Logf("%s N=%d: append and hand-off %v, p50 %v, p99 %v, last %v; store requests %d (%v)", storeName, n, took, p(0.5), p(0.99), lat[len(lat)-1], reqs, diffCounts(before, after))
	}
}

func diffCounts(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for op, v := range after {
		if v-before[op] != 0 {
			d[op] = v - before[op]
		}
	}
	return d
}

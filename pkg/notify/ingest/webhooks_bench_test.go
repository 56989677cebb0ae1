package ingest

import (
	"context"
	"path/filepath"
	"strings"

	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// BenchmarkWebhookFanOut: one event to N webhook subscriptions
// (MCPUSH_BENCH_WEBHOOKS, default 200; the target is 10,000) of one
// topic, all on one loopback webhook.Receiver that verifies every
// signature, through the ingest on DynamoDB (moto). It reports the time
// from the SNS record to each subscription's accepted delivery (p50, p99,
// max), the store requests of the event (on DynamoDB, API calls) (its append, fan-out and
// webhook delivery) in all and per subscription, and fails unless every
// subscription got the event exactly once.
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
	WebhookStore
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
	wh, err := NewWebhooks(WebhookOptions{Store: st, Sender: webhook.NewSender(webhook.Policy{Allow: allow}), Sealer: sealer, CursorKey: keys[0],
		EventTypes: RegistryEventTypes(st)})
	if err != nil {
		b.Fatal(err)
	}
	in := New(st, &Options{Webhooks: wh})

	b.ResetTimer()
	for i := range b.N {
		mu.Lock()
		clear(arrived)
		mu.Unlock()
		before := counts()
		start := time.Now()
		msg := fmt.Sprintf("m-%d", i)
		if _, err := in.Handle(ctx, snsEvent(record(msg, ordersARN, `{"type":"event","topic":"orders","data":{"n":1}}`))); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
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
		b.Logf("%s N=%d: handled in %v, p50 %v, p99 %v; store requests %d (%v)", storeName, n, took, p(0.5), p(0.99), reqs, diffCounts(before, after))
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

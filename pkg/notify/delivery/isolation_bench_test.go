package delivery_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
	"github.com/mcpush/mcpush/pkg/notify/eventcursor"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// BenchmarkWebhookIsolation measures issue 33's isolation targets on the
// local path (SQLite, a Pool of 32 workers), each beside a reference
// measured in the same run:
//
//   - publish: the ingest's time per SNS record (append and hand-off) with
//     1,000 subscriptions on a receiver that hangs, against the same
//     topic with no subscription (target: p99 at most 300 ms);
//   - healthy: the time from an event's ingest to its delivery at the
//     last of 20 healthy receivers, beside 40 subscriptions on a hanging
//     origin, against the 20 alone (target: within 1 s).
func BenchmarkWebhookIsolation(b *testing.B) {
	publishRef := isolationRun(b, 0, 0, 20)
	publish := isolationRun(b, 1000, 0, 20)
	healthyRef := isolationRun(b, 0, 20, 10)
	healthy := isolationRun(b, 40, 20, 10)
	p99 := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[min(len(d)-1, len(d)*99/100)]
	}
	b.ReportMetric(float64(p99(publish.publish).Microseconds())/1000, "publish-p99-ms")
	b.ReportMetric(float64(p99(publish.publish))/float64(p99(publishRef.publish)), "publish-p99-ratio")
	b.ReportMetric(float64(p99(healthy.healthy).Microseconds())/1000, "healthy-p99-ms")
	b.ReportMetric(float64(p99(healthy.healthy))/float64(p99(healthyRef.healthy)), "healthy-p99-ratio")
	b.Logf("publish p99 %v with 1,000 hanging subscriptions, %v with none; healthy p99 %v beside 40 hanging, %v alone",
		p99(publish.publish), p99(publishRef.publish), p99(healthy.healthy), p99(healthyRef.healthy))
}

type isolationFigures struct {
	publish []time.Duration // per ingest
	healthy []time.Duration // per event: ingest start to the last healthy delivery
}

// isolationRun publishes events events on a fresh store with hanging
// subscriptions on a receiver that never answers and healthy ones on
// one that does.
func isolationRun(b *testing.B, hanging, healthy, events int) isolationFigures {
	ctx := context.Background()
	st, err := sqlitestore.New(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("isolation-bench-secret-32-bytes!"))
	sec, _ := webhook.ParseSecret(secret)
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(stop)
	var (
		mu  sync.Mutex
		got = map[string]time.Time{} // event: last healthy delivery
		n   = map[string]int{}
	)
	good := httptest.NewServer(&webhook.Receiver{Secrets: func(string) []webhook.Secret { return []webhook.Secret{sec} }, Dedup: -1,
		Handle: func(d webhook.Delivery) error {
			mu.Lock()
			got[d.WebhookID] = time.Now()
			n[d.WebhookID]++
			mu.Unlock()
			return nil
		}})
	defer good.Close()
	allow, _ := webhook.ParseAllow(hang.URL + "," + good.URL)
	keys := [][]byte{[]byte("isolation-bench-state-key-0123456789")}
	sealer, _ := notify.NewSealer(keys, notify.WebhookSealLabel)
	item, _ := json.Marshal(notify.EventItem{Name: "order.created", Topic: "orders"}.WithDefaults())
	if _, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order.created": item}, "reg"); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for i := range hanging + healthy {
		base, id := hang.URL, fmt.Sprintf("hang%04d", i)
		if i >= hanging {
			base, id = good.URL, fmt.Sprintf("good%04d", i)
		}
		w := &notify.WebhookSubscription{Topic: "orders", ID: id, Principal: "p", Name: "order.created", URL: base + "/" + id,
			CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour), Verified: true}
		w.SealSecrets(sealer, notify.WebhookSecrets{Current: secret})
		if err := st.CreateWebhook(ctx, w, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
	pool := delivery.NewPool(&delivery.PoolOptions{PollInterval: time.Hour, SweepInterval: time.Hour})
	eng, err := delivery.New(delivery.Options{Store: st, Queue: pool, Sender: webhook.NewSender(webhook.Policy{Allow: allow}),
		Sealer: sealer, CursorKey: keys[0], EventTypes: delivery.RegistryEventTypes(st)})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); pool.Run(runCtx, eng) }()
	defer func() { cancel(); <-done }()
	time.Sleep(200 * time.Millisecond)
	in := ingest.New(st, &ingest.Options{Delivery: pool})
	var f isolationFigures
	for i := range events {
		msg := fmt.Sprintf("m%d", i)
		start := time.Now()
		if _, err := in.Handle(ctx, snsRecord(msg, `{"type":"event","topic":"orders","data":{"n":1}}`)); err != nil {
			b.Fatal(err)
		}
		f.publish = append(f.publish, time.Since(start))
		if healthy == 0 {
			continue
		}
		id := eventcursor.EventID("order.created", msg)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			mu.Lock()
			c, at := n[id], got[id]
			mu.Unlock()
			if c == healthy {
				f.healthy = append(f.healthy, at.Sub(start))
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("event %d: %d of %d healthy receivers within 30 s", i, c, healthy)
			}
		}
	}
	return f
}

func snsRecord(id, msg string) events.SNSEvent {
	return events.SNSEvent{Records: []events.SNSEventRecord{{EventSource: "aws:sns", SNS: events.SNSEntity{
		MessageID: id, TopicArn: "arn:aws:sns:us-east-1:123456789012:orders", Timestamp: time.Now(), Message: msg}}}}
}

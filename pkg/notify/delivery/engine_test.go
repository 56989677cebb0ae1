package delivery

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/notify/eventcursor"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// webhookStores opens a fresh SQLite store and a fresh DynamoDB one (on
// moto).
func webhookStores(t *testing.T) map[string]notify.Store {
	t.Helper()
	sq, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	client := moto.NewClient(context.Background(), moto.Start(t))
	table := fmt.Sprintf("webhooks-%d", time.Now().UnixNano())
	if err := dynamostore.CreateTable(context.Background(), client, table); err != nil {
		t.Fatal(err)
	}
	return map[string]notify.Store{"sqlite": sq, "dynamodb": dynamostore.New(client, table, nil)}
}

// hookLog records what a receiver accepted, by subscription.
type hookLog struct {
	mu       sync.Mutex
	accepted map[string][]webhook.Delivery
	requests atomic.Int64
}

func (h *hookLog) ids(sub string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, d := range h.accepted[sub] {
		if d.Event != nil {
			out = append(out, string(d.Event.Data))
		} else {
			out = append(out, "control:"+d.Control.Type)
		}
	}
	return out
}

// TestWebhookDelivery: the ingest delivers each event to the matching
// webhook subscriptions of its topic (both stores), signed (a
// webhook.Receiver verifies every POST), with the eventId of poll and a
// cursor; a 410 is not retried and moves the watermark; a 300 KiB event
// is not sent and not retried; a 5xx is retried by the sweeper after its
// backoff and then delivered once; an event appended without delivery
// (a crash between the append and the POST) is delivered by the sweeper;
// two ingests racing on one event make one accepted delivery per
// subscription; an event type removed ends its subscriptions with a
// signed terminated envelope.
func TestWebhookDelivery(t *testing.T) {
	for name, st := range webhookStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			raw := make([]byte, 32)
			rand.Read(raw)
			secretText := webhook.SecretPrefix + base64.StdEncoding.EncodeToString(raw)
			secret, _ := webhook.ParseSecret(secretText)
			log := &hookLog{accepted: map[string][]webhook.Delivery{}}
			var flaky atomic.Int64
			flaky.Store(2) // the first two POSTs to /flaky fail
			receiver := func(gone bool) http.Handler {
				return &webhook.Receiver{
					Secrets: func(string) []webhook.Secret { return []webhook.Secret{secret} },
					Dedup:   -1, // count every accepted POST
					Handle: func(d webhook.Delivery) error {
						if gone && d.Event != nil {
							return webhook.ErrGone
						}
						log.mu.Lock()
						log.accepted[d.SubscriptionID] = append(log.accepted[d.SubscriptionID], d)
						log.mu.Unlock()
						return nil
					},
				}
			}
			mux := http.NewServeMux()
			mux.Handle("/hook", receiver(false))
			mux.Handle("/gone", receiver(true))
			mux.Handle("/flaky", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if flaky.Add(-1) >= 0 {
					http.Error(w, "down", http.StatusServiceUnavailable)
					return
				}
				receiver(false).ServeHTTP(w, r)
			}))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				log.requests.Add(1)
				mux.ServeHTTP(w, r)
			}))
			defer srv.Close()
			allow, _ := webhook.ParseAllow(srv.URL)

			keys := [][]byte{[]byte("ingest-webhook-state-key-0123456789ab")}
			sealer, _ := notify.NewSealer(keys, notify.WebhookSealLabel)
			ws := st.(Store)
			types := map[string]json.RawMessage{}
			for _, e := range []notify.EventItem{{Name: "order.created", Topic: "orders"}, {Name: "order.any", Topic: "orders"}} {
				types[e.Name], _ = json.Marshal(e.WithDefaults())
			}
			if _, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpReplace, types, "reg-1"); err != nil {
				t.Fatal(err)
			}
			subscribe := func(id, name, path, args string) {
				t.Helper()
				w := &notify.WebhookSubscription{Topic: "orders", ID: id, Principal: "alice", Name: name, URL: srv.URL + path,
					CreatedAt: time.Now(), UpdatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Verified: true}
				if args != "" {
					w.Arguments = json.RawMessage(args)
				}
				w.SealSecrets(sealer, notify.WebhookSecrets{Current: secretText})
				if err := st.(interface {
					CreateWebhook(context.Context, *notify.WebhookSubscription, int) error
				}).CreateWebhook(ctx, w, 100); err != nil {
					t.Fatal(err)
				}
			}
			subscribe("sub_p1", "order.created", "/hook", `{"severity":"P1"}`)
			subscribe("sub_all", "order.any", "/hook", "")
			subscribe("sub_gone", "order.created", "/gone", "")
			subscribe("sub_flaky", "order.created", "/flaky", "")

			eventTypes := func(ctx context.Context) (map[string]*notify.EventItem, error) {
				reg, err := st.GetRegistry(ctx, notify.RegistryEvents)
				if err != nil {
					return nil, err
				}
				out := map[string]*notify.EventItem{}
				for k, v := range reg.Items {
					if e, err := notify.DecodeEventItem(v); err == nil {
						out[k] = e
					}
				}
				return out, nil
			}
			q := &memQueue{}
			wh, err := New(Options{
				Store: ws, Queue: q, Sender: webhook.NewSender(webhook.Policy{Allow: allow}), Sealer: sealer, CursorKey: keys[0],
				EventTypes: eventTypes, TypesTTL: -1, Retry: webhook.Retry{Base: 50 * time.Millisecond, Max: 100 * time.Millisecond, Window: time.Minute},
			})
			if err != nil {
				t.Fatal(err)
			}
			publish(t, st, q, "m1", `{"severity":"P1","n":1}`, "m2", `{"severity":"P2","n":2}`)
			q.drain(ctx, t, wh)
			if got, want := log.ids("sub_p1"), []string{`{"severity":"P1","n":1}`}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("sub_p1 got %v, want %v", got, want)
			}
			if got := log.ids("sub_all"); len(got) != 2 {
				t.Errorf("sub_all got %v, want both events", got)
			}
			log.mu.Lock()
			d := log.accepted["sub_p1"][0]
			log.mu.Unlock()
			if d.WebhookID != eventcursor.EventID("order.created", "m1") || d.Event.EventID != d.WebhookID || d.Event.Cursor == nil {
				t.Errorf("delivery %+v: want the eventId of m1 as webhook-id and a cursor", d)
			} else if c, err := eventcursor.Verify(keys, *d.Event.Cursor, "order.created"); err != nil || c.Seq != 1 {
				t.Errorf("payload cursor %+v, %v; want seq 1", c, err)
			}
			gone, _ := ws.GetWebhook(ctx, "orders", "sub_gone")
			if gone.Watermark != 2 || gone.Retry.Seq != 0 || gone.Status.LastError != "" || gone.Status.Suspended {
				t.Errorf("after two 410s: %+v %+v; want the watermark at 2, no retry, the status untouched", gone.Retry, gone.Status)
			}
			flakyRec, _ := ws.GetWebhook(ctx, "orders", "sub_flaky")
			if flakyRec.Watermark != 0 || flakyRec.Retry.Seq != 1 || flakyRec.Retry.Attempts < 1 || flakyRec.Status.LastError != webhook.CategoryHTTP5xx {
				t.Errorf("flaky after a 503: watermark %d, %+v %+v", flakyRec.Watermark, flakyRec.Retry, flakyRec.Status)
			}

			// A 300 KiB event: not sent, not retried.
			before := log.requests.Load()
			big := `{"severity":"P1","pad":"` + strings.Repeat("x", 300<<10) + `"}`
			ev, _, err := st.AppendTopicEvent(ctx, "orders", "m-big", time.Now(), json.RawMessage(big))
			if err != nil {
				t.Fatal(err)
			}
			// A crash between the append and the POST: m3 is appended, never delivered by its ingest.
			if _, _, err := st.AppendTopicEvent(ctx, "orders", "m3", time.Now(), json.RawMessage(`{"severity":"P1","n":3}`)); err != nil {
				t.Fatal(err)
			}
			// The sweeper, until the flaky receiver's retries have come through.
			for i := 0; ; i++ {
				time.Sleep(60 * time.Millisecond)
				if _, err := wh.Sweep(ctx); err != nil {
					t.Fatal(err)
				}
				q.drain(ctx, t, wh)
				if r, _ := ws.GetWebhook(ctx, "orders", "sub_flaky"); r.Watermark == ev.Seq+1 {
					break
				}
				if i == 50 {
					r, _ := ws.GetWebhook(ctx, "orders", "sub_flaky")
					t.Fatalf("flaky never caught up: %+v %+v", r.Retry, r.Status)
				}
			}
			// The 300 KiB event is abandoned: a gap envelope in its place.
			if got, want := log.ids("sub_p1"), []string{`{"severity":"P1","n":1}`, "control:gap", `{"severity":"P1","n":3}`}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("sub_p1 after the sweep got %v, want %v (a gap, not the 300 KiB event)", got, want)
			}
			if got := log.ids("sub_flaky"); len(got) != 4 {
				t.Errorf("sub_flaky got %v, want m1, m2, a gap, m3 once each", got)
			}
			for _, id := range []string{"sub_p1", "sub_all", "sub_gone", "sub_flaky"} {
				r, _ := ws.GetWebhook(ctx, "orders", id)
				if r.Watermark != ev.Seq+1 || r.Retry.Seq != 0 || !r.LeaseUntil.IsZero() {
					t.Errorf("%s: watermark %d, retry %+v, lease %v; want %d, none, none", id, r.Watermark, r.Retry, r.LeaseUntil, ev.Seq+1)
				}
			}
			// Requests since: a gap and m3 to p1, all, gone, flaky (+ flaky's
			// 503 retry and its m1, m2) — never the big one.
			if n := log.requests.Load() - before; n > 11 {
				t.Errorf("%d POSTs during the sweeps, want at most 11 (the 300 KiB event is never sent)", n)
			}

			// Two ingests racing on one event: one accepted delivery per subscription.
			ev4, _, err := st.AppendTopicEvent(ctx, "orders", "m4", time.Now(), json.RawMessage(`{"severity":"P1","n":4}`))
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					wh.Handle(ctx, FanOut(&ev4))
					q.drain(ctx, t, wh)
				})
			}
			wg.Wait()
			wh.Sweep(ctx)
			q.drain(ctx, t, wh)
			if got := log.ids("sub_p1"); len(got) != 4 {
				t.Errorf("sub_p1 after racing ingests: %v, want m4 once more", got)
			}
			if got := log.ids("sub_all"); len(got) != 5 {
				t.Errorf("sub_all after racing ingests: %v, want m4 once more", got)
			}

			// The event type removed: its subscriptions end, told so.
			delete(types, "order.any")
			if _, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpReplace, types, "reg-2"); err != nil {
				t.Fatal(err)
			}
			if _, _, err := st.AppendTopicEvent(ctx, "orders", "m5", time.Now(), json.RawMessage(`{"n":5}`)); err != nil {
				t.Fatal(err)
			}
			wh.Sweep(ctx)
			q.drain(ctx, t, wh)
			if got := log.ids("sub_all"); got[len(got)-1] != "control:terminated" {
				t.Errorf("sub_all after its type was removed: %v, want a terminated envelope last", got)
			}
			if _, err := ws.GetWebhook(ctx, "orders", "sub_all"); err == nil {
				t.Error("sub_all is still stored after its type was removed")
			}
		})
	}
}

// TestWebhookRetriesAndSuspension (SQLite): against a receiver that
// always answers 503, an event is retried until webhook.Retry's attempts
// run out and then abandoned (the watermark moves past it, and a gap
// envelope is owed); after
// SuspendAfter of failures a subscription with an expiry is suspended
// (and then left alone by deliveries and sweeps), and one without expiry
// is ended: a terminated envelope is attempted and its record deleted.
func TestWebhookRetriesAndSuspension(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	var posts, terminated atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		var c webhook.Control
		if json.NewDecoder(r.Body).Decode(&c) == nil && c.Type == webhook.ControlTerminated {
			terminated.Add(1)
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	allow, _ := webhook.ParseAllow(srv.URL)
	keys := [][]byte{[]byte("ingest-suspend-state-key-0123456789ab")}
	sealer, _ := notify.NewSealer(keys, notify.WebhookSealLabel)
	ws := st.(Store)
	creator := st.(interface {
		CreateWebhook(context.Context, *notify.WebhookSubscription, int) error
	})
	for _, id := range []string{"sub_ttl", "sub_forever"} {
		w := &notify.WebhookSubscription{Topic: "orders", ID: id, Principal: "alice", Name: "order.created", URL: srv.URL + "/" + id,
			CreatedAt: time.Now(), UpdatedAt: time.Now(), Verified: true}
		if id == "sub_ttl" {
			w.ExpiresAt = time.Now().Add(time.Hour)
		}
		w.SealSecrets(sealer, notify.WebhookSecrets{Current: "whsec_" + base64.StdEncoding.EncodeToString([]byte("suspension-test-secret-32-bytes!"))})
		if err := creator.CreateWebhook(ctx, w, 10); err != nil {
			t.Fatal(err)
		}
	}
	q := &memQueue{}
	wh, err := New(Options{Store: ws, Queue: q, Sender: webhook.NewSender(webhook.Policy{Allow: allow}), Sealer: sealer, CursorKey: keys[0],
		Retry: webhook.Retry{Attempts: 2, Base: 10 * time.Millisecond, Max: 10 * time.Millisecond, Window: time.Minute}, SuspendAfter: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ev, _, err := st.AppendTopicEvent(ctx, "orders", "m1", time.Now(), json.RawMessage(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	q.Enqueue(ctx, FanOut(&ev))
	q.drain(ctx, t, wh)
	time.Sleep(20 * time.Millisecond)
	wh.Sweep(ctx) // the second and last attempt: abandoned; the gap owed is tried at once (and fails)
	q.drain(ctx, t, wh)
	for _, id := range []string{"sub_ttl", "sub_forever"} {
		w, err := ws.GetWebhook(ctx, "orders", id)
		if err != nil || w.Watermark != 1 || w.Retry.Gap != 1 || w.Retry.Seq != 2 || w.Retry.Abandoned != 1 || w.Status.LastError != webhook.CategoryHTTP5xx || w.Status.Suspended {
			t.Fatalf("%s after 2 failed attempts: %+v, %v; want the event abandoned with a gap owed, not suspended", id, w, err)
		}
		// Each attempt is kept in the record (the operator's view): the
		// event's two, then the gap envelope's (at the next Seq).
		if len(w.Attempts) != 3 {
			t.Fatalf("%s: %d attempts recorded, want 3: %+v", id, len(w.Attempts), w.Attempts)
		}
		for i, a := range w.Attempts {
			if a.Seq != int64(1+i/2) || a.Status != http.StatusServiceUnavailable || a.Category != webhook.CategoryHTTP5xx || a.Latency <= 0 || a.At.IsZero() {
				t.Errorf("%s: attempt %d = %+v; want seq %d, 503, %s, a latency and a time", id, i, a, 1+i/2, webhook.CategoryHTTP5xx)
			}
		}
	}
	// Failures go on past SuspendAfter.
	time.Sleep(450 * time.Millisecond)
	ev2, _, _ := st.AppendTopicEvent(ctx, "orders", "m2", time.Now(), json.RawMessage(`{"n":2}`))
	wh.Handle(ctx, FanOut(&ev2))
	q.drain(ctx, t, wh)
	w, err := ws.GetWebhook(ctx, "orders", "sub_ttl")
	if err != nil || !w.Status.Suspended || w.Watermark != 1 || w.Retry.Seq != 2 {
		t.Fatalf("sub_ttl after %v of failures: %+v, %v; want suspended with m2 pending", 450*time.Millisecond, w, err)
	}
	if _, err := ws.GetWebhook(ctx, "orders", "sub_forever"); err == nil {
		t.Error("sub_forever (no expiry) is still stored after sustained failure")
	}
	if terminated.Load() != 1 {
		t.Errorf("%d terminated envelopes attempted, want 1", terminated.Load())
	}
	n := posts.Load()
	ev3, _, _ := st.AppendTopicEvent(ctx, "orders", "m3", time.Now(), json.RawMessage(`{"n":3}`))
	wh.Handle(ctx, FanOut(&ev3))
	wh.Sweep(ctx)
	q.drain(ctx, t, wh)
	if posts.Load() != n {
		t.Errorf("%d POSTs to a suspended subscription", posts.Load()-n)
	}
}

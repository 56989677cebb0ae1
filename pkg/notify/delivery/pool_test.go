package delivery

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/webhook"
)

var testSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("delivery-pool-test-secret-32byte"))

// poolRig is a store, a Pool and its Engine running, for the tests of
// the local path.
type poolRig struct {
	st     notify.Store
	pool   *Pool
	eng    *Engine
	sealer *notify.Sealer
	keys   [][]byte
}

func newPoolRig(t *testing.T, o Options, allow ...string) *poolRig {
	t.Helper()
	r := &poolRig{st: newStore(t), pool: NewPool(&PoolOptions{PollInterval: 50 * time.Millisecond, SweepInterval: time.Hour}),
		keys: [][]byte{[]byte("delivery-pool-test-key-0123456789abc")}}
	r.sealer, _ = notify.NewSealer(r.keys, notify.WebhookSealLabel)
	var origins []webhook.Origin
	for _, a := range allow {
		o, err := webhook.ParseAllow(a)
		if err != nil {
			t.Fatal(err)
		}
		origins = append(origins, o...)
	}
	item, _ := json.Marshal(notify.EventItem{Name: "order.created", Topic: "orders"}.WithDefaults())
	if _, _, err := r.st.ApplyRegistry(context.Background(), notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order.created": item}, "reg"); err != nil {
		t.Fatal(err)
	}
	o.Store, o.Queue, o.Sealer, o.CursorKey = r.st.(Store), r.pool, r.sealer, r.keys[0]
	if o.Sender == nil {
		o.Sender = webhook.NewSender(webhook.Policy{Allow: origins})
	}
	o.EventTypes = RegistryEventTypes(r.st)
	var err error
	if r.eng, err = New(o); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.pool.Run(ctx, r.eng) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func (r *poolRig) subscribe(t *testing.T, prefix string, n int, base string) []string {
	t.Helper()
	var ids []string
	now := time.Now()
	for i := range n {
		id := fmt.Sprintf("%s%04d", prefix, i)
		w := &notify.WebhookSubscription{Topic: "orders", ID: id, Principal: "p", Name: "order.created", URL: base + "/" + id,
			CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour), Verified: true}
		w.SealSecrets(r.sealer, notify.WebhookSecrets{Current: testSecret})
		if err := r.st.(interface {
			CreateWebhook(context.Context, *notify.WebhookSubscription, int) error
		}).CreateWebhook(context.Background(), w, 1<<20); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// recorder is a verifying receiver that records what it accepted by
// subscription; before, if set, runs first and may answer a status.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  map[string][]string // subscription -> event "n" values (or control types)
	at   map[string][]time.Time
	stop chan struct{}
}

func newRecorder(t *testing.T, before func(r *http.Request) int) *recorder {
	t.Helper()
	sec, _ := webhook.ParseSecret(testSecret)
	rc := &recorder{got: map[string][]string{}, at: map[string][]time.Time{}, stop: make(chan struct{})}
	recv := &webhook.Receiver{Secrets: func(string) []webhook.Secret { return []webhook.Secret{sec} }, Dedup: -1,
		Handle: func(d webhook.Delivery) error {
			v := "control:"
			if d.Event != nil {
				var x struct {
					N string `json:"n"`
				}
				json.Unmarshal(d.Event.Data, &x)
				v = x.N
			} else {
				v += d.Control.Type
			}
			rc.mu.Lock()
			rc.got[d.SubscriptionID] = append(rc.got[d.SubscriptionID], v)
			rc.at[d.SubscriptionID] = append(rc.at[d.SubscriptionID], time.Now())
			rc.mu.Unlock()
			return nil
		}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if before != nil {
			if s := before(r); s != 0 {
				http.Error(w, "no", s)
				return
			}
		}
		recv.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(rc.stop); rc.srv.Close() })
	return rc
}

func (rc *recorder) events(sub string) []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got[sub])
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// TestPoolIsolation: 1,000 subscriptions on an origin that hangs and 20
// on a healthy one. An event appended by another process (no task: the
// pool's watcher finds it) reaches every healthy one promptly (logged),
// while the hanging origin has at most PerOrigin attempts in flight; the
// tasks waiting for it are parked, not polled (Counts.Deferred stays
// about one per task and event).
var hangN = 1000

func TestPoolIsolation(t *testing.T) {
	var (
		mu       sync.Mutex
		inflight int
		peak     int
	)
	var hang *recorder
	hang = newRecorder(t, func(r *http.Request) int {
		mu.Lock()
		inflight++
		peak = max(peak, inflight)
		mu.Unlock()
		select {
		case <-hang.stop:
		case <-r.Context().Done(): // the sender gave up
		}
		mu.Lock()
		inflight--
		mu.Unlock()
		return http.StatusServiceUnavailable
	})
	good := newRecorder(t, nil)
	r := newPoolRig(t, Options{}, hang.srv.URL, good.srv.URL)
	r.subscribe(t, "hang", hangN, hang.srv.URL)
	ids := r.subscribe(t, "good", 20, good.srv.URL)
	for i := range 3 {
		start := time.Now()
		n := fmt.Sprint(i)
		if _, _, err := r.st.AppendTopicEvent(context.Background(), "orders", "m"+n, start, json.RawMessage(`{"n":"`+n+`"}`)); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "event "+n+" at every healthy receiver", func() bool {
			for _, id := range ids {
				if len(good.events(id)) <= i {
					return false
				}
			}
			return true
		})
		t.Logf("event %s at the 20 healthy receivers %v after its append", n, time.Since(start))
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > DefaultPerOrigin {
		t.Errorf("%d attempts in flight to the hanging origin, want at most %d", peak, DefaultPerOrigin)
	}
}

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
				if d.Control.Error != nil {
					v += fmt.Sprintf("(%d)", d.Control.Error.Code)
				}
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

// TestPoolRecovery: a receiver that fails for 3.1 s, then is healthy,
// under the default schedule scaled down tenfold (100 ms, 500 ms, 1.5 s,
// 3 s, 12 s, 60 s): the event that failed and the backlog published
// while it failed arrive in order, each once, within 3.5 s of the
// recovery (the default schedule's 35 s after a 30 s outage, scaled;
// TestRetryRecovery proves the unscaled bound for every outage length).
func TestPoolRecovery(t *testing.T) {
	var (
		mu        sync.Mutex
		recovered time.Time
	)
	rc := newRecorder(t, func(*http.Request) int {
		mu.Lock()
		defer mu.Unlock()
		if recovered.IsZero() || time.Now().Before(recovered) {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	scaled := make([]time.Duration, len(webhook.DefaultDelays))
	for i, d := range webhook.DefaultDelays {
		scaled[i] = d / 10
	}
	r := newPoolRig(t, Options{Retry: webhook.Retry{Delays: scaled}}, rc.srv.URL)
	sub := r.subscribe(t, "rec", 1, rc.srv.URL)[0]
	start := time.Now()
	mu.Lock()
	recovered = start.Add(3100 * time.Millisecond)
	mu.Unlock()
	for i := range 3 {
		ev, _, err := r.st.AppendTopicEvent(context.Background(), "orders", fmt.Sprint("m", i), time.Now(), json.RawMessage(fmt.Sprintf(`{"n":"%d"}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		r.pool.Enqueue(context.Background(), FanOut(&ev))
		time.Sleep(time.Second)
	}
	eventually(t, 10*time.Second, "the backlog", func() bool { return len(rc.events(sub)) == 3 })
	rc.mu.Lock()
	last := rc.at[sub][2]
	rc.mu.Unlock()
	if got := rc.events(sub); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("received %v, want 0, 1, 2 in order", got)
	}
	if after := last.Sub(start.Add(3100 * time.Millisecond)); after > 3500*time.Millisecond {
		t.Errorf("backlog delivered %v after the recovery, want at most 3.5 s", after)
	} else {
		t.Logf("backlog delivered %v after the recovery", after)
	}
}

// TestFanOutPages: one event to 250 subscriptions, with pages of 100,
// is split into work: three fan-out tasks of one page each and one task
// per subscription, which any number of workers may run; each
// subscription gets the event once.
func TestFanOutPages(t *testing.T) {
	ctx := context.Background()
	rc := newRecorder(t, nil)
	q := &memQueue{}
	st := newStore(t)
	r := &poolRig{st: st, keys: [][]byte{[]byte("delivery-pages-test-key-0123456789ab")}}
	r.sealer, _ = notify.NewSealer(r.keys, notify.WebhookSealLabel)
	allow, _ := webhook.ParseAllow(rc.srv.URL)
	e, err := New(Options{Store: st.(Store), Queue: q, Sender: webhook.NewSender(webhook.Policy{Allow: allow}), Sealer: r.sealer, CursorKey: r.keys[0], PerOrigin: 64, Page: 100})
	if err != nil {
		t.Fatal(err)
	}
	ids := r.subscribe(t, "pg", 250, rc.srv.URL)
	publish(t, st, q, "m1", `{"n":"1"}`)
	fanouts, subs := 0, 0
	for {
		batch := q.Take()
		if len(batch) == 0 {
			break
		}
		var wg sync.WaitGroup
		sem := make(chan struct{}, 32)
		for _, task := range batch {
			if task.Kind == KindFanOut {
				fanouts++
			} else {
				subs++
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if _, err := e.Handle(ctx, task); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if fanouts != 3 || subs != 250 {
		t.Errorf("%d fan-out and %d subscription tasks, want 3 and 250", fanouts, subs)
	}
	for _, id := range ids {
		if got := rc.events(id); len(got) != 1 {
			t.Fatalf("%s got %v, want the event once", id, got)
		}
	}
}

// TestRetryTaskEarly: a retry task that arrives before its retry is due
// (another process's clock, SQS's whole seconds) waits again for the
// rest; a fan-out's task for the same subscription is dropped (the retry
// task exists).
func TestRetryTaskEarly(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	q := &memQueue{}
	r := &poolRig{st: st, keys: [][]byte{[]byte("delivery-early-test-key-0123456789ab")}}
	r.sealer, _ = notify.NewSealer(r.keys, notify.WebhookSealLabel)
	e, err := New(Options{Store: st.(Store), Queue: q, Sender: webhook.NewSender(webhook.Policy{}), Sealer: r.sealer, CursorKey: r.keys[0]})
	if err != nil {
		t.Fatal(err)
	}
	id := r.subscribe(t, "early", 1, "https://hooks.example")[0]
	w, _ := st.(Store).GetWebhook(ctx, "orders", id)
	w.Retry = notify.WebhookRetry{Seq: 1, Attempts: 1, FirstAt: time.Now(), NextAt: time.Now().Add(700 * time.Millisecond)}
	if err := st.(Store).UpdateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Handle(ctx, Task{Kind: KindSubscription, Topic: "orders", ID: id, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if n := len(q.Held()) + q.Len(); n != 0 {
		t.Fatalf("a fan-out's early task made %d tasks, want none", n)
	}
	if _, err := e.Handle(ctx, Task{Kind: KindSubscription, Topic: "orders", ID: id, Retry: true}); err != nil {
		t.Fatal(err)
	}
	if held := q.Held(); len(held) != 1 || !held[0].Retry || held[0].Delay <= 0 || held[0].Delay > 700*time.Millisecond {
		t.Fatalf("an early retry task made %+v, want one retry task delayed by the rest (at most 700 ms)", held)
	}
}

// TestAccessRevokedWebhook: a registry change that removes a group from
// an event type's access rule ends, within the pool's next poll, the
// webhook subscription whose recorded claims only that group admitted:
// its receiver gets a signed terminated envelope (Forbidden, -32024) and
// nothing after it,
// and the record is gone; a subscriber of a group still admitted keeps
// getting events.
func TestAccessRevokedWebhook(t *testing.T) {
	ctx := context.Background()
	rc := newRecorder(t, nil)
	r := newPoolRig(t, Options{}, rc.srv.URL)
	setRule := func(groups ...string) {
		t.Helper()
		item, _ := json.Marshal(notify.EventItem{Name: "order.created", Topic: "orders",
			Access: &notify.Access{Claims: map[string][]string{"cognito:groups": groups}}}.WithDefaults())
		if _, _, err := r.st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpReplace, map[string]json.RawMessage{"order.created": item}, "rule-"+fmt.Sprint(groups)); err != nil {
			t.Fatal(err)
		}
	}
	setRule("oncall", "sre")
	ids := r.subscribe(t, "acc", 2, rc.srv.URL)
	for i, group := range []string{"oncall", "sre"} {
		w, _ := r.st.(Store).GetWebhook(ctx, "orders", ids[i])
		w.Claims = notify.Claims{"cognito:groups": []any{group}}
		if err := r.st.(Store).UpdateWebhook(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	publishOne := func(n string) {
		ev, _, err := r.st.AppendTopicEvent(ctx, "orders", "m"+n, time.Now(), json.RawMessage(`{"n":"`+n+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		r.pool.Enqueue(ctx, FanOut(&ev))
	}
	publishOne("1")
	eventually(t, 10*time.Second, "event 1 at both", func() bool { return len(rc.events(ids[0])) == 1 && len(rc.events(ids[1])) == 1 })

	setRule("sre") // oncall removed: no event published, the change alone ends the subscription
	eventually(t, 10*time.Second, "the oncall subscriber told it ended", func() bool {
		got := rc.events(ids[0])
		return len(got) == 2 && got[1] == "control:terminated(-32024)"
	})
	eventually(t, 5*time.Second, "the oncall subscription deleted (after its envelope)", func() bool {
		_, err := r.st.(Store).GetWebhook(ctx, "orders", ids[0])
		return err != nil
	})
	publishOne("2")
	eventually(t, 10*time.Second, "event 2 at the sre subscriber", func() bool { return len(rc.events(ids[1])) == 2 })
	time.Sleep(300 * time.Millisecond)
	if got := rc.events(ids[0]); !slices.Equal(got, []string{"1", "control:terminated(-32024)"}) {
		t.Errorf("the oncall subscriber got %v, want 1 then terminated (Forbidden) and nothing after", got)
	}
	if got := rc.events(ids[1]); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("the sre subscriber got %v, want 1, 2", got)
	}
}

// TestRefreshDuringBacklog: a refresh (another writer of the record)
// during a long backlog makes the claim's renewal merge into the fresh
// record; the events after it are still delivered once each, in order
// (the run went on reading the log from the record it started with,
// delivering 17 to 25 twice).
func TestRefreshDuringBacklog(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	q := &memQueue{}
	var id string
	var n int
	var mu sync.Mutex
	rc := newRecorder(t, func(*http.Request) int {
		mu.Lock()
		n++
		bump := n == 10
		mu.Unlock()
		if bump { // a refresh, as events/subscribe writes it
			w, err := st.(Store).GetWebhook(ctx, "orders", id)
			if err == nil {
				w.UpdatedAt = time.Now()
				err = st.(Store).UpdateWebhook(ctx, w)
			}
			if err != nil {
				t.Error(err)
			}
		}
		return 0
	})
	r := &poolRig{st: st, keys: [][]byte{[]byte("delivery-refresh-test-key-0123456789")}}
	r.sealer, _ = notify.NewSealer(r.keys, notify.WebhookSealLabel)
	allow, _ := webhook.ParseAllow(rc.srv.URL)
	e, err := New(Options{Store: st.(Store), Queue: q, Sender: webhook.NewSender(webhook.Policy{Allow: allow}), Sealer: r.sealer, CursorKey: r.keys[0]})
	if err != nil {
		t.Fatal(err)
	}
	id = r.subscribe(t, "ref", 1, rc.srv.URL)[0]
	var want []string
	for i := range 30 {
		want = append(want, fmt.Sprint(i))
		if _, _, err := st.AppendTopicEvent(ctx, "orders", fmt.Sprint("m", i), time.Now(), json.RawMessage(fmt.Sprintf(`{"n":"%d"}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Handle(ctx, Task{Kind: KindSubscription, Topic: "orders", ID: id}); err != nil {
		t.Fatal(err)
	}
	q.drain(ctx, t, e)
	if got := rc.events(id); !slices.Equal(got, want) {
		t.Errorf("received %v\nwant     %v", got, want)
	}
}

// TestStaleLeaseHint: a fan-out read the subscription while another task
// held its lease, and that task has released it since (it delivered the
// previous event, then wrote its release). The subscription task made
// from that page delivers now: it does not wait for the lease the stale
// record shows (Lease: the timeout + 10 s, past TestPoolIsolation's 10 s
// on a loaded machine).
func TestStaleLeaseHint(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	q := &memQueue{}
	rc := newRecorder(t, nil)
	origins, err := webhook.ParseAllow(rc.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := &poolRig{st: st, keys: [][]byte{[]byte("delivery-stale-test-key-0123456789ab")}}
	r.sealer, _ = notify.NewSealer(r.keys, notify.WebhookSealLabel)
	e, err := New(Options{Store: st.(Store), Queue: q, Sender: webhook.NewSender(webhook.Policy{Allow: origins}), Sealer: r.sealer, CursorKey: r.keys[0]})
	if err != nil {
		t.Fatal(err)
	}
	id := r.subscribe(t, "stale", 1, rc.srv.URL)[0]
	ev, _, err := st.AppendTopicEvent(ctx, "orders", "m1", time.Now(), json.RawMessage(`{"n":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	hint, err := st.(Store).GetWebhook(ctx, "orders", id)
	if err != nil {
		t.Fatal(err)
	}
	hint.LeaseUntil = time.Now().Add(e.o.Lease) // as the page read it; the store's record is free
	if _, err := e.Handle(ctx, Task{Kind: KindSubscription, Topic: "orders", ID: id, Seq: ev.Seq, sub: hint, event: &ev}); err != nil {
		t.Fatal(err)
	}
	if got := rc.events(id); len(got) != 1 {
		t.Errorf("delivered %d events, want 1 (held: %+v)", len(got), q.Held())
	}
}

package delivery

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/eventcursor"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// TestAdmin runs the operator's view on both stores against real
// deliveries: list by type and by principal with state and attempts,
// counts, suspend (no POST while suspended), resume (delivered at once),
// replay from a cursor and from a time, refusals that change nothing (a
// held lease, a foreign cursor, bad arguments), delete; and no secret in
// anything it returns.
func TestAdmin(t *testing.T) {
	for name, st := range webhookStores(t) {
		t.Run(name, func(t *testing.T) { testAdmin(t, st) })
	}
}

func testAdmin(t *testing.T, st notify.Store) {
	ctx := context.Background()
	var mu sync.Mutex
	posts := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		posts[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/fail" {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	count := func(path string) int {
		mu.Lock()
		defer mu.Unlock()
		return posts[path]
	}
	allow, _ := webhook.ParseAllow(srv.URL)
	keys := [][]byte{[]byte("admin-test-state-key-0123456789abcdef")}
	sealer, _ := notify.NewSealer(keys, notify.WebhookSealLabel)
	ws := st.(Store)
	creator := st.(interface {
		CreateWebhook(context.Context, *notify.WebhookSubscription, int) error
	})
	for _, s := range []struct{ id, principal, typ, topic, url string }{
		{"sub_a", "alice", "order.created", "orders", srv.URL + "/a?token=whsec_inthequery"},
		{"sub_b", "bob", "order.created", "orders", srv.URL + "/fail"},
		{"sub_c", "alice", "invoice.paid", "invoices", srv.URL + "/c"},
	} {
		w := &notify.WebhookSubscription{Topic: s.topic, ID: s.id, Principal: s.principal, Name: s.typ, URL: s.url,
			CreatedAt: time.Now(), UpdatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Verified: true,
			Claims: notify.Claims{"sub": s.principal}}
		w.SealSecrets(sealer, notify.WebhookSecrets{Current: "whsec_" + base64.StdEncoding.EncodeToString([]byte("admin-test-signing-secret-32byte"))})
		if err := creator.CreateWebhook(ctx, w, 10); err != nil {
			t.Fatal(err)
		}
	}
	types := map[string]*notify.EventItem{
		"order.created": {Name: "order.created", Topic: "orders"},
		"invoice.paid":  {Name: "invoice.paid", Topic: "invoices"},
	}
	q := &memQueue{}
	eng, err := New(Options{Store: ws, Queue: q, Sender: webhook.NewSender(webhook.Policy{Allow: allow}), Sealer: sealer, CursorKey: keys[0],
		Retry: webhook.Retry{Attempts: 5, Base: time.Hour, Max: time.Hour, Window: 10 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Minute)
	for i, at := range []time.Duration{0, 10 * time.Second, 20 * time.Second} {
		ev, _, err := st.AppendTopicEvent(ctx, "orders", "m"+string(rune('1'+i)), base.Add(at), json.RawMessage(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		q.Enqueue(ctx, FanOut(&ev))
	}
	q.drain(ctx, t, eng)
	admin := &Admin{Store: ws, Queue: q, CursorKeys: keys,
		EventTypes: func(context.Context) (map[string]*notify.EventItem, error) { return types, nil }}
	noSecret := func(what string, v any) {
		t.Helper()
		b, _ := json.Marshal(v)
		if s := string(b); strings.Contains(s, "whsec_") || strings.Contains(s, "token=") || strings.Contains(s, `"sub":`) {
			t.Errorf("%s shows a secret or claims: %s", what, s)
		}
	}

	// By type: the type's topic only, with state and attempts.
	got, err := admin.List(ctx, Filter{Type: "order.created"})
	if err != nil || len(got.Subscriptions) != 2 || got.Partial {
		t.Fatalf("List by type = %+v, %v; want sub_a and sub_b", got, err)
	}
	noSecret("List", got)
	a, b := got.Subscriptions[0], got.Subscriptions[1]
	if a.ID != "sub_a" || a.State != StateActive || a.Watermark != 3 || len(a.Attempts) != 3 || a.Attempts[2].Category != AttemptOK || a.Attempts[2].Status != 200 || a.Attempts[2].LatencyMS <= 0 {
		t.Errorf("sub_a = %+v; want active at 3 with 3 accepted attempts", a)
	}
	if a.URL != srv.URL+"/a?(redacted)" {
		t.Errorf("sub_a URL = %q, want the query redacted", a.URL)
	}
	if b.ID != "sub_b" || b.State != StateRetrying || b.RetrySeq != 1 || len(b.Attempts) != 1 || b.Attempts[0].Status != 503 || b.Attempts[0].Category != webhook.CategoryHTTP5xx {
		t.Errorf("sub_b = %+v; want retrying event 1 after one 503", b)
	}
	// By principal: a walk of every topic.
	got, err = admin.List(ctx, Filter{Principal: "alice"})
	if err != nil || len(got.Subscriptions) != 2 || got.Subscriptions[0].ID != "sub_c" || got.Subscriptions[1].ID != "sub_a" || got.Scanned != 3 {
		t.Fatalf("List by principal = %+v, %v; want sub_c (invoices) and sub_a (orders) of 3 scanned", got, err)
	}
	if got, err := admin.List(ctx, Filter{Principal: "alice", Limit: 1}); err != nil || len(got.Subscriptions) != 1 || !got.Partial {
		t.Errorf("List with limit 1 = %+v, %v; want one, partial", got, err)
	}
	if _, err := admin.List(ctx, Filter{Limit: MaxAdminList + 1}); !errors.Is(err, ErrAdminInput) {
		t.Errorf("List over MaxAdminList = %v, want ErrAdminInput", err)
	}
	counts, err := admin.Counts(ctx)
	if err != nil || counts.Types["order.created"] != (TypeCounts{Total: 2, Active: 1, Retrying: 1}) || counts.Types["invoice.paid"] != (TypeCounts{Total: 1, Active: 1}) {
		t.Errorf("Counts = %+v, %v", counts, err)
	}

	// Suspend: nothing is POSTed, even when its retry is due.
	v, err := admin.Suspend(ctx, "orders", "sub_b")
	if err != nil || v.State != StateSuspended {
		t.Fatalf("Suspend = %+v, %v", v, err)
	}
	noSecret("Suspend", v)
	fails := count("/fail")
	q.Enqueue(ctx, Task{Kind: KindSubscription, Topic: "orders", ID: "sub_b"})
	eng.Sweep(ctx)
	q.drain(ctx, t, eng)
	if n := count("/fail"); n != fails {
		t.Errorf("%d POSTs to a suspended subscription", n-fails)
	}
	// Resume: the pending event is retried at once.
	if v, err = admin.Resume(ctx, "orders", "sub_b"); err != nil || v.State != StateRetrying || v.FailedSince != (time.Time{}) {
		t.Fatalf("Resume = %+v, %v", v, err)
	}
	q.drain(ctx, t, eng)
	if n := count("/fail"); n != fails+1 {
		t.Errorf("%d POSTs after Resume, want 1", n-fails)
	}

	// Replay from a cursor (at event 1): events 2 and 3 again; from a
	// time (between 2 and 3): event 3 again.
	before := count("/a")
	cur := eventcursor.Sign(keys[0], eventcursor.Cursor{Name: "order.created", Topic: "orders", Seq: 1})
	if v, err = admin.Replay(ctx, "orders", "sub_a", ReplayFrom{Cursor: cur}); err != nil || v.Watermark != 1 {
		t.Fatalf("Replay from a cursor = %+v, %v; want watermark 1", v, err)
	}
	q.drain(ctx, t, eng)
	if n := count("/a"); n != before+2 {
		t.Errorf("%d POSTs after a replay from event 1, want 2", n-before)
	}
	if v, err = admin.Replay(ctx, "orders", "sub_a", ReplayFrom{Since: base.Add(15 * time.Second)}); err != nil || v.Watermark != 2 {
		t.Fatalf("Replay from a time = %+v, %v; want watermark 2", v, err)
	}
	q.drain(ctx, t, eng)
	if n := count("/a"); n != before+3 {
		t.Errorf("%d POSTs after both replays, want 3", n-before)
	}
	if w, _ := ws.GetWebhook(ctx, "orders", "sub_a"); w.Watermark != 3 || len(w.Attempts) != notify.MaxWebhookAttempts-2 {
		t.Errorf("sub_a after the replays: watermark %d, %d attempts; want 3, 6", w.Watermark, len(w.Attempts))
	}

	// Refusals change nothing.
	was, _ := ws.GetWebhook(ctx, "orders", "sub_a")
	foreign := eventcursor.Sign(keys[0], eventcursor.Cursor{Name: "invoice.paid", Topic: "invoices", Seq: 0})
	forged := eventcursor.Sign([]byte("another-key-0123456789abcdef-0123"), eventcursor.Cursor{Name: "order.created", Topic: "orders", Seq: 0})
	for _, tc := range []struct {
		what string
		from ReplayFrom
	}{
		{"a cursor of another type", ReplayFrom{Cursor: foreign}},
		{"a cursor signed by another key", ReplayFrom{Cursor: forged}},
		{"neither cursor nor time", ReplayFrom{}},
		{"both", ReplayFrom{Cursor: cur, Since: base}},
		{"a time in the future", ReplayFrom{Since: time.Now().Add(time.Hour)}},
	} {
		if _, err := admin.Replay(ctx, "orders", "sub_a", tc.from); !errors.Is(err, ErrAdminInput) {
			t.Errorf("Replay with %s = %v, want ErrAdminInput", tc.what, err)
		}
	}
	if _, err := admin.Suspend(ctx, "", "sub_a"); !errors.Is(err, ErrAdminInput) {
		t.Errorf("Suspend without a topic = %v, want ErrAdminInput", err)
	}
	if _, err := admin.Suspend(ctx, "orders", "sub_nope"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("Suspend of a missing one = %v, want ErrNotFound", err)
	}
	if now, _ := ws.GetWebhook(ctx, "orders", "sub_a"); now.Version != was.Version {
		t.Errorf("refused requests wrote the record: version %d -> %d", was.Version, now.Version)
	}
	// A process holds the lease: refused with when it ends.
	c, _ := ws.GetWebhook(ctx, "invoices", "sub_c")
	c.LeaseUntil = time.Now().Add(time.Minute)
	if err := ws.UpdateWebhook(ctx, c); err != nil {
		t.Fatal(err)
	}
	for what, do := range map[string]func() error{
		"Suspend": func() error { _, err := admin.Suspend(ctx, "invoices", "sub_c"); return err },
		"Delete":  func() error { return admin.Delete(ctx, "invoices", "sub_c") },
	} {
		if err := do(); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "try again") {
			t.Errorf("%s of a leased subscription = %v, want ErrBusy", what, err)
		}
	}
	if now, _ := ws.GetWebhook(ctx, "invoices", "sub_c"); now.Version != c.Version || now.Status.Suspended {
		t.Errorf("refused (busy) requests wrote the record: %+v", now)
	}
	c.LeaseUntil = time.Time{}
	if err := ws.UpdateWebhook(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(ctx, "invoices", "sub_c"); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.GetWebhook(ctx, "invoices", "sub_c"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetWebhook after Delete = %v, want ErrNotFound", err)
	}
}

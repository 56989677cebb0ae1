package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// testWebhooks checks webhook subscriptions: one is created once and read
// back whole from another Store on the same database; updated only at its
// current version; a principal's live subscriptions are bounded by
// CreateWebhook's max; a topic's are listed in pages, and no other
// topic's; one without expiry stays, one with an expiry is gone after it
// (and its id reusable then); deleted ones are gone; bad arguments are
// refused and change nothing.
func testWebhooks(t *testing.T, s *suite) {
	_, ws, other := storesAs(t, s)
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond).UTC()
	sub := func(principal, topic, id string, ttl time.Duration) *notify.WebhookSubscription {
		w := &notify.WebhookSubscription{
			Topic: topic, ID: id, Principal: principal, Name: topic + ".created", URL: "https://hooks.example/" + principal,
			Arguments: json.RawMessage(`{"severity":"P1"}`), Secrets: []byte{0, 1, 2, 250},
			CreatedAt: now, UpdatedAt: now, Verified: true, Watermark: 7,
		}
		if ttl > 0 {
			w.ExpiresAt = now.Add(ttl)
		}
		return w
	}

	a := sub("alice", "orders", "sub_a1", 0)
	a.Claims = notify.Claims{"scope": "incidents:read", "team": "a", "cognito:groups": []any{"oncall", "sre"}}
	a.Retry = notify.WebhookRetry{Seq: 8, Attempts: 2, FirstAt: now, NextAt: now.Add(time.Minute), Abandoned: 1, Gap: 7}
	a.Status = notify.WebhookStatus{Suspended: true, LastDeliveryAt: now.Add(-time.Hour), LastError: "http_5xx", FailedSince: now.Add(-time.Minute)}
	a.LeaseUntil = now.Add(10 * time.Second)
	// The last attempts, as the delivery engine records them (the
	// operator's view): round-tripped, latency to the microsecond.
	for i := range notify.MaxWebhookAttempts + 2 {
		a.RecordAttempt(notify.WebhookAttempt{At: now.Add(time.Duration(i) * time.Second), Seq: int64(i), Status: 500 + i, Category: "http_5xx", Latency: time.Duration(1500+i) * time.Microsecond})
	}
	if len(a.Attempts) != notify.MaxWebhookAttempts || a.Attempts[0].Seq != 2 {
		t.Fatalf("RecordAttempt kept %d attempts from seq %d, want the last %d", len(a.Attempts), a.Attempts[0].Seq, notify.MaxWebhookAttempts)
	}
	if err := ws.CreateWebhook(ctx, a, 3); err != nil || a.Version != 1 {
		t.Fatalf("CreateWebhook = %v, version %d; want nil, 1", err, a.Version)
	}
	if err := other.CreateWebhook(ctx, sub("alice", "orders", "sub_a1", 0), 3); !errors.Is(err, notify.ErrExists) {
		t.Errorf("CreateWebhook of a taken id = %v, want ErrExists", err)
	}
	got, err := other.GetWebhook(ctx, "orders", "sub_a1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("GetWebhook (-created +read):\n%s", diff)
	}
	if _, err := other.GetWebhook(ctx, "invoices", "sub_a1"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetWebhook under another topic = %v, want ErrNotFound", err)
	}

	// Optimistic concurrency.
	stale := *got
	got.Watermark, got.LeaseUntil, got.ExpiresAt = 9, time.Time{}, now.Add(time.Hour)
	if err := ws.UpdateWebhook(ctx, got); err != nil || got.Version != 2 {
		t.Fatalf("UpdateWebhook = %v, version %d; want nil, 2", err, got.Version)
	}
	if err := other.UpdateWebhook(ctx, &stale); !errors.Is(err, notify.ErrConflict) {
		t.Errorf("UpdateWebhook at a stale version = %v, want ErrConflict", err)
	}
	again, err := other.GetWebhook(ctx, "orders", "sub_a1")
	if err != nil || again.Watermark != 9 || again.Version != 2 || !again.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Errorf("after UpdateWebhook: %+v, %v; want watermark 9, version 2, the new expiry", again, err)
	}
	missing := sub("alice", "orders", "sub_none", 0)
	missing.Version = 1
	if err := ws.UpdateWebhook(ctx, missing); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("UpdateWebhook of a missing one = %v, want ErrNotFound", err)
	}

	// The bound per principal, and what a refusal leaves.
	for _, id := range []string{"sub_a2", "sub_a3"} {
		if err := ws.CreateWebhook(ctx, sub("alice", "invoices", id, time.Hour), 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.CreateWebhook(ctx, sub("alice", "orders", "sub_a4", 0), 3); !errors.Is(err, notify.ErrLimit) {
		t.Errorf("a fourth CreateWebhook with max 3 = %v, want ErrLimit", err)
	}
	// CountWebhooks reads the same bound without a write, no further
	// than its limit.
	for _, tc := range []struct {
		principal string
		limit     int
		want      int
	}{{"alice", 3, 3}, {"alice", 10, 3}, {"alice", 2, 2}, {"nobody", 3, 0}} {
		if n, err := other.CountWebhooks(ctx, tc.principal, tc.limit); err != nil || n != tc.want {
			t.Errorf("CountWebhooks(%s, %d) = %d, %v; want %d", tc.principal, tc.limit, n, err, tc.want)
		}
	}
	for _, bad := range []struct {
		principal string
		limit     int
	}{{"", 3}, {"alice", 0}} {
		if _, err := other.CountWebhooks(ctx, bad.principal, bad.limit); !errors.Is(err, notify.ErrInvalid) {
			t.Errorf("CountWebhooks(%q, %d) = %v, want ErrInvalid", bad.principal, bad.limit, err)
		}
	}
	if _, err := ws.GetWebhook(ctx, "orders", "sub_a4"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("the refused subscription: %v, want ErrNotFound", err)
	}
	if err := other.CreateWebhook(ctx, sub("bob", "orders", "sub_b1", 0), 3); err != nil {
		t.Errorf("another principal's CreateWebhook = %v", err)
	}
	if err := ws.DeleteWebhook(ctx, &notify.WebhookSubscription{Topic: "invoices", ID: "sub_a3", Principal: "alice"}); err != nil {
		t.Fatalf("DeleteWebhook = %v", err)
	}
	if err := other.DeleteWebhook(ctx, &notify.WebhookSubscription{Topic: "invoices", ID: "sub_a3", Principal: "alice"}); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("DeleteWebhook again = %v, want ErrNotFound", err)
	}
	if _, err := other.GetWebhook(ctx, "invoices", "sub_a3"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetWebhook after DeleteWebhook = %v, want ErrNotFound", err)
	}
	if n, err := other.CountWebhooks(ctx, "alice", 3); err != nil || n != 2 {
		t.Errorf("CountWebhooks after a delete = %d, %v; want 2", n, err)
	}
	if err := other.CreateWebhook(ctx, sub("alice", "orders", "sub_a4", 0), 3); err != nil {
		t.Errorf("CreateWebhook after a delete freed a place = %v", err)
	}

	// A topic's subscriptions, in pages.
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("sub_p%02d", i)
		want = append(want, id)
		if err := ws.CreateWebhook(ctx, sub(fmt.Sprintf("p%d", i), "pages", id, 0), 3); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	after := ""
	for range 10 {
		page, next, err := other.TopicWebhooks(ctx, "pages", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 3 {
			t.Errorf("a page of %d, limit 3", len(page))
		}
		for _, w := range page {
			ids = append(ids, w.ID)
			if w.Topic != "pages" || w.Version != 1 || w.URL == "" {
				t.Errorf("listed %+v", w)
			}
		}
		if after = next; next == "" {
			break
		}
	}
	if !slices.Equal(ids, want) {
		t.Errorf("TopicWebhooks in pages: %v, want %v", ids, want)
	}

	// Expiry, from now (the steps above may have taken longer than a
	// short TTL from the test's start on a loaded machine).
	brief := sub("carol", "brief", "sub_c1", time.Hour)
	brief.ExpiresAt = time.Now().Add(1500 * time.Millisecond).Truncate(time.Millisecond).UTC()
	if err := ws.CreateWebhook(ctx, brief, 3); err != nil {
		t.Fatal(err)
	}
	if page, _, err := other.TopicWebhooks(ctx, "brief", "", 10); err != nil || len(page) != 1 {
		t.Errorf("TopicWebhooks before expiry: %d, %v; want 1", len(page), err)
	}
	time.Sleep(time.Until(brief.ExpiresAt.Add(100 * time.Millisecond)))
	if _, err := other.GetWebhook(ctx, "brief", "sub_c1"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetWebhook after expiry = %v, want ErrNotFound", err)
	}
	if page, _, err := other.TopicWebhooks(ctx, "brief", "", 10); err != nil || len(page) != 0 {
		t.Errorf("TopicWebhooks after expiry: %d, %v; want 0", len(page), err)
	}
	if _, err := other.GetWebhook(ctx, "orders", "sub_a1"); err != nil {
		t.Errorf("the subscription without expiry: %v", err)
	}
	if err := other.CreateWebhook(ctx, sub("carol", "brief", "sub_c1", time.Hour), 1); err != nil {
		t.Errorf("CreateWebhook over an expired one (max 1: the expired one does not count) = %v", err)
	}

	// Bad arguments.
	for name, w := range map[string]*notify.WebhookSubscription{
		"no topic":     {ID: "sub_x", Principal: "alice", Name: "n", URL: "https://x"},
		"no principal": {Topic: "orders", ID: "sub_x", Name: "n", URL: "https://x"},
		"no URL":       {Topic: "orders", ID: "sub_x", Principal: "alice", Name: "n"},
	} {
		if err := ws.CreateWebhook(ctx, w, 3); !errors.Is(err, notify.ErrInvalid) {
			t.Errorf("CreateWebhook (%s) = %v, want ErrInvalid", name, err)
		}
	}
	if _, _, err := ws.TopicWebhooks(ctx, "orders", "", notify.MaxWebhookPage+1); !errors.Is(err, notify.ErrInvalid) {
		t.Errorf("TopicWebhooks over the page bound = %v, want ErrInvalid", err)
	}
}

// testWebhookVerified checks the verified-callback records: one put is
// seen by another Store on the same database until it expires, a later
// put replaces it (an expired record is renewed), keys are independent,
// and empty or oversized keys are refused.
func testWebhookVerified(t *testing.T, s *suite) {
	_, ws, other := storesAs(t, s)
	ctx := t.Context()
	verified := func(st notify.WebhookStore, key string) bool {
		t.Helper()
		ok, err := st.WebhookVerified(ctx, key)
		if err != nil {
			t.Fatalf("WebhookVerified(%q): %v", key, err)
		}
		return ok
	}
	if verified(other, "wv1:a") {
		t.Error("a key never put is verified")
	}
	if err := ws.PutWebhookVerified(ctx, "wv1:a", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !verified(other, "wv1:a") || verified(other, "wv1:b") {
		t.Errorf("after a put of wv1:a: a %v, b %v; want true, false", verified(other, "wv1:a"), verified(other, "wv1:b"))
	}
	if err := ws.PutWebhookVerified(ctx, "wv1:b", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if verified(other, "wv1:b") {
		t.Error("a record put with an expiry in the past is verified")
	}
	if err := other.PutWebhookVerified(ctx, "wv1:b", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !verified(ws, "wv1:b") {
		t.Error("an expired record put again is not verified")
	}
	if err := ws.PutWebhookVerified(ctx, "wv1:a", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if verified(other, "wv1:a") {
		t.Error("a record replaced by an expired one is still verified")
	}
	for _, bad := range []string{"", strings.Repeat("k", notify.MaxVerifiedKeyBytes+1)} {
		if err := ws.PutWebhookVerified(ctx, bad, time.Now().Add(time.Hour)); !errors.Is(err, notify.ErrInvalid) {
			t.Errorf("PutWebhookVerified of a %d-byte key = %v, want ErrInvalid", len(bad), err)
		}
		if _, err := ws.WebhookVerified(ctx, bad); !errors.Is(err, notify.ErrInvalid) {
			t.Errorf("WebhookVerified of a %d-byte key = %v, want ErrInvalid", len(bad), err)
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// principalHeader authenticates a request as its X-Principal header.
type principalHeader struct{}

func (principalHeader) Authenticate(r *http.Request) (string, error) {
	return r.Header.Get("X-Principal"), nil
}

// TestEventsSubscribeCommands: `events subscribe` (both eras) with a
// given secret prints the subscription (id, refreshBefore, cursor); the
// same again refreshes it (same id, deliveryStatus); the secret may come
// from $MCPUSH_WEBHOOK_SECRET, and is never printed; --ttl none asks
// for no expiry; `events unsubscribe` ends it, and a second one is
// NotFound; without a principal the server refuses (Forbidden, with a
// hint).
func TestEventsSubscribeCommands(t *testing.T) {
	ctx := context.Background()
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c webhook.Control
		json.NewDecoder(r.Body).Decode(&c)
		json.NewEncoder(w).Encode(map[string]string{"challenge": c.Challenge})
	}))
	defer hook.Close()
	allow, _ := webhook.ParseAllow(hook.URL)
	srv := mcp.NewServer(&mcp.Implementation{Name: "cli-test", Version: "1"}, store, &mcp.ServerOptions{
		DynamicRegistries: true, Events: true,
		Webhooks: &mcp.WebhookOptions{Sender: webhook.NewSender(webhook.Policy{Allow: allow})},
	})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: principalHeader{}})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
	item := json.RawMessage(`{"name":"order.created","topic":"orders","inputSchema":{"type":"object","properties":{"region":{"type":"string"}}}}`)
	if _, _, err := store.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order.created": item}, "m1"); err != nil {
		t.Fatal(err)
	}
	secret := mcp.NewWebhookSecret()
	for _, proto := range []string{"2025", "2026"} {
		as := []string{"--protocol", proto, "--header", "X-Principal: alice-" + proto}
		e, out, errb := testEnv(ts.URL)
		if code := run(ctx, append(as, "events", "subscribe", "order.created", "region=eu", "--callback", hook.URL, "--secret", secret), e); code != 0 {
			t.Fatalf("%s: events subscribe: exit %d: %s", proto, code, errb)
		}
		var res mcp.SubscribeEventsResult
		if err := json.Unmarshal([]byte(out.String()), &res); err != nil || !strings.HasPrefix(res.ID, "sub_") || res.RefreshBefore == nil || res.Cursor == nil {
			t.Fatalf("%s: events subscribe: %q: %v", proto, out.String(), err)
		}
		e, out, errb = testEnv(ts.URL)
		if code := run(ctx, append(as, "events", "subscribe", "order.created", "--arg", "region=eu", "--callback", hook.URL, "--secret", secret, "--ttl", "2h"), e); code != 0 {
			t.Fatalf("%s: refresh: exit %d: %s", proto, code, errb)
		}
		var again mcp.SubscribeEventsResult
		if err := json.Unmarshal([]byte(out.String()), &again); err != nil || again.ID != res.ID || again.DeliveryStatus == nil || !again.DeliveryStatus.Active {
			t.Errorf("%s: refresh: %q: %v", proto, out.String(), err)
		}

		e, out, errb = testEnv(ts.URL)
		e.webhookSecret = secret
		if code := run(ctx, append(as, "events", "subscribe", "order.created", "--callback", hook.URL, "--ttl", "none"), e); code != 0 {
			t.Fatalf("%s: events subscribe ($MCPUSH_WEBHOOK_SECRET): exit %d: %s", proto, code, errb)
		}
		if strings.Contains(out.String()+errb.String(), "whsec_") || !strings.Contains(out.String(), `"refreshBefore": null`) {
			t.Errorf("%s: --ttl none: stdout %q, stderr %q", proto, out.String(), errb.String())
		}

		e, out, errb = testEnv(ts.URL)
		if code := run(ctx, append(as, "events", "unsubscribe", "order.created", "region=eu", "--callback", hook.URL), e); code != 0 || out.String() != "unsubscribed\n" {
			t.Errorf("%s: events unsubscribe: exit %d: %q %s", proto, code, out.String(), errb)
		}
		e, _, errb = testEnv(ts.URL)
		if code := run(ctx, append(as, "events", "unsubscribe", "order.created", "region=eu", "--callback", hook.URL), e); code == 0 || !strings.Contains(errb.String(), "NotFound") {
			t.Errorf("%s: a second unsubscribe: exit %d: %s", proto, code, errb)
		}
		e, _, errb = testEnv(ts.URL)
		if code := run(ctx, []string{"--protocol", proto, "events", "subscribe", "order.created", "--callback", hook.URL, "--secret", secret}, e); code == 0 || !strings.Contains(errb.String(), "Forbidden") || !strings.Contains(errb.String(), "hint: webhooks need a server with authentication") {
			t.Errorf("%s: anonymous subscribe: exit %d: %s", proto, code, errb)
		}
	}
}

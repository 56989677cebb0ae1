package mcp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// newWhsec returns a fresh whsec_ secret of n random bytes.
func newWhsec(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return webhook.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// whCall makes a 2026-era request of method as principal ("" for none).
func whCall(t *testing.T, url, principal, method, params string) *rpcReply {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + `,` + meta2026(`{}`) + `}}`
	h := headers2026(method, "")
	if principal != "" {
		h = append(h, "X-Principal", principal)
	}
	_, r := call2026(t, url, body, h...)
	return r
}

// snapshot returns the stored subscriptions of topic, as JSON, to compare
// before and after a refused request.
func snapshot(t *testing.T, ws notify.WebhookStore, topic string) string {
	t.Helper()
	subs, _, err := ws.TopicWebhooks(context.Background(), topic, "", notify.MaxWebhookPage)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(subs)
	return string(b)
}

// TestEventsSubscribe: events/subscribe and events/unsubscribe on both
// stores, with an authenticated principal and a real webhook.Receiver on
// loopback (allowed by origin): refused requests (anonymous, bad
// secrets, private, loopback, link-local, metadata and IPv6 callbacks, a
// wrong challenge echo, an unknown or webhook-less event type, arguments
// against the schema, another principal's unsubscribe, the per-principal
// bound) each answer their SEP-3415 error and change no stored state; a
// subscribe verifies the callback once, stores the secret sealed, grants
// a clamped TTL (or no expiry when asked), and a refresh keeps the id,
// reports deliveryStatus and keeps the rotated-out secret for the grace
// window.
func TestEventsSubscribe(t *testing.T) {
	for _, hs := range clockedStores(t, time.Now) {
		t.Run(hs.name, func(t *testing.T) {
			ctx := context.Background()
			var verifications atomic.Int64
			var current atomic.Value // the secret the receiver knows
			recv := &webhook.Receiver{
				Secrets: func(string) []webhook.Secret {
					s, _ := webhook.ParseSecret(current.Load().(string))
					return []webhook.Secret{s}
				},
				Handle: func(d webhook.Delivery) error {
					if d.Control != nil && d.Control.Type == "verification" {
						verifications.Add(1)
					}
					return nil
				},
			}
			good := httptest.NewServer(recv)
			defer good.Close()
			liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte(`{"challenge":"not-the-one"}`))
			}))
			defer liar.Close()
			allow, err := webhook.ParseAllow(good.URL + "," + liar.URL)
			if err != nil {
				t.Fatal(err)
			}
			st := hs.open(t)
			ws := st.(notify.WebhookStore)
			logs := &testutil.LockedBuffer{}
			srv := mcp.NewServer(&mcp.Implementation{Name: "webhooks", Version: "1"}, st, &mcp.ServerOptions{
				Logger:            slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				DynamicRegistries: true, Events: true, RegistryRefresh: 20 * time.Millisecond,
				StateKeys: [][]byte{[]byte("events-webhook-key-0123456789abcdef01")},
				Webhooks:  &mcp.WebhookOptions{Sender: webhook.NewSender(webhook.Policy{Allow: allow}), MaxPerPrincipal: 3},
			})
			h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: headerPrincipal{}})
			ts := httptest.NewServer(h)
			defer func() { ts.Close(); h.Close() }()
			topic := "incidents-" + hs.name
			items := map[string]json.RawMessage{}
			for _, it := range []notify.EventItem{
				{Name: "incident.created", Topic: topic, InputSchema: json.RawMessage(`{"type":"object","properties":{"severity":{"type":"string","enum":["P1","P2"]}}}`)},
				{Name: "incident.polled", Topic: topic, Delivery: []string{notify.DeliveryPoll}},
			} {
				items[it.Name], _ = json.Marshal(it.WithDefaults())
			}
			if _, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, items, "m-"+hs.name); err != nil {
				t.Fatal(err)
			}
			if r := rpc2026(t, ts.URL, "events/list", ""); r.Error != nil || !strings.Contains(fmt.Sprint(r.Result["events"]), "webhook") {
				t.Fatalf("events/list does not offer webhook: %+v", r)
			}

			secret := newWhsec(32)
			current.Store(secret)
			params := func(name, url, secret, extra string) string {
				return `"name":"` + name + `","arguments":{"severity":"P1"},"delivery":{"mode":"webhook","url":"` + url + `","secret":"` + secret + `"}` + extra
			}
			other := rpc2026(t, ts.URL, "events/poll", `"name":"incident.polled","cursor":null`)
			otherCursor, _ := other.Result["cursor"].(string)
			if otherCursor == "" {
				t.Fatalf("poll of incident.polled: %+v", other)
			}
			before := snapshot(t, ws, topic)
			refused := []struct {
				name, principal, params string
				code                    int
				data                    string
			}{
				{"anonymous", "", params("incident.created", good.URL, secret, ""), mcp.CodeForbidden, `"reason":"unauthenticated"`},
				{"no whsec_ prefix", "alice", params("incident.created", good.URL, strings.TrimPrefix(secret, "whsec_"), ""), mcp.CodeInvalidParams, ""},
				{"a 16-byte secret", "alice", params("incident.created", good.URL, newWhsec(16), ""), mcp.CodeInvalidParams, ""},
				{"a 65-byte secret", "alice", params("incident.created", good.URL, newWhsec(65), ""), mcp.CodeInvalidParams, ""},
				{"no secret", "alice", params("incident.created", good.URL, "", ""), mcp.CodeInvalidParams, ""},
				{"http", "alice", params("incident.created", "http://hooks.example.com/x", secret, ""), mcp.CodeInvalidParams, ""},
				{"loopback", "alice", params("incident.created", "https://127.0.0.1/x", secret, ""), mcp.CodeInvalidParams, ""},
				{"private", "alice", params("incident.created", "https://10.1.2.3/x", secret, ""), mcp.CodeInvalidParams, ""},
				{"link-local", "alice", params("incident.created", "https://169.254.10.1/x", secret, ""), mcp.CodeInvalidParams, ""},
				{"metadata", "alice", params("incident.created", "https://169.254.169.254/latest/meta-data", secret, ""), mcp.CodeInvalidParams, ""},
				{"IPv6 loopback", "alice", params("incident.created", "https://[::1]/x", secret, ""), mcp.CodeInvalidParams, ""},
				{"IPv6 ULA", "alice", params("incident.created", "https://[fd00::1]/x", secret, ""), mcp.CodeInvalidParams, ""},
				{"IPv6 link-local", "alice", params("incident.created", "https://[fe80::1]/x", secret, ""), mcp.CodeInvalidParams, ""},
				{"IPv4-mapped IPv6", "alice", params("incident.created", "https://[::ffff:127.0.0.1]/x", secret, ""), mcp.CodeInvalidParams, ""},
				{"wrong challenge echo", "alice", params("incident.created", liar.URL, secret, ""), mcp.CodeCallbackEndpointError, `"reason":"challenge_failed"`},
				{"unknown event", "alice", params("incident.nope", good.URL, secret, ""), mcp.CodeNotFound, `"kind":"event"`},
				{"poll-only event", "alice", params("incident.polled", good.URL, secret, ""), mcp.CodeUnsupported, `"feature":"deliveryMode"`},
				{"arguments against the schema", "alice", `"name":"incident.created","arguments":{"severity":"P9"},"delivery":{"url":"` + good.URL + `","secret":"` + secret + `"}`, mcp.CodeInvalidParams, ""},
				{"push mode", "alice", `"name":"incident.created","delivery":{"mode":"push","url":"` + good.URL + `","secret":"` + secret + `"}`, mcp.CodeUnsupported, `"feature":"deliveryMode"`},
				{"another type's cursor", "alice", params("incident.created", good.URL, secret, `,"cursor":"`+otherCursor+`"`), mcp.CodeInvalidParams, ""},
				{"forged cursor", "alice", params("incident.created", good.URL, secret, `,"cursor":"ev1.e30.AAAA"`), mcp.CodeInvalidParams, ""},
			}
			for _, tc := range refused {
				r := whCall(t, ts.URL, tc.principal, "events/subscribe", tc.params)
				if r.Error == nil || r.Error.Code != tc.code || !strings.Contains(string(r.Error.Data), tc.data) {
					t.Errorf("%s: %+v, want code %d with %s", tc.name, r.Error, tc.code, tc.data)
				}
				if r.Error != nil && strings.Contains(r.Error.Message, strings.TrimPrefix(secret, "whsec_")) {
					t.Errorf("%s: the error quotes the secret: %s", tc.name, r.Error.Message)
				}
			}
			if got := snapshot(t, ws, topic); got != before {
				t.Fatalf("refused subscribes changed the store: %s", got)
			}

			// A subscribe: verified once, stored sealed.
			t0 := time.Now()
			r := whCall(t, ts.URL, "alice", "events/subscribe", params("incident.created", good.URL, secret, `,"cursor":null`))
			if r.Error != nil {
				t.Fatalf("subscribe: %+v", r.Error)
			}
			id, _ := r.Result["id"].(string)
			rb, _ := time.Parse(time.RFC3339, fmt.Sprint(r.Result["refreshBefore"]))
			if !strings.HasPrefix(id, "sub_") || r.Result["resultType"] != "complete" || r.Result["cursor"] == nil || r.Result["truncated"] != false ||
				rb.Before(t0.Add(time.Hour-time.Second)) || rb.After(time.Now().Add(time.Hour)) || r.Result["deliveryStatus"] != nil {
				t.Fatalf("subscribe result: %+v", r.Result)
			}
			if n := verifications.Load(); n != 1 {
				t.Errorf("%d verifications, want 1", n)
			}
			stored, err := ws.GetWebhook(ctx, topic, id)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(stored.Secrets, []byte(strings.TrimPrefix(secret, "whsec_"))) || bytes.Contains(stored.Secrets, []byte("whsec_")) {
				t.Error("the secret is stored in the clear")
			}
			if stored.Principal != "alice" || !stored.Verified || string(stored.Arguments) != `{"severity":"P1"}` || stored.URL != good.URL {
				t.Errorf("stored %+v", stored)
			}

			// A refresh with a new secret: same id, deliveryStatus, the old secret kept for the grace window.
			rotated := newWhsec(48)
			current.Store(rotated)
			r = whCall(t, ts.URL, "alice", "events/subscribe", `"name":"incident.created","arguments":{ "severity" : "P1" },"delivery":{"url":"`+good.URL+`","secret":"`+rotated+`"},"ttlMs":1000`)
			if r.Error != nil || r.Result["id"] != id {
				t.Fatalf("refresh: %+v %+v", r.Result, r.Error)
			}
			ds, _ := r.Result["deliveryStatus"].(map[string]any)
			if ds == nil || ds["active"] != true || ds["lastError"] != nil {
				t.Errorf("refresh deliveryStatus: %+v", r.Result["deliveryStatus"])
			}
			if rb, _ := time.Parse(time.RFC3339, fmt.Sprint(r.Result["refreshBefore"])); rb.Before(t0.Add(mcp.MinWebhookTTL)) {
				t.Errorf("ttlMs 1000 granted until %v: below the floor", rb)
			}
			if n := verifications.Load(); n != 1 {
				t.Errorf("%d verifications after the refresh, want 1 (the subscription is verified)", n)
			}
			stored, _ = ws.GetWebhook(ctx, topic, id)
			sealer, _ := notify.NewSealer([][]byte{[]byte("events-webhook-key-0123456789abcdef01")}, notify.WebhookSealLabel)
			sec, err := stored.OpenSecrets(sealer)
			if err != nil || sec.Current != rotated || sec.Previous != secret || sec.PreviousUntil.Before(time.Now().Add(50*time.Minute)) {
				t.Errorf("secrets after a rotation: current %t, previous %t, until %v, %v", sec.Current == rotated, sec.Previous == secret, sec.PreviousUntil, err)
			}

			// A refresh reactivates a suspended subscription, and says it was suspended.
			stored.Status = notify.WebhookStatus{Suspended: true, LastError: webhook.CategoryBlockedAddress, FailedSince: time.Now().Add(-2 * time.Hour)}
			if err := ws.UpdateWebhook(ctx, stored); err != nil {
				t.Fatal(err)
			}
			// Its callback must pass the handshake again (it was verified
			// within 24 h, but has been failing since): a receiver that
			// does not verify keeps it suspended.
			current.Store(newWhsec(32))
			r = whCall(t, ts.URL, "alice", "events/subscribe", `"name":"incident.created","arguments":{"severity":"P1"},"delivery":{"url":"`+good.URL+`","secret":"`+rotated+`"}`)
			if r.Error == nil || r.Error.Code != mcp.CodeCallbackEndpointError {
				t.Errorf("refresh of a suspended subscription whose callback fails the handshake: %+v, want CallbackEndpointError", r.Error)
			}
			if still, _ := ws.GetWebhook(ctx, topic, id); still == nil || !still.Status.Suspended {
				t.Errorf("after a failed re-verification: %+v; want still suspended", still)
			}
			current.Store(rotated)
			handshakes := verifications.Load()
			r = whCall(t, ts.URL, "alice", "events/subscribe", `"name":"incident.created","arguments":{"severity":"P1"},"delivery":{"url":"`+good.URL+`","secret":"`+rotated+`"}`)
			if n := verifications.Load() - handshakes; n != 1 {
				t.Errorf("%d verifications by the refresh of a suspended subscription, want 1", n)
			}
			ds, _ = r.Result["deliveryStatus"].(map[string]any)
			if r.Error != nil || ds == nil || ds["active"] != false || ds["lastError"] != "connection_refused" || ds["failedSince"] == nil {
				t.Errorf("refresh of a suspended subscription: %+v %+v; want active false, lastError connection_refused (the wire category), failedSince", r.Result, r.Error)
			}
			if again, _ := ws.GetWebhook(ctx, topic, id); again == nil || again.Status.Suspended || !again.Status.FailedSince.IsZero() {
				t.Errorf("after the refresh: %+v; want reactivated, its failure window afresh", again)
			}

			// No expiry when asked.
			r = whCall(t, ts.URL, "alice", "events/subscribe", `"name":"incident.created","delivery":{"url":"`+good.URL+`","secret":"`+rotated+`"},"ttlMs":null`)
			if r.Error != nil || r.Result["refreshBefore"] != nil {
				t.Fatalf("ttlMs null: %+v %+v", r.Result, r.Error)
			}
			// The bound: alice has 2; a third is fine, a fourth is refused and stores nothing.
			r = whCall(t, ts.URL, "alice", "events/subscribe", `"name":"incident.created","arguments":{"severity":"P2"},"delivery":{"url":"`+good.URL+`","secret":"`+rotated+`"}`)
			if r.Error != nil {
				t.Fatalf("third subscribe: %+v", r.Error)
			}
			before = snapshot(t, ws, topic)
			r = whCall(t, ts.URL, "alice", "events/subscribe", `"name":"incident.created","arguments":{"severity":"P2"},"delivery":{"url":"`+good.URL+`/other","secret":"`+rotated+`"}`)
			if r.Error == nil || r.Error.Code != mcp.CodeResourceExhausted || !strings.Contains(string(r.Error.Data), `"limit":"subscriptions"`) {
				t.Errorf("fourth subscribe: %+v", r.Error)
			}

			// Another principal's unsubscribe: NotFound, nothing changed.
			r = whCall(t, ts.URL, "mallory", "events/unsubscribe", `"name":"incident.created","arguments":{"severity":"P1"},"delivery":{"url":"`+good.URL+`"}`)
			if r.Error == nil || r.Error.Code != mcp.CodeNotFound || !strings.Contains(string(r.Error.Data), `"kind":"subscription"`) {
				t.Errorf("mallory's unsubscribe: %+v", r.Error)
			}
			r = whCall(t, ts.URL, "", "events/unsubscribe", `"name":"incident.created","arguments":{"severity":"P1"},"delivery":{"url":"`+good.URL+`"}`)
			if r.Error == nil || r.Error.Code != mcp.CodeForbidden {
				t.Errorf("anonymous unsubscribe: %+v", r.Error)
			}
			if got := snapshot(t, ws, topic); got != before {
				t.Fatalf("refused requests changed the store")
			}
			r = whCall(t, ts.URL, "alice", "events/unsubscribe", `"name":"incident.created","arguments":{"severity":"P1"},"delivery":{"url":"`+good.URL+`"}`)
			if r.Error != nil || r.Result["resultType"] != "complete" {
				t.Fatalf("unsubscribe: %+v", r.Error)
			}
			if _, err := ws.GetWebhook(ctx, topic, id); err == nil {
				t.Error("the subscription is still stored after its unsubscribe")
			}
			r = whCall(t, ts.URL, "alice", "events/unsubscribe", `"name":"incident.created","arguments":{"severity":"P1"},"delivery":{"url":"`+good.URL+`"}`)
			if r.Error == nil || r.Error.Code != mcp.CodeNotFound {
				t.Errorf("a second unsubscribe: %+v", r.Error)
			}
			for _, sec := range []string{secret, rotated} {
				if strings.Contains(logs.String(), strings.TrimPrefix(sec, "whsec_")) {
					t.Error("a secret is in the server's log")
				}
			}
			if !strings.Contains(logs.String(), "webhook subscription created") {
				t.Error("the log has no record of the subscription (is the logger wired?)")
			}
		})
	}
}

// TestCanonicalArguments: member order, spacing, number spelling and
// HTML-significant characters do not change the key; values do.
func TestCanonicalArguments(t *testing.T) {
	same := []string{`{"b":1,"a":"x<y"}`, ` { "a" : "x<y" , "b" : 1.0 } `, `{"a":"x\u003cy","b":10e-1}`}
	for _, s := range same {
		got, err := mcp.CanonicalArguments(json.RawMessage(s))
		if err != nil || string(got) != `{"a":"x<y","b":1}` {
			t.Errorf("CanonicalArguments(%s) = %s, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "null", "{}", " {} "} {
		if got, err := mcp.CanonicalArguments(json.RawMessage(s)); err != nil || string(got) != "{}" {
			t.Errorf("CanonicalArguments(%q) = %s, %v", s, got, err)
		}
	}
	if _, err := mcp.CanonicalArguments(json.RawMessage(`[1]`)); err == nil {
		t.Error("an array accepted as arguments")
	}
	a := mcp.WebhookSubscriptionID("alice", "https://h/x", "e", []byte(`{"a":1}`))
	if b := mcp.WebhookSubscriptionID("bob", "https://h/x", "e", []byte(`{"a":1}`)); a == b || len(a) != len("sub_")+32 {
		t.Errorf("ids %s and %s", a, b)
	}
}

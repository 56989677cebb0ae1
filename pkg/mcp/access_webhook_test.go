package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// TestAccessWebhookDelivery: webhook subscriptions to a type whose rule
// binds the team, made by two tenants with no arguments, are delivered
// by the ingest only their own team's events (their arguments were
// bound at subscribe), on both stores and in both eras. (The re-check of
// the recorded claims at delivery is pkg/notify/delivery's:
// TestAccessRevokedWebhook.)
func TestAccessWebhookDelivery(t *testing.T) {
	for _, hs := range clockedStores(t, time.Now) {
		t.Run(hs.name, func(t *testing.T) {
			ctx := context.Background()
			secret := newWhsec(32)
			parsed, _ := webhook.ParseSecret(secret)
			var mu sync.Mutex
			got := map[string][]string{} // subscription id → teams delivered
			hook := httptest.NewServer(&webhook.Receiver{
				Secrets: func(string) []webhook.Secret { return []webhook.Secret{parsed} },
				Handle: func(d webhook.Delivery) error {
					if d.Event != nil {
						var data struct{ Team string }
						json.Unmarshal(d.Event.Data, &data)
						mu.Lock()
						got[d.SubscriptionID] = append(got[d.SubscriptionID], data.Team)
						mu.Unlock()
					}
					return nil
				},
			})
			defer hook.Close()
			st := hs.open(t)
			url := accessServer(t, st, hook.URL)
			sfx := "-" + hs.name
			evs, _ := accessTypes(sfx)
			if _, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, evs, "ev"+sfx); err != nil {
				t.Fatal(err)
			}
			sealer, err := notify.NewSealer([][]byte{[]byte("access-test-key-0123456789abcdef0123")}, notify.WebhookSealLabel)
			if err != nil {
				t.Fatal(err)
			}
			allow, _ := webhook.ParseAllow(hook.URL)
			q := &drainQueue{}
			wh, err := delivery.New(delivery.Options{
				Store: st.(delivery.Store), Queue: q, Sender: webhook.NewSender(webhook.Policy{Allow: allow}), Sealer: sealer,
				CursorKey: []byte("access-test-key-0123456789abcdef0123"),
				EventTypes: func(ctx context.Context) (map[string]*notify.EventItem, error) {
					out := map[string]*notify.EventItem{}
					for k, v := range evs {
						out[k] = decodeItem(t, v)
					}
					return out, nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			in := ingest.New(st, &ingest.Options{Delivery: q})
			for _, era := range []string{"2025", "2026"} {
				t.Run(era, func(t *testing.T) {
					mu.Lock()
					clear(got)
					mu.Unlock()
					ids := map[string]string{}
					for _, name := range []string{"alice", "bob"} {
						c := newCaller(t, url, name, era)
						r := c.call("events/subscribe", `"name":"incident.created","delivery":{"url":"`+hook.URL+`/`+era+`","secret":"`+secret+`"}`)
						if r.Error != nil {
							t.Fatalf("subscribe as %s: %+v", name, r.Error)
						}
						ids[name], _ = r.Result["id"].(string)
					}
					var recs []events.SNSEventRecord
					for i, team := range []string{"a", "b", "c", "a"} {
						recs = append(recs, events.SNSEventRecord{EventSource: "aws:sns", SNS: events.SNSEntity{
							Type: "Notification", MessageID: era + "-" + hs.name + "-" + string(rune('0'+i)), TopicArn: "arn:aws:sns:us-east-1:123456789012:mcpush-events",
							Timestamp: time.Now(), Message: `{"type":"event","topic":"incidents` + sfx + `","data":{"team":"` + team + `"}}`,
						}})
					}
					if _, err := in.Handle(ctx, events.SNSEvent{Records: recs}); err != nil {
						t.Fatal(err)
					}
					q.drain(ctx, t, wh)
					mu.Lock()
					defer mu.Unlock()
					for name, want := range map[string][]string{"alice": {"a", "a"}, "bob": {"b"}} {
						teams := slices.Clone(got[ids[name]])
						sort.Strings(teams)
						if !slices.Equal(teams, want) {
							t.Errorf("delivered to %s: %v, want %v", name, teams, want)
						}
					}
				})
			}
		})
	}
}

// drainQueue is a delivery.Queue that a test drains by hand, running
// every task (delays ignored) until none is left.
type drainQueue struct{ testutil.Queue[delivery.Task] }

func (q *drainQueue) drain(ctx context.Context, t *testing.T, e *delivery.Engine) {
	q.Drain(t, func(task delivery.Task) error { _, err := e.Handle(ctx, task); return err })
}

// headerClaimsAuth: the principal from X-Principal, the claims from
// X-Claims (a JSON object), so that one principal's claims can change
// between requests, as a user's do between two tokens.
type headerClaimsAuth struct{}

func (a headerClaimsAuth) Authenticate(r *http.Request) (string, error) {
	p, _, _, err := a.AuthenticateClaims(r)
	return p, err
}

func (headerClaimsAuth) AuthenticateClaims(r *http.Request) (string, time.Time, notify.Claims, error) {
	var c notify.Claims
	if err := json.Unmarshal([]byte(r.Header.Get("X-Claims")), &c); err != nil || r.Header.Get("X-Principal") == "" {
		return "", time.Time{}, nil, fmt.Errorf("%w: no X-Principal or X-Claims", mcp.ErrUnauthorized)
	}
	return r.Header.Get("X-Principal"), time.Time{}, c, nil
}

// TestAccessWebhookRefresh: a refresh re-checks the subscriber's claims:
// with its group removed (a new token) it is Forbidden and the stored
// subscription is unchanged (its recorded claims, its expiry); with
// another group the rule admits, the refresh records the new claims.
// Both stores.
func TestAccessWebhookRefresh(t *testing.T) {
	for _, hs := range clockedStores(t, time.Now) {
		t.Run(hs.name, func(t *testing.T) {
			ctx := context.Background()
			secret := newWhsec(32)
			parsed, _ := webhook.ParseSecret(secret)
			hook := httptest.NewServer(&webhook.Receiver{Secrets: func(string) []webhook.Secret { return []webhook.Secret{parsed} }, Handle: func(webhook.Delivery) error { return nil }})
			defer hook.Close()
			allow, _ := webhook.ParseAllow(hook.URL)
			st := hs.open(t)
			ws := st.(notify.WebhookStore)
			srv := mcp.NewServer(&mcp.Implementation{Name: "refresh", Version: "1"}, st, &mcp.ServerOptions{
				DynamicRegistries: true, Events: true,
				StateKeys: [][]byte{[]byte("access-test-key-0123456789abcdef0123")},
				Webhooks:  &mcp.WebhookOptions{Sender: webhook.NewSender(webhook.Policy{Allow: allow})},
			})
			h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: headerClaimsAuth{}})
			ts := httptest.NewServer(h)
			defer func() { ts.Close(); h.Close() }()
			topic := "pager-refresh-" + hs.name
			item, _ := json.Marshal(notify.EventItem{Name: "page", Topic: topic, Access: &notify.Access{Claims: map[string][]string{"cognito:groups": {"oncall", "sre"}}}}.WithDefaults())
			if _, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"page": item}, "refresh-"+hs.name); err != nil {
				t.Fatal(err)
			}
			subscribe := func(groups string) *rpcReply {
				body := `{"jsonrpc":"2.0","id":1,"method":"events/subscribe","params":{"name":"page","delivery":{"url":"` + hook.URL + `","secret":"` + secret + `"},` + meta2026(`{}`) + `}}`
				_, r := call2026(t, ts.URL, body, append(headers2026("events/subscribe", ""), "X-Principal", "dana", "X-Claims", `{"cognito:groups":`+groups+`,"email":"dana@example.com"}`)...)
				return r
			}
			r := subscribe(`["oncall"]`)
			if r.Error != nil {
				t.Fatalf("subscribe: %+v", r.Error)
			}
			id := fmt.Sprint(r.Result["id"])
			before := snapshot(t, ws, topic)
			if r := subscribe(`["dev"]`); r.Error == nil || r.Error.Code != mcp.CodeForbidden {
				t.Errorf("refresh without the group: %+v, want Forbidden", r.Error)
			}
			if after := snapshot(t, ws, topic); after != before {
				t.Errorf("the refused refresh changed the subscription:\n%s\n%s", before, after)
			}
			if r := subscribe(`["sre"]`); r.Error != nil || fmt.Sprint(r.Result["id"]) != id {
				t.Fatalf("refresh with another admitted group: %+v %v", r.Error, r.Result["id"])
			}
			w, err := ws.GetWebhook(ctx, topic, id)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(notify.Claims{"cognito:groups": []any{"sre"}}, w.Claims); diff != "" {
				t.Errorf("recorded claims after the refresh (-want +got):\n%s", diff)
			}
		})
	}
}

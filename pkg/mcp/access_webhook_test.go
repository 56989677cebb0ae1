package mcp_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// TestAccessWebhookDelivery: webhook subscriptions to a type whose rule
// binds the team, made by two tenants with no arguments, are delivered
// by the ingest only their own team's events (their arguments were
// bound at subscribe), on both stores and in both eras. (The re-check of
// the recorded claims at delivery, WebhookSubscription.Permitted, is the
// delivery's to call.)
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
			wh, err := ingest.NewWebhooks(ingest.WebhookOptions{
				Store: st.(ingest.WebhookStore), Sender: webhook.NewSender(webhook.Policy{Allow: allow}), Sealer: sealer,
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
			in := ingest.New(st, &ingest.Options{Webhooks: wh})
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

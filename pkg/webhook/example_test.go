package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/mcpush/mcpush/pkg/webhook"
)

// A Sender delivers a signed event to a Receiver, after the verification
// handshake. The receiver runs on loopback, so its origin is allowed (as
// MCPUSH_WEBHOOK_ALLOW would allow it); a public receiver needs https and
// no allow entry.
func Example() {
	secret, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		log.Fatal(err)
	}
	recv := &webhook.Receiver{
		Secrets: func(subscriptionID string) []webhook.Secret { return []webhook.Secret{secret} },
		Handle: func(d webhook.Delivery) error {
			switch {
			case d.Event != nil:
				fmt.Printf("event %s %s %s\n", d.Event.Name, d.Event.EventID, d.Event.Data)
			case d.Control != nil:
				fmt.Printf("control %s for %s\n", d.Control.Type, d.SubscriptionID)
			}
			return nil
		},
	}
	srv := httptest.NewServer(recv)
	defer srv.Close()

	allow, err := webhook.ParseAllow(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	sender := webhook.NewSender(webhook.Policy{Allow: allow})
	ctx := context.Background()
	if o := sender.Verify(ctx, srv.URL+"/hooks", "sub_1", []webhook.Secret{secret}); !o.OK() {
		log.Fatal(o.Err)
	}
	body, err := webhook.EventBody("order.created:m1", "order.created", time.Now(), json.RawMessage(`{"orderId":"o-1"}`), "")
	if err != nil {
		log.Fatal(err)
	}
	o := sender.Send(ctx, webhook.Message{ID: "order.created:m1", SubscriptionID: "sub_1", URL: srv.URL + "/hooks", Body: body, Secrets: []webhook.Secret{secret}})
	fmt.Println("status", o.Status, "ok", o.OK())
	// Output:
	// control verification for sub_1
	// event order.created order.created:m1 {"orderId":"o-1"}
	// status 204 ok true
}

// Secrets never print their key.
func ExampleSecret() {
	s, _ := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	fmt.Println(s)
	_, err := webhook.ParseSecret("whsec_c2hvcnQ=")
	fmt.Println(err)
	// Output:
	// whsec_…(redacted)
	// webhook: invalid secret: it decodes to 5 bytes, not 24 to 64
}

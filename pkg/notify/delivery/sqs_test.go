package delivery_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/mcpush/mcpush/internal/esm"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// TestSQSPath: the AWS path on moto (DynamoDB and SQS): an SNS event
// through the ingest hands one fan-out task to the SQS queue and returns;
// the event-source mapping feeds the tasks to HandleSQS: the fan-out
// enqueues one task per subscription, each delivers; a receiver that
// fails once is retried through a delayed message; every subscription
// gets the event exactly once. A message that is not a task is a batch
// item failure.
func TestSQSPath(t *testing.T) {
	ctx := context.Background()
	endpoint := moto.Start(t)
	client := moto.NewSQSClient(endpoint)
	queueURL, err := moto.NewQueue(ctx, client, fmt.Sprintf("delivery-%d", time.Now().UnixNano()), 30)
	if err != nil {
		t.Fatal(err)
	}
	table := fmt.Sprintf("sqs-path-%d", time.Now().UnixNano())
	dyn := moto.NewClient(ctx, endpoint)
	if err := dynamostore.CreateTable(ctx, dyn, table); err != nil {
		t.Fatal(err)
	}
	st := dynamostore.New(dyn, table, nil)

	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("sqs-path-test-secret-of-32-bytes"))
	sec, _ := webhook.ParseSecret(secret)
	var (
		mu    sync.Mutex
		got   = map[string]int{}
		fails = map[string]bool{}
	)
	recv := &webhook.Receiver{Secrets: func(string) []webhook.Secret { return []webhook.Secret{sec} }, Dedup: -1,
		Handle: func(d webhook.Delivery) error {
			mu.Lock()
			got[d.SubscriptionID]++
			mu.Unlock()
			return nil
		}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sub := r.Header.Get(webhook.HeaderSubscriptionID)
		mu.Lock()
		first := sub == "flaky" && !fails[sub]
		fails[sub] = true
		mu.Unlock()
		if first {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		recv.ServeHTTP(w, r)
	}))
	defer srv.Close()
	allow, _ := webhook.ParseAllow(srv.URL)
	keys := [][]byte{[]byte("sqs-path-state-key-0123456789abcdef")}
	sealer, _ := notify.NewSealer(keys, notify.WebhookSealLabel)
	item, _ := json.Marshal(notify.EventItem{Name: "order.created", Topic: "orders"}.WithDefaults())
	if _, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order.created": item}, "reg"); err != nil {
		t.Fatal(err)
	}
	subs := []string{"flaky"}
	for i := range 25 {
		subs = append(subs, fmt.Sprintf("sub_%02d", i))
	}
	now := time.Now()
	for _, id := range subs {
		w := &notify.WebhookSubscription{Topic: "orders", ID: id, Principal: "p", Name: "order.created", URL: srv.URL + "/" + id,
			CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour), Verified: true}
		w.SealSecrets(sealer, notify.WebhookSecrets{Current: secret})
		if err := st.CreateWebhook(ctx, w, 100); err != nil {
			t.Fatal(err)
		}
	}
	q := delivery.NewSQSQueue(client, queueURL)
	eng, err := delivery.New(delivery.Options{Store: st, Queue: q, Sender: webhook.NewSender(webhook.Policy{Allow: allow}),
		Sealer: sealer, CursorKey: keys[0], EventTypes: delivery.RegistryEventTypes(st)})
	if err != nil {
		t.Fatal(err)
	}
	in := ingest.New(st, &ingest.Options{Delivery: q})
	if _, err := in.Handle(ctx, events.SNSEvent{Records: []events.SNSEventRecord{{EventSource: "aws:sns", SNS: events.SNSEntity{
		MessageID: "m1", TopicArn: "arn:aws:sns:us-east-1:123456789012:orders", Timestamp: now,
		Message: `{"type":"event","topic":"orders","data":{"n":1}}`}}}}); err != nil {
		t.Fatal(err)
	}
	// The ingest's whole hand-off: one task on the queue.
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &queueURL, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil || attrs.Attributes["ApproximateNumberOfMessages"] != "1" {
		t.Fatalf("queue after the ingest: %v, %v; want 1 message", attrs.Attributes, err)
	}
	// Lambda's event-source mapping, mimicked (internal/esm), invoking
	// the handler with the event's JSON as the function would get it.
	mapping, err := esm.NewSQS(client, queueURL, func(ctx context.Context, event []byte) ([]byte, error) {
		var ev events.SQSEvent
		if err := json.Unmarshal(event, &ev); err != nil {
			return nil, err
		}
		resp, _ := eng.HandleSQS(ctx, ev)
		return json.Marshal(resp)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	drainCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := mapping.Drain(drainCtx, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(subs)
	}); err != nil {
		t.Fatalf("draining the queue: %v (%d of %d subscriptions got the event)", err, len(got), len(subs))
	}
	mu.Lock()
	for _, id := range subs {
		if got[id] != 1 {
			t.Errorf("%s got the event %d times, want 1", id, got[id])
		}
	}
	mu.Unlock()

	// A message that is not a task fails alone.
	resp, _ := eng.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "bad", Body: "not a task", EventSource: "aws:sqs"},
		{MessageId: "good", Body: `{"k":"fanout","t":"orders","s":1}`, EventSource: "aws:sqs"},
	}})
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "bad" {
		t.Errorf("batch item failures %+v, want only the message that is not a task", resp.BatchItemFailures)
	}
}

package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// TestWebhookIdleCost counts what an idle webhook subscriber costs on
// DynamoDB (moto): the stored items' sizes, and the requests of one
// refresh (events/subscribe of an existing key, 2026 era), which a
// subscriber at the default 1 h grant makes about 720 times a month. It
// fails if a refresh takes more than 3 requests (2, and a third when its expiry moves to another 6-hour bucket of the principal index) or the subscription's
// items more than 2 KB. docs/costs.md prices the figures it logs.
func TestWebhookIdleCost(t *testing.T) {
	ctx := context.Background()
	client := moto.NewClient(ctx, moto.Start(t))
	table := fmt.Sprintf("webhook-cost-%d", time.Now().UnixNano())
	if err := dynamostore.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	counter := dynamostore.NewCounter(client)
	st := dynamostore.New(counter, table, nil)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c webhook.Control
		json.NewDecoder(r.Body).Decode(&c)
		json.NewEncoder(w).Encode(map[string]string{"challenge": c.Challenge})
	}))
	defer hook.Close()
	allow, _ := webhook.ParseAllow(hook.URL)
	srv := mcp.NewServer(&mcp.Implementation{Name: "cost", Version: "1"}, st, &mcp.ServerOptions{
		DynamicRegistries: true, Events: true, RegistryRefresh: time.Hour,
		StateKeys: [][]byte{[]byte("webhook-cost-key-0123456789abcdef0123")},
		Webhooks:  &mcp.WebhookOptions{Sender: webhook.NewSender(webhook.Policy{Allow: allow})},
	})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: headerPrincipal{}})
	ts := httptest.NewServer(h)
	defer func() { ts.Close(); h.Close() }()
	item, _ := json.Marshal(notify.EventItem{Name: "incident.created", Topic: "incidents"}.WithDefaults())
	if _, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"incident.created": item}, "m1"); err != nil {
		t.Fatal(err)
	}
	params := `"name":"incident.created","arguments":{"severity":"P1"},"delivery":{"mode":"webhook","url":"` + hook.URL + `/hooks/a-typical-callback-path","secret":"` + newWhsec(32) + `"}`
	if r := whCall(t, ts.URL, "alice@example.com", "events/subscribe", params); r.Error != nil {
		t.Fatal(r.Error)
	}
	whCall(t, ts.URL, "alice@example.com", "events/subscribe", params) // warm: the registry in the process's cache
	before := counter.Counts()
	start := time.Now()
	r := whCall(t, ts.URL, "alice@example.com", "events/subscribe", params)
	if r.Error != nil {
		t.Fatal(r.Error)
	}
	took := time.Since(start)
	after := counter.Counts()
	var reqs int64
	ops := map[string]int64{}
	for op, v := range after {
		if d := v - before[op]; d != 0 {
			ops[op] = d
			reqs += d
		}
	}
	// The stored items of the subscription: its record and its principal index entry.
	size := 0
	for _, pk := range []string{"W#incidents", "WP#alice@example.com"} {
		out, err := client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: pk}}})
		if err != nil || len(out.Items) != 1 {
			t.Fatalf("items of %s: %d, %v", pk, len(out.Items), err)
		}
		size += itemSize(out.Items[0])
	}
	t.Logf("one refresh: %d DynamoDB requests %v in %v (moto); the subscription's items: %d bytes", reqs, ops, took, size)
	if reqs > 3 || size > 2048 {
		t.Errorf("a refresh of %d requests, %d bytes stored; want at most 3 and 2 KB", reqs, size)
	}
}

// itemSize is DynamoDB's size of an item: attribute names and values.
func itemSize(it map[string]types.AttributeValue) int {
	n := 0
	for k, v := range it {
		n += len(k)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value)/2 + 1
		case *types.AttributeValueMemberB:
			n += len(v.Value)
		case *types.AttributeValueMemberBOOL:
			n++
		}
	}
	return n
}

package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// ExampleClientSession_StreamEvents holds a push subscription to an
// event type of the Events extension: from a cursor (here a poll's), it
// gets the events published since, as the SNS ingest delivers them, each
// with the cursor to persist and resume from.
func ExampleClientSession_StreamEvents() {
	dir, _ := os.MkdirTemp("", "mcpush-example")
	defer os.RemoveAll(dir)
	store, err := sqlitestore.New(filepath.Join(dir, "mcpush.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	// The event type, as an SNS registry message would put it.
	item, _ := json.Marshal(notify.EventItem{Name: "order.created", Topic: "orders"}.WithDefaults())
	if _, _, err := store.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order.created": item}, "types-1"); err != nil {
		log.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "example", Version: "1"}, store, &mcp.ServerOptions{DynamicRegistries: true, Events: true})
	h := mcp.NewStreamableHandler(srv, nil)
	defer h.Close()
	ts := httptest.NewServer(h)
	defer ts.Close()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "example-client", Version: "1"}, &mcp.ClientOptions{NoStandaloneStream: true}).Connect(ctx, ts.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close(ctx)
	now, err := cs.PollEvents(ctx, &mcp.PollEventsParams{Name: "order.created"})
	if err != nil {
		log.Fatal(err)
	}
	for i, id := range []string{"sns-1", "sns-2"} {
		ingest.New(store, nil).Handle(ctx, events.SNSEvent{Records: []events.SNSEventRecord{{EventSource: "aws:sns", EventVersion: "1.0",
			SNS: events.SNSEntity{Type: "Notification", MessageID: id, TopicArn: "arn:aws:sns:us-east-1:123456789012:orders",
				Timestamp: time.Now(), Message: fmt.Sprintf(`{"id":%d}`, i+1)}}}})
	}

	n := 0
	err = cs.StreamEvents(ctx, mcp.StreamEventsParams{Name: "order.created", Cursor: now.Cursor}, nil, func(m *mcp.EventStreamMessage) error {
		switch m.Kind {
		case "active":
			fmt.Println("active, truncated:", m.Truncated)
		case "event":
			fmt.Println("event", m.Event.Name, string(m.Event.Data), m.Event.EventID == mcp.EventID("order.created", fmt.Sprintf("sns-%d", n+1)))
			if n++; n == 2 {
				return mcp.ErrStopStreaming // m.Cursor is where to resume
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// active, truncated: false
	// event order.created {"id":1} true
	// event order.created {"id":2} true
}

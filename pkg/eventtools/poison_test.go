package eventtools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
)

// nested is a JSON value nested depth levels deep: [[...[1]...]].
func nested(depth int) string {
	return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth)
}

// TestPoisonEventRefused: ingest refuses an event nested 9,000 deep
// (which the server could still encode and every reader would refuse)
// and stores the deepest it accepts, so that the topic stays readable:
// events_recent through the Go client returns every stored event, the
// deepest one included.
func TestPoisonEventRefused(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	sns := func(id, msg string) events.SNSEventRecord {
		return events.SNSEventRecord{SNS: events.SNSEntity{MessageID: id, TopicArn: "arn:aws:sns:us-east-1:123456789012:orders",
			Timestamp: time.Now(), Message: msg}}
	}
	deepest := notify.MaxStoredJSONDepth - 1 // the envelope is one level
	sum, err := ingest.New(e.store, nil).Handle(ctx, events.SNSEvent{Records: []events.SNSEventRecord{
		sns("first", `{"type":"event","topic":"orders","data":{"n":1}}`),
		sns("poison", `{"type":"event","topic":"orders","data":`+nested(9000)+`}`),
		sns("poison-bare", nested(9000)),
		sns("deepest", `{"type":"event","topic":"orders","data":`+nested(deepest)+`}`),
	}})
	if err == nil || sum.Accepted != 2 || sum.Rejected != 2 {
		t.Fatalf("summary %+v, err %v; want 2 accepted, the 2 nested 9,000 deep rejected", sum, err)
	}
	for _, e := range sum.Errors {
		if !strings.Contains(e, "levels deep, more than 968") {
			t.Errorf("error %q does not say how deep", e)
		}
	}

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	res, err := cs.CallTool(ctx, eventtools.EventsRecent, map[string]any{"topic": "orders"}, nil)
	if err != nil || res.IsError {
		t.Fatalf("events_recent of the topic: %v %+v", err, res)
	}
	var out eventtools.EventsOutput
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Events) != 2 || out.Events[0].MessageID != "first" || string(out.Events[1].Data) != nested(deepest) {
		t.Errorf("events_recent: %d events, want first and the deepest", len(out.Events))
	}
}

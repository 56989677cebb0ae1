package costs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
)

// maxFanOutRequests is issue 8's target for one event to fanOutSessions
// subscribed sessions on DynamoDB.
const (
	fanOutSessions    = 300
	maxFanOutRequests = 40
)

// TestFanOutRequests counts the store requests of one event's ingest to
// 300 subscribed sessions, in the steady state (the topic's second event):
// at most 40 DynamoDB requests, made of one topic append, one read of the
// events before it, one subscriber listing (a Query and a BatchGetItem per
// 100 subscribers) and, per batch of notify.MaxAppendEach sessions, two
// BatchGetItem and a few TransactWriteItems; on SQLite the same shape in
// Store calls (AppendTopicEvent, ReadTopicEvents and Subscribers once, one
// AppendEach per batch). Every session then holds the two events'
// notifications exactly once and in order: resources/updated, and the
// message where its log level admits it.
func TestFanOutRequests(t *testing.T) {
	batches := (fanOutSessions + notify.MaxAppendEach - 1) / notify.MaxAppendEach
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			f := measureFanOut(t, b, fanOutSessions)
			t.Logf("one event to %d sessions on %s: %d reads, %d writes (%s) in %v",
				fanOutSessions, b.name, f.reads, f.writes, f.detail, f.took)
			switch b.name {
			case "sqlite":
				want := map[string]int{"AppendTopicEvent": 1, "Subscribers": 1, "ReadTopicEvents": 1, "AppendEach": batches}
				for op, n := range want {
					if got := b.tally.count(op); got != n {
						t.Errorf("%s calls = %d, want %d (all: %s)", op, got, n, f.detail)
					}
				}
				if f.reads+f.writes != 3+batches {
					t.Errorf("%d Store calls (%s), want %d", f.reads+f.writes, f.detail, 3+batches)
				}
			case "dynamodb":
				if n := f.reads + f.writes; n > maxFanOutRequests {
					t.Errorf("%d DynamoDB requests (%s), want at most %d", n, f.detail, maxFanOutRequests)
				}
				// A Query of the earlier events and one of the listing, a
				// BatchGetItem per 100 listed and two per batch (150 keys:
				// session items, stream heads, subscription markers); the
				// topic append and at most four transactions per batch.
				if got, want := b.tally.count("Query"), 2; got != want {
					t.Errorf("Query = %d, want %d", got, want)
				}
				if got, want := b.tally.count("BatchGetItem"), (fanOutSessions+99)/100+2*batches; got != want {
					t.Errorf("BatchGetItem = %d, want %d", got, want)
				}
				if got := b.tally.count("TransactWriteItems"); got < 1+batches || got > 1+4*batches {
					t.Errorf("TransactWriteItems = %d, want 1 + %d..%d", got, batches, 4*batches)
				}
			}
			checkFannedOut(t, b.store, f)
		})
	}
}

// checkFannedOut checks that each session of f holds the two events
// measureFanOut ingested, once each and in order: its SessionStream log is
// resources/updated for each, and for sessions at level info each
// followed by the message with the event.
func checkFannedOut(t *testing.T, st notify.Store, f fanOutFigures) {
	forEach(len(f.sessions), func(i int) {
		id := f.sessions[i]
		evs, err := st.ReadEvents(context.Background(), id, notify.SessionStream, 0, 10)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			return
		}
		var got []string
		for _, ev := range evs {
			var msg struct {
				Method string `json:"method"`
				Params struct {
					URI  string           `json:"uri"`
					Data ingest.EventData `json:"data"`
				} `json:"params"`
			}
			if err := json.Unmarshal(ev.Data, &msg); err != nil {
				t.Errorf("%s: %v", id, err)
			}
			if msg.Method == "notifications/message" {
				got = append(got, fmt.Sprintf("message %s %d", msg.Params.Data.Topic, msg.Params.Data.Sequence))
			} else {
				got = append(got, msg.Method+" "+msg.Params.URI)
			}
		}
		updated := "notifications/resources/updated " + ingest.EventURI(f.topic)
		want := []string{updated, fmt.Sprintf("message %s 1", f.topic), updated, fmt.Sprintf("message %s 2", f.topic)}
		if i%2 == 1 {
			want = []string{updated, updated}
		}
		if !slices.Equal(want, got) {
			t.Errorf("%s holds %q, want %q", id, got, want)
		}
	})
}

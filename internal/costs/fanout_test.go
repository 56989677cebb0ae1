package costs

import (
	"context"
	"encoding/json"
	"sync"
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
// 300 subscribed sessions: at most 40 DynamoDB requests, made of one
// topic append, one subscriber listing (a Query and a BatchGetItem per 100
// subscribers) and, per batch of notify.MaxAppendEach sessions, two
// BatchGetItem and a few TransactWriteItems; on SQLite the same shape in
// Store calls (one AppendTopicEvent, one Subscribers, one AppendEach per
// batch). Every session then holds the event's notifications exactly
// once: resources/updated, and the message where its log level admits it.
func TestFanOutRequests(t *testing.T) {
	batches := (fanOutSessions + notify.MaxAppendEach - 1) / notify.MaxAppendEach
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			f := measureFanOut(t, b, fanOutSessions)
			t.Logf("one event to %d sessions on %s: %d reads, %d writes (%s) in %v",
				fanOutSessions, b.name, f.reads, f.writes, f.detail, f.took)
			switch b.name {
			case "sqlite":
				want := map[string]int{"AppendTopicEvent": 1, "Subscribers": 1, "AppendEach": batches}
				for op, n := range want {
					if got := b.tally.count(op); got != n {
						t.Errorf("%s calls = %d, want %d (all: %s)", op, got, n, f.detail)
					}
				}
				if f.reads+f.writes != 2+batches {
					t.Errorf("%d Store calls (%s), want %d", f.reads+f.writes, f.detail, 2+batches)
				}
			case "dynamodb":
				if n := f.reads + f.writes; n > maxFanOutRequests {
					t.Errorf("%d DynamoDB requests (%s), want at most %d", n, f.detail, maxFanOutRequests)
				}
				// One listing Query, a BatchGetItem per 100 listed and two
				// per batch (150 keys: session items, stream heads,
				// subscription markers); the topic append and at most
				// four transactions per batch. The first event of a topic
				// reads no earlier events.
				if got, want := b.tally.count("Query"), 1; got != want {
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

// checkFannedOut checks that each session of f holds the event once: its
// SessionStream log is resources/updated, then for sessions at level info
// the message with the event.
func checkFannedOut(t *testing.T, st notify.Store, f fanOutFigures) {
	var (
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				id := f.sessions[i]
				evs, err := st.ReadEvents(context.Background(), id, notify.SessionStream, 0, 10)
				if err != nil {
					t.Errorf("%s: %v", id, err)
					continue
				}
				want := 2
				if i%2 == 1 {
					want = 1
				}
				if len(evs) != want {
					t.Errorf("%s holds %d notifications, want %d", id, len(evs), want)
					continue
				}
				var msg struct {
					Method string `json:"method"`
					Params struct {
						URI  string           `json:"uri"`
						Data ingest.EventData `json:"data"`
					} `json:"params"`
				}
				for j, ev := range evs {
					if err := json.Unmarshal(ev.Data, &msg); err != nil {
						t.Errorf("%s event %d: %v", id, j, err)
					}
				}
				if want == 2 && (msg.Method != "notifications/message" || msg.Params.Data.Topic != f.topic || msg.Params.Data.Sequence != 1) {
					t.Errorf("%s: last notification %s, want the message of %s seq 1", id, evs[1].Data, f.topic)
				}
				if want == 1 && msg.Params.URI != ingest.EventURI(f.topic) {
					t.Errorf("%s: notification %s, want resources/updated of %s", id, evs[0].Data, f.topic)
				}
			}
		})
	}
	for i := range f.sessions {
		next <- i
	}
	close(next)
	wg.Wait()
}

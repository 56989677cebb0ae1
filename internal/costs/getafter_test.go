package costs

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
)

// getAfterSessions is how many sessions TestGetAfterIngest subscribes;
// getAfterLimit is how long it waits for each stream's event.
const (
	getAfterSessions = 10
	getAfterLimit    = 5 * time.Second
)

// TestGetAfterIngest: a GET stream that a subscribed 2025 session opens
// after the ingest of an event has returned (no stream was open then),
// one at a time, sends the event's resources/updated within 1 s of its request, on both
// stores (on moto, one of the ten may take longer, within 5 s: a busy
// moto's answers vary): the event waits in the session's log, and a new
// stream starts from what the session has not been sent. Issue 25
// measured 3 of 10 on DynamoDB within 4 s.
func TestGetAfterIngest(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			url := idleServer(t, b, nil)
			topic := fmt.Sprintf("getafter%d", time.Now().UnixNano())
			uri := ingest.EventURI(topic)
			sids := make([]string, getAfterSessions)
			forEach(len(sids), func(i int) {
				sid, _ := post(t, url, "", initReq)
				post(t, url, sid, initNote)
				post(t, url, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":%q}}`, uri))
				sids[i] = sid
			})
			msg, _ := json.Marshal(map[string]any{"type": "event", "topic": topic, "data": map[string]int{"n": 1}})
			sum, err := ingest.New(b.reopen(t), nil).Handle(context.Background(), events.SNSEvent{Records: []events.SNSEventRecord{{
				EventVersion: "1.0", EventSource: "aws:sns",
				SNS: events.SNSEntity{Type: "Notification", MessageID: topic + "-m1", TopicArn: "arn:aws:sns:us-east-1:123456789012:mcpush-events",
					Timestamp: time.Now(), Message: string(msg), SignatureVersion: "1"},
			}}})
			if err != nil || sum.Accepted != 1 {
				t.Fatalf("ingest: %+v, %v", sum, err)
			}
			// One at a time, as clients come back one by one: on moto,
			// which serves one request at a time per table, streams
			// opened together wait for each other's reads.
			var (
				late, lost []string
				slow       time.Duration
			)
			for _, sid := range sids {
				took, err := firstUpdate(url, sid, uri, getAfterLimit)
				slow = max(slow, took)
				switch {
				case err != nil:
					lost = append(lost, fmt.Sprintf("%s: %v", sid, err))
				case took > time.Second:
					late = append(late, fmt.Sprintf("%s: %v", sid, took.Round(time.Millisecond)))
				}
			}
			if len(lost) > 0 {
				t.Errorf("%d of %d GET streams opened after the ingest did not send its event within %v:\n%s", len(lost), len(sids), getAfterLimit, strings.Join(lost, "\n"))
			}
			// moto on a busy machine answers a request in up to
			// seconds now and then: one stream of ten may be late there.
			if allowed := map[string]int{"sqlite": 0, "dynamodb": 1}[b.name]; len(late) > allowed {
				t.Errorf("%d of %d GET streams opened after the ingest sent its event after more than 1 s (at most %d may): %s", len(late), len(sids), allowed, strings.Join(late, ", "))
			}
			t.Logf("%s: %d GET streams opened after the ingest: slowest sent the event after %v", b.name, len(sids), slow.Round(time.Millisecond))
		})
	}
}

// firstUpdate opens a GET stream of session sid and returns how long it
// took to send resources/updated of uri, or an error if not within limit.
func firstUpdate(url, sid, uri string, limit time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return time.Since(start), err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return time.Since(start), fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	var data []string
	for sc.Scan() {
		field, value, _ := strings.Cut(sc.Text(), ":")
		if field != "data" || strings.TrimSpace(value) == "" {
			continue
		}
		if strings.Contains(value, "notifications/resources/updated") && strings.Contains(value, uri) {
			return time.Since(start), nil
		}
		data = append(data, value)
	}
	return time.Since(start), fmt.Errorf("no resources/updated of %s after %v (stream ended: %v; data %q)", uri, time.Since(start).Round(time.Millisecond), sc.Err(), data)
}

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

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
)

// listenFigures are the measured costs of an idle 2026-07-28 listen
// stream, which is held: the era cannot resume a stream.
type listenFigures struct {
	window        time.Duration // how long the idle stream was counted
	reads, writes float64       // store requests per second while idle
	rru, wru      float64       // their request units per second
	detail        string
	dollars       float64       // per month: held all month, plus its polls
	latency       time.Duration // ingest start to the event's arrival after the idle window
}

// arrival is a message of a listen stream and when it came.
type arrival struct {
	data string
	at   time.Time
}

// openListen opens a subscriptions/listen stream on events://<topic> at
// url and returns its next message, in order (failing tb if none comes
// within 10 s or the stream ends). what names the message awaited.
func openListen(tb testing.TB, ctx context.Context, url, topic string) (next func(what string) arrival) {
	body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["` +
		ingest.EventURI(topic) + `"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		tb.Fatalf("listen: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	data := make(chan arrival, 16)
	go func() {
		defer resp.Body.Close()
		defer close(data)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.TrimSpace(v) != "" {
				data <- arrival{strings.TrimSpace(v), time.Now()}
			}
		}
	}()
	return func(what string) arrival {
		select {
		case a, ok := <-data:
			if !ok {
				tb.Fatalf("the listen stream ended before %s", what)
			}
			return a
		case <-time.After(10 * time.Second):
			tb.Fatalf("no %s on the listen stream in 10 s", what)
		}
		return arrival{}
	}
}

// listenMonth is the monthly cost of a listen stream held all month that
// uses rru read and wru write units per second.
func listenMonth(rru, wru float64) float64 {
	s := month.Seconds()
	return s*lambdaMemoryGB*lambdaPerGBSecond + s*(rru*dynamoPerRRU+wru*dynamoPerWRU)
}

// measureListen opens a subscriptions/listen stream on events://<topic>,
// lets it go idle (past a 100 ms StreamHold), counts the store requests of
// window seconds, then ingests an event on the topic and times its
// arrival.
func measureListen(tb testing.TB, b backend, window time.Duration) listenFigures {
	url := idleServer(tb, b, &mcp.StreamableOptions{StreamHold: 100 * time.Millisecond})
	topic := fmt.Sprintf("listen-%d", time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	next := openListen(tb, ctx, url, topic)
	if ack := next("acknowledgement"); !strings.Contains(ack.data, "notifications/subscriptions/acknowledged") {
		tb.Fatalf("first message %s, want the acknowledgement", ack.data)
	}
	time.Sleep(300 * time.Millisecond) // past StreamHold: idle
	if b.meter != nil {
		// On DynamoDB a read of the change feed Queries each 10 s partition
		// its window spans (from 1 s before the previous read, 0.5 s ago):
		// count a window whose reads all fall in one partition, not a
		// number of second Queries that varies from run to run.
		const bucket, span = 10 * time.Second, 1600 * time.Millisecond
		if into := time.Duration(time.Now().UnixNano() % int64(bucket)); into < span || into+window > bucket {
			time.Sleep((bucket-into)%bucket + span)
		}
	}
	b.reset()
	time.Sleep(window)
	r, w, d := b.tally.counts()
	rru, wru := b.units()
	secs := window.Seconds()
	f := listenFigures{window: window, reads: float64(r) / secs, writes: float64(w) / secs,
		rru: rru / secs, wru: wru / secs, detail: d}
	f.dollars = listenMonth(f.rru, f.wru)

	msg, _ := json.Marshal(map[string]any{"type": "event", "topic": topic, "data": 1})
	start := time.Now()
	sum, err := ingest.New(b.store, nil).Handle(context.Background(), events.SNSEvent{Records: []events.SNSEventRecord{{
		EventVersion: "1.0", EventSource: "aws:sns",
		SNS: events.SNSEntity{Type: "Notification", MessageID: topic + "-m1", TopicArn: "arn:aws:sns:us-east-1:123456789012:mcpush-events",
			Timestamp: start, Message: string(msg), SignatureVersion: "1"},
	}}})
	if err != nil || sum.Accepted != 1 {
		tb.Fatalf("ingest: %+v, %v", sum, err)
	}
	got := next("event")
	if !strings.Contains(got.data, "notifications/resources/updated") || !strings.Contains(got.data, ingest.EventURI(topic)) {
		tb.Fatalf("after the ingest the listen stream sent %s, want resources/updated of %s", got.data, ingest.EventURI(topic))
	}
	f.latency = got.at.Sub(start)
	return f
}

// TestIdleListen checks what an idle 2026-07-28 listen stream costs
// besides being held: past StreamHold it reads nothing of its own and
// writes nothing; its process's watcher reads the change feed once per
// 500 ms while every stream is idle (whatever their number: see
// TestIdleHeldStreamReads in pkg/mcp), so a lone stream costs two reads a
// second (on DynamoDB each a Query per shard of the feed:
// dynamostore.DefaultFeedShards); an event ingested then still arrives on it within about that. Held all month at the template's
// 256 MB, it costs the Lambda duration of a month (about $8.6), which no
// polling policy changes: the era has no way to resume a listen stream
// that the server ends.
func TestIdleListen(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			const window = 3 * time.Second
			f := measureListen(t, b, window)
			// The watcher's two reads per second (measureListen counts a
			// window within one DynamoDB feed partition), each one Query
			// per shard of the feed on DynamoDB, plus the process's
			// registry hashes at most once per 10 s, plus one read of
			// the feed for a read that straddles the window's edge.
			// Writes: its process's liveness record, one per 10 s
			// (pkg/mcp), at most one in the window.
			perRead := 1.0
			if b.name == "dynamodb" {
				perRead = dynamostore.DefaultFeedShards
			}
			limit, wlimit := perRead*(2.0/time.Second.Seconds()+1/window.Seconds())+1.0/10, 1/window.Seconds()
			if f.reads > limit+1e-9 || f.writes > wlimit+1e-9 {
				t.Errorf("an idle listen stream made %.2g reads and %.2g writes per second (%s); want at most %.2g reads and %.2g writes",
					f.reads, f.writes, f.detail, limit, wlimit)
			}
			t.Logf("%s: idle listen stream: %.2g reads/s, %.2g writes/s (%s; %.2g RRU/s); $%.2f per month held; an event ingested while idle arrived after %v",
				b.name, f.reads, f.writes, f.detail, f.rru, f.dollars, f.latency.Round(time.Millisecond))
		})
	}
}

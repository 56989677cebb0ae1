package costs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
)

// fanOutFigures are the counted requests of one event's ingest to n
// subscribed sessions, and how long it took.
type fanOutFigures struct {
	n             int
	reads, writes int
	detail        string
	took          time.Duration
}

// measureFanOut creates n sessions subscribed to a topic (half of them at
// a log level that admits the message) and counts the store requests of
// ingesting one event on it.
func measureFanOut(tb testing.TB, b backend, n int) fanOutFigures {
	ctx := context.Background()
	topic := fmt.Sprintf("fan%d-%d", n, time.Now().UnixNano())
	now := time.Now()
	for i := range n {
		level := "info"
		if i%2 == 1 {
			level = "warning"
		}
		id := fmt.Sprintf("%s-s%05d", topic, i)
		if err := b.store.CreateSession(ctx, &notify.Session{ID: id, ProtocolVersion: "2025-11-25", LogLevel: level,
			Initialized: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			tb.Fatal(err)
		}
		if err := b.store.Subscribe(ctx, id, ingest.EventURI(topic)); err != nil {
			tb.Fatal(err)
		}
	}
	msg, _ := json.Marshal(map[string]any{"type": "event", "topic": topic, "data": map[string]int{"n": 1}})
	ev := events.SNSEvent{Records: []events.SNSEventRecord{{
		EventVersion: "1.0", EventSource: "aws:sns",
		SNS: events.SNSEntity{Type: "Notification", MessageID: topic + "-m1", TopicArn: "arn:aws:sns:us-east-1:123456789012:mcpush-events",
			Timestamp: now, Message: string(msg), SignatureVersion: "1"},
	}}}
	in := ingest.New(b.store, nil)
	b.tally.reset()
	start := time.Now()
	sum, err := in.Handle(ctx, ev)
	took := time.Since(start)
	if err != nil || sum.Accepted != 1 {
		tb.Fatalf("ingest: %+v, %v", sum, err)
	}
	r, w, d := b.tally.counts()
	return fanOutFigures{n: n, reads: r, writes: w, detail: d, took: took}
}

// BenchmarkCostModel prints the cost model of issue 8 for each store, from
// counted store requests and measured times priced at the AWS list prices
// of prices_test.go: dollars per idle connected client per month, per
// 1,000 events delivered to 1, 100 and 10,000 subscribers, per million
// warm tools/call, and the Lambda concurrency a connected client uses.
//
// Measured: an idle client's reconnections (requests and invocation time,
// over loopback; on Lambda add the runtime's overhead to the time), the
// ingest of one event to 1 and 100 subscribers (requests), a warm
// tools/call (requests and time). Derived: 10,000 subscribers from the
// per-subscriber slope between 1 and 100 (moto serialises requests, so
// measuring 10,000 there takes an hour); the delivery side of an event
// (each subscriber's stream reads and delivers it, then holds for
// StreamHold, priced at the shipped 5 s) from the counted requests of a
// delivering reconnection.
func BenchmarkCostModel(b *testing.B) {
	for _, be := range backends(b) {
		b.Run(be.name, func(b *testing.B) {
			var (
				idle idleFigures
				fans []fanOutFigures
				call toolsCallFigures
			)
			for b.Loop() {
				idle = measureIdle(b, be, 3)
				fans = []fanOutFigures{measureFanOut(b, be, 1), measureFanOut(b, be, 100)}
				call = measureToolsCall(b, be, 20)
			}
			b.ReportMetric(idle.dollars, "$/idle-client-month")
			b.ReportMetric(idle.reads, "reads/idle-reconnection")
			b.ReportMetric(float64(fans[1].reads+fans[1].writes), "requests/event-to-100")
			// Printed, not logged: benchmark logs are cut at ten lines.
			fmt.Print(costReport(be, idle, fans, call))
		})
	}
}

// toolsCallFigures are the counted requests and time of a warm tools/call.
type toolsCallFigures struct {
	reads, writes float64
	took          time.Duration
	detail        string
}

func measureToolsCall(tb testing.TB, b backend, calls int) toolsCallFigures {
	url := idleServer(tb, b, nil)
	sid, _ := post(tb, url, "", initReq)
	post(tb, url, sid, initNote)
	post(tb, url, sid, callReq)
	b.tally.reset()
	start := time.Now()
	for range calls {
		post(tb, url, sid, callReq)
	}
	took := time.Since(start) / time.Duration(calls)
	r, w, d := b.tally.counts()
	return toolsCallFigures{reads: float64(r) / float64(calls), writes: float64(w) / float64(calls), took: took, detail: d}
}

// shippedStreamHold is how long a stream stays open after it delivers.
const shippedStreamHold = mcp.DefaultStreamHold

func costReport(b backend, idle idleFigures, fans []fanOutFigures, call toolsCallFigures) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%s cost model (AWS us-east-1 list prices checked %s; Lambda arm64 %.0f MB; one counted request = one %s):\n",
		b.name, pricesChecked, lambdaMemoryGB*1024, b.unit)
	idleConc := idle.held.Seconds() / (idle.retry + idle.held).Seconds()
	fmt.Fprintf(&sb, "| figure | value | from |\n|---|---|---|\n")
	fmt.Fprintf(&sb, "| idle connected client | $%.2f per month | %.3g reconnections/month (every %v), each %.2g reads + %.2g writes (%s) and %v of invocation; $1.00 leaves room for %v invocations |\n",
		idle.dollars, idle.invocations, idle.retry, idle.reads, idle.writes, idle.detail, idle.held.Round(100*time.Microsecond),
		maxIdleInvocation(idle.retry, idle.reads, idle.writes, 1.00).Round(100*time.Microsecond))
	fmt.Fprintf(&sb, "| Lambda concurrency per idle client | %.4f | invocation time / reconnection cycle |\n", idleConc)
	fmt.Fprintf(&sb, "| Lambda concurrency per active client | 1 | a stream holds one invocation for StreamHold (%v) after each delivery |\n", shippedStreamHold)
	// Fan-out: requests per event = a + k*n, from n = 1 and n = 100.
	f1, f100 := fans[0], fans[1]
	perSubR := float64(f100.reads-f1.reads) / float64(f100.n-f1.n)
	perSubW := float64(f100.writes-f1.writes) / float64(f100.n-f1.n)
	baseR, baseW := float64(f1.reads)-perSubR, float64(f1.writes)-perSubW
	perSubTook := (f100.took - f1.took) / time.Duration(f100.n-f1.n)
	// The delivery side: the subscriber's stream reads and delivers the
	// event (one reconnection's requests plus a ReadEvents and a
	// MarkDelivered) and holds StreamHold.
	deliverR, deliverW := idle.reads+1, idle.writes+1
	for _, n := range []int{1, 100, 10000} {
		r := baseR + perSubR*float64(n)
		w := baseW + perSubW*float64(n)
		ingestTime := f1.took + perSubTook*time.Duration(n-1)
		ingestCost := cycleCost(ingestTime, r, w)
		deliverCost := float64(n) * cycleCost(shippedStreamHold, deliverR, deliverW)
		how := "measured"
		if n != f1.n && n != f100.n {
			how = "derived from 1 and 100"
		}
		fmt.Fprintf(&sb, "| 1,000 events to %d subscriber(s) | $%.4g | per event: ingest %.0f reads + %.0f writes (%s), %v; delivery per subscriber %.2g reads + %.2g writes + %v held |\n",
			n, 1000*(ingestCost+deliverCost), r, w, how, ingestTime.Round(time.Millisecond), deliverR, deliverW, shippedStreamHold)
	}
	fmt.Fprintf(&sb, "| 1 million warm tools/call | $%.2f | per call %.2g reads + %.2g writes (%s), %v |\n",
		1e6*cycleCost(call.took, call.reads, call.writes), call.reads, call.writes, call.detail, call.took.Round(100*time.Microsecond))
	fmt.Fprintf(&sb, "| fan-out of one event to 100 subscribers | %d requests | %s |\n", f100.reads+f100.writes, f100.detail)
	return sb.String()
}

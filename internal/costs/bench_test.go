package costs

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/mcpush/mcpush/internal/costchart"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
)

// fanOutFigures are the counted requests of one event's ingest to n
// subscribed sessions, and how long it took.
type fanOutFigures struct {
	n             int
	reads, writes int
	rru, wru      float64 // their request units
	detail        string
	took          time.Duration
	topic         string
	sessions      []string // subscribed; even ones at level info, odd ones at warning
}

// measureFanOut creates n sessions subscribed to a topic (half of them at
// a log level that admits the message), ingests an event on it, and counts
// the store requests of ingesting a second one.
func measureFanOut(tb testing.TB, b backend, n int) fanOutFigures {
	ctx := context.Background()
	topic := fmt.Sprintf("fan%d-%d", n, time.Now().UnixNano())
	now := time.Now()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-s%05d", topic, i)
	}
	forEach(n, func(i int) {
		level := "info"
		if i%2 == 1 {
			level = "warning"
		}
		if err := b.store.CreateSession(ctx, &notify.Session{ID: ids[i], ProtocolVersion: "2025-11-25", LogLevel: level,
			Initialized: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour), Subscriptions: []string{ingest.EventURI(topic)}}); err != nil {
			tb.Error(err)
		}
	})
	if tb.Failed() {
		tb.FailNow()
	}
	ev := func(n int) events.SNSEvent {
		msg, _ := json.Marshal(map[string]any{"type": "event", "topic": topic, "data": map[string]int{"n": n}})
		return events.SNSEvent{Records: []events.SNSEventRecord{{
			EventVersion: "1.0", EventSource: "aws:sns",
			SNS: events.SNSEntity{Type: "Notification", MessageID: fmt.Sprintf("%s-m%d", topic, n), TopicArn: "arn:aws:sns:us-east-1:123456789012:mcpush-events",
				Timestamp: time.Now(), Message: string(msg), SignatureVersion: "1"},
		}}}
	}
	// The topic's first event takes the subscriptions on; the second,
	// counted, is the steady state (it also reads the events before it,
	// for subscribers that would be behind).
	in := ingest.New(b.store, nil)
	if sum, err := in.Handle(ctx, ev(1)); err != nil || sum.Accepted != 1 {
		tb.Fatalf("ingest: %+v, %v", sum, err)
	}
	b.reset()
	start := time.Now()
	sum, err := in.Handle(ctx, ev(2))
	took := time.Since(start)
	if err != nil || sum.Accepted != 1 {
		tb.Fatalf("ingest: %+v, %v", sum, err)
	}
	r, w, d := b.tally.counts()
	rru, wru := b.units()
	return fanOutFigures{n: n, reads: r, writes: w, rru: rru, wru: wru, detail: d, took: took, topic: topic, sessions: ids}
}

// forEach runs f(0) ... f(n-1), four at a time.
func forEach(n int, f func(i int)) {
	var (
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// BenchmarkCostModel prints the cost model of issue 8 for each store, from
// counted store requests, their metered request units (meter) and
// measured times, priced at the AWS list prices of prices_test.go: dollars
// per idle connected client per month (and per idle 2026-07-28 listen
// stream, which is held), per 1,000 events delivered to 1, 100 and 10,000
// subscribers, per million warm tools/call, and the Lambda concurrency a
// connected client uses.
//
// Measured: an idle client's reconnections (requests, units and
// invocation time, over loopback; on Lambda add the runtime's overhead to
// the time), the ingest of one event to 1, 100 and 300 subscribers
// (requests, units, time), a warm tools/call (requests, units, time).
// Derived: 10,000 subscribers from the per-subscriber slope between 100
// and 300 (moto serialises requests, so measuring 10,000 there takes many
// minutes); the delivery side of an event (each subscriber's stream reads
// and delivers it, then holds for StreamHold, priced at the shipped 5 s)
// from the units of an idle reconnection plus one read and one write.
//
// With -costfigures FILE (make costchart) it also writes the priced
// figures of every store to FILE as JSON, which internal/costchart draws
// as docs/costs.svg.
func BenchmarkCostModel(b *testing.B) {
	figures := &costchart.Figures{PricesChecked: pricesChecked}
	defer func() {
		if *costFigures == "" || b.Failed() {
			return
		}
		if err := costchart.WriteFigures(*costFigures, figures); err != nil {
			b.Error(err)
		}
	}()
	for _, be := range backends(b) {
		b.Run(be.name, func(b *testing.B) {
			var (
				idle   idleFigures
				listen listenFigures
				fans   []fanOutFigures
				call   toolsCallFigures
			)
			for b.Loop() {
				idle = measureIdle(b, be, 3)
				fans = []fanOutFigures{measureFanOut(b, be, 1), measureFanOut(b, be, 100), measureFanOut(b, be, fanOutSessions)}
				call = measureToolsCall(b, be, 20)
				// Last: its stream's backing session is deleted in the
				// background when it ends, which other figures would count.
				listen = measureListen(b, be, 2*time.Second)
			}
			b.ReportMetric(idle.dollars, "$/idle-client-month")
			b.ReportMetric(idle.reads, "reads/idle-reconnection")
			b.ReportMetric(float64(fans[1].reads+fans[1].writes), "requests/event-to-100")
			b.ReportMetric(float64(fans[2].reads+fans[2].writes), "requests/event-to-300")
			// Printed, not logged: benchmark logs are cut at ten lines.
			b.ReportMetric(listen.dollars, "$/idle-listen-month")
			report, store := costReport(be, idle, listen, fans, call)
			fmt.Print(report)
			figures.Stores = append(figures.Stores, store)
		})
	}
}

// toolsCallFigures are the counted requests and time of a warm tools/call.
type toolsCallFigures struct {
	reads, writes float64
	rru, wru      float64
	took          time.Duration
	detail        string
}

func measureToolsCall(tb testing.TB, b backend, calls int) toolsCallFigures {
	url := idleServer(tb, b, nil)
	sid, _ := post(tb, url, "", initReq)
	post(tb, url, sid, initNote)
	post(tb, url, sid, callReq)
	b.reset()
	start := time.Now()
	for range calls {
		post(tb, url, sid, callReq)
	}
	took := time.Since(start) / time.Duration(calls)
	r, w, d := b.tally.counts()
	rru, wru := b.units()
	c := float64(calls)
	return toolsCallFigures{reads: float64(r) / c, writes: float64(w) / c, rru: rru / c, wru: wru / c, took: took, detail: d}
}

// shippedStreamHold is how long a stream stays open after it delivers.
const shippedStreamHold = mcp.DefaultStreamHold

// costFigures names the file BenchmarkCostModel writes its figures to.
var costFigures = flag.String("costfigures", "", "BenchmarkCostModel: write the priced figures to this JSON file (for internal/costchart)")

// costReport prices the measured figures of store b: the table it prints,
// and the same figures for the chart.
func costReport(b backend, idle idleFigures, listen listenFigures, fans []fanOutFigures, call toolsCallFigures) (string, costchart.Store) {
	store := costchart.Store{Name: b.name, IdleClientMonth: idle.dollars, IdleListenMonth: listen.dollars}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%s cost model (AWS us-east-1 list prices checked %s; Lambda arm64 %.0f MB; one counted request = one %s):\n",
		b.name, pricesChecked, lambdaMemoryGB*1024, b.unit)
	idleConc := idle.held.Seconds() / (idle.retry + idle.held).Seconds()
	fmt.Fprintf(&sb, "| figure | value | from |\n|---|---|---|\n")
	fmt.Fprintf(&sb, "| idle connected client | $%.2f per month | %.3g reconnections/month (every %v), each %.2g reads + %.2g writes (%s; %.2g RRU + %.2g WRU) and %v of invocation; $1.00 leaves room for %v invocations |\n",
		idle.dollars, idle.invocations, idle.retry, idle.reads, idle.writes, idle.detail, idle.rru, idle.wru, idle.held.Round(100*time.Microsecond),
		maxIdleInvocation(idle.retry, idle.rru, idle.wru, 1.00).Round(100*time.Microsecond))
	fmt.Fprintf(&sb, "| Lambda concurrency per idle client | %.4f | invocation time / reconnection cycle |\n", idleConc)
	fmt.Fprintf(&sb, "| Lambda concurrency per active client | 1 | a stream holds one invocation for StreamHold (%v) after each delivery |\n", shippedStreamHold)
	fmt.Fprintf(&sb, "| idle 2026-07-28 listen stream | $%.2f per month | held all month (the era cannot resume a stream): $%.2f of Lambda duration, plus %.2g reads + %.2g writes per second (%s in %v; %.2g RRU/s) once idle; concurrency 1; an event ingested while idle arrived after %v |\n",
		listen.dollars, listenMonth(0, 0), listen.reads, listen.writes, listen.detail, listen.window, listen.rru, listen.latency.Round(time.Millisecond))
	// Fan-out: per event, requests and units a + k*n, with k the slope
	// between the two largest measured n (both batched) and a from n = 1.
	f1, fa, fb := fans[0], fans[1], fans[2]
	dn := float64(fb.n - fa.n)
	perSubReq := float64(fb.reads+fb.writes-fa.reads-fa.writes) / dn
	perSubRRU, perSubWRU := (fb.rru-fa.rru)/dn, (fb.wru-fa.wru)/dn
	perSubTook := (fb.took - fa.took) / time.Duration(fb.n-fa.n)
	// The delivery side: the subscriber's stream reads and delivers the
	// event (one reconnection's units plus a ReadEvents and a
	// MarkDelivered, one small item each) and holds StreamHold.
	deliverRRU, deliverWRU := idle.rru+1, idle.wru+1
	for _, n := range []int{1, 100, 10000} {
		req, rru, wru, took, how := float64(f1.reads+f1.writes), f1.rru, f1.wru, f1.took, "measured"
		switch n {
		case f1.n:
		case fa.n:
			req, rru, wru, took = float64(fa.reads+fa.writes), fa.rru, fa.wru, fa.took
		default:
			m := float64(n - fb.n)
			req, rru, wru = float64(fb.reads+fb.writes)+perSubReq*m, fb.rru+perSubRRU*m, fb.wru+perSubWRU*m
			took = fb.took + perSubTook*time.Duration(n-fb.n)
			how = fmt.Sprintf("derived from %d and %d", fa.n, fb.n)
		}
		ingestCost := cycleCost(took, rru, wru)
		deliverCost := float64(n) * cycleCost(shippedStreamHold, deliverRRU, deliverWRU)
		store.Events = append(store.Events, costchart.Events{Subscribers: n, Dollars: 1000 * (ingestCost + deliverCost), Derived: how != "measured"})
		fmt.Fprintf(&sb, "| 1,000 events to %d subscriber(s) | $%.4g | per event: ingest %.0f requests, %.0f RRU + %.0f WRU (%s), %v on %s; delivery per subscriber %.2g RRU + %.2g WRU + %v held |\n",
			n, 1000*(ingestCost+deliverCost), req, rru, wru, how, took.Round(time.Millisecond), b.name, deliverRRU, deliverWRU, shippedStreamHold)
	}
	store.ToolsCallMillion = 1e6 * cycleCost(call.took, call.rru, call.wru)
	fmt.Fprintf(&sb, "| 1 million warm tools/call | $%.2f | per call %.2g reads + %.2g writes (%s; %.2g RRU + %.2g WRU), %v |\n",
		1e6*cycleCost(call.took, call.rru, call.wru), call.reads, call.writes, call.detail, call.rru, call.wru, call.took.Round(100*time.Microsecond))
	for _, f := range fans[1:] {
		fmt.Fprintf(&sb, "| fan-out of one event to %d subscribers | %d requests | %s; %.0f RRU + %.0f WRU; %v |\n",
			f.n, f.reads+f.writes, f.detail, f.rru, f.wru, f.took.Round(time.Millisecond))
	}
	return sb.String(), store
}

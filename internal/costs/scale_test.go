package costs

import (
	"context"
	"encoding/json"

	"fmt"
	"github.com/aws/aws-lambda-go/events"
	"github.com/mcpush/mcpush/pkg/notify"
	"math"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/heldclients"
	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
)

// scaleInputs are the measured figures the scale cost model prices.
type scaleInputs struct {
	streams            int     // idle held streams measured on one process
	bytesPerStream     float64 // the server's heap and stacks per idle held stream
	cpuPerStreamSecond float64 // CPU seconds per stream-second of a process holding them
	procReadsPerSecond float64 // store reads per second of that process's watcher (shared by its streams)
	procWritesPerSec   float64 // store writes per second of that process: its liveness record's heartbeat (counted)
	// Store requests per second of each idle held stream's own upkeep:
	// a 2026 listen stream's backing-session refresh, a 2025 GET
	// stream's session check and expiry extension (derived from their
	// intervals, longer than the window; any other request of the window
	// that is not the process's is counted as upkeep too).
	chore2025RRU, chore2025WRU float64
	chore2026RRU, chore2026WRU float64
	choreDetail                string
	// Store requests (request units on DynamoDB) of holding a stream
	// again at the invocation deadline: a 2025 GET stream's
	// reconnection with Last-Event-ID, a 2026 listen stream's park and
	// adoption (measureRelisten; open2026 is a fresh listen's, for
	// reference).
	reopen2025RRU, reopen2025WRU float64
	reopen2026RRU, reopen2026WRU float64
	open2026RRU, open2026WRU     float64
	reopenDetail                 string
	// On-demand Lambda, per idle client-month: 2025 reconnecting every
	// second (measureIdle), 2026 a held listen stream (measureListen).
	onDemand2025, onDemand2026 float64
	odConcurrency2025          float64 // Lambda concurrency per idle 2025 client
	delivery                   heldclients.Delivery
	published                  time.Time
}

// lmiFigures are the Managed Instances costs of some clients.
type lmiFigures struct {
	perEnv, envs, instances   int
	instanceCost, requestCost float64
	storeCost                 float64
	dollars                   float64 // per month, all clients
}

// lmiMonth prices a month of clients idle held streams of one era on
// Managed Instances with at most perEnv invocations per execution
// environment: the instances, whose count the environments set (each
// holds min(perEnv, what half its memory holds, what half its vCPU
// holds) streams; an instance runs lmiInstanceVCPU/lmiEnvVCPU of them;
// at least lmiMinInstances), each stream held again at every invocation
// deadline (one request and its store requests), and each environment's
// own store reads (its change feed watcher and registry refresh).
func lmiMonth(in scaleInputs, clients, perEnv int, era2025 bool) lmiFigures {
	f := lmiFigures{perEnv: perEnv}
	if m := int(0.5 * lmiEnvMemory / in.bytesPerStream); m < f.perEnv {
		f.perEnv = m
	}
	if in.cpuPerStreamSecond > 0 {
		if c := int(0.5 * lmiEnvVCPU / in.cpuPerStreamSecond); c < f.perEnv {
			f.perEnv = c
		}
	}
	f.envs = (clients + f.perEnv - 1) / f.perEnv
	f.instances = max(lmiMinInstances, (f.envs+lmiInstanceVCPU/lmiEnvVCPU-1)/(lmiInstanceVCPU/lmiEnvVCPU))
	f.instanceCost = float64(f.instances) * lmiInstancePerHour * (1 + lmiManagementFee) * month.Hours()
	reopens := float64(clients) * month.Seconds() / functionTimeout.Seconds()
	rru, wru := in.reopen2026RRU, in.reopen2026WRU
	crru, cwru := in.chore2026RRU, in.chore2026WRU
	if era2025 {
		rru, wru = in.reopen2025RRU, in.reopen2025WRU
		crru, cwru = in.chore2025RRU, in.chore2025WRU
	}
	f.requestCost = reopens * lmiPerRequest
	f.storeCost = reopens*(rru*dynamoPerRRU+wru*dynamoPerWRU) +
		float64(clients)*month.Seconds()*(crru*dynamoPerRRU+cwru*dynamoPerWRU) +
		float64(f.envs)*month.Seconds()*(in.procReadsPerSecond*dynamoPerRRU+in.procWritesPerSec*dynamoPerWRU)
	f.dollars = f.instanceCost + f.requestCost + f.storeCost
	return f
}

// breakEven is the fewest clients from which Managed Instances cost no
// more than on-demand Lambda at perClient dollars each (0: not below
// 10 million).
func breakEven(in scaleInputs, perClient float64, perEnv int, era2025 bool) int {
	lo, hi := 1, 10_000_000
	if lmiMonth(in, hi, perEnv, era2025).dollars > perClient*float64(hi) {
		return 0
	}
	// The instance floor makes Managed Instances dearer for few clients;
	// past the floor both grow about linearly, Managed Instances slower.
	for lo < hi {
		mid := (lo + hi) / 2
		if lmiMonth(in, mid, perEnv, era2025).dollars <= perClient*float64(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// scaleServer serves b's store with streams held hold and limits that the
// measured clients do not reach.
func scaleServer(tb testing.TB, b backend, hold time.Duration) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpush", Version: "costs"}, b.store, &mcp.ServerOptions{
		DynamicRegistries: true,
		Limits:            mcp.Limits{MaxSessionsPerPrincipal: 100_000, MaxSessionsPerHour: 100_000, MaxRequestsPerMinute: 1_000_000, MaxListensPerPrincipal: 100_000},
	})
	eventtools.Add(srv, b.store, nil)
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{StreamHold: hold})
	ts := httptest.NewServer(h)
	tb.Cleanup(func() { ts.Close(); h.Close() })
	return ts.URL
}

// cpuSeconds is the CPU time (user and system) of this process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// scaleStreams is how many idle held streams BenchmarkScaleCostModel
// measures on one process (half of each era).
const scaleStreams = 2000

// scaleStreamsDynamo is how many it measures on DynamoDB: moto serves one
// request at a time, so opening 2,000 there takes minutes. The store's
// figures (request units of the watcher, the heartbeat and the reopening)
// do not depend on the number; memory and CPU per stream are noisier.
const scaleStreamsDynamo = 200

// scaleWindow is how long BenchmarkScaleCostModel counts the idle
// streams' requests: two beats of the process's liveness heartbeat (one
// per 10 s).
const scaleWindow = 20 * time.Second

// An idle held stream's own upkeep (pkg/mcp): a 2025 GET stream's check
// of its session per idleCheck and extension of the session's expiry
// once per half MCPUSH_SESSION_TTL; a 2026 listen stream's refresh of
// its backing session once per half listenHeldTTL (its process's
// liveness heartbeat is the process's, counted).
const (
	listenHeldTTL     = 5 * time.Minute // pkg/mcp listenHeldTTL: refreshed at half
	idleCheckInterval = 10 * time.Minute
	sessionTTL        = time.Hour
)

// measureScale measures on SQLite what idle held streams cost one
// process, as Managed Instances hold them (to the deadline): n streams,
// half 2026-07-28 listen streams and half 2025-11-25 GET streams, opened
// from child processes (heldclients), each era's opening counted; then
// the memory the server holds for them, the CPU time and store requests
// of window, and one event ingested by another store reaching them all.
func measureScale(tb testing.TB, be backend, n int, window time.Duration) scaleInputs {
	in := scaleInputs{streams: n}
	url := scaleServer(tb, be, 15*time.Minute)
	topic := fmt.Sprintf("scale-%d", time.Now().UnixNano())
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	be.reset()
	listeners := heldclients.Start(tb, heldclients.Options{URLs: []string{url}, N: n / 2, Era: "2026", URI: ingest.EventURI(topic)}, 3*time.Minute)
	r, w := be.units()
	in.open2026RRU, in.open2026WRU = r/float64(n/2), w/float64(n/2)
	gets := heldclients.Start(tb, heldclients.Options{URLs: []string{url}, N: n / 2, Era: "2025", URI: ingest.EventURI(topic)}, 3*time.Minute)

	time.Sleep(2 * time.Second) // idle: the watcher at its idle pace
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	used := func(m *runtime.MemStats) float64 { return float64(m.HeapInuse + m.StackInuse) }
	in.bytesPerStream = (used(&after) - used(&before)) / float64(n)

	be.reset()
	cpu := cpuSeconds()
	time.Sleep(window)
	in.cpuPerStreamSecond = (cpuSeconds() - cpu) / (float64(n) * window.Seconds())
	// The watcher's reads and the liveness heartbeat's writes (the only
	// writes of the window: a listen stream refreshes its backing session
	// minutes after it opens) are the process's; on SQLite any other read
	// is a stream's own upkeep. On DynamoDB a session read and the
	// feed's are both a Query: all are the process's there (the SQLite
	// run shows the streams make none in the window). Priced by request
	// units: metered on DynamoDB, one per Store call on SQLite.
	secs := window.Seconds()
	rru, wru := be.units()
	var choreReads float64
	if st, ok := be.tally.(storeTally); ok {
		var detail []string
		for op, c := range st.c.Counts() {
			detail = append(detail, fmt.Sprintf("%s %.1f/s", op, float64(c)/secs))
			if op != "Changes" && op != "RegistryHashes" && storecount.IsRead(op) {
				choreReads += float64(c)
			}
		}
		slices.Sort(detail)
		in.choreDetail = strings.Join(detail, ", ")
	} else {
		r, w, d := be.tally.counts()
		in.choreDetail = fmt.Sprintf("%s: %.1f reads/s, %.1f writes/s; %.2f RRU/s, %.2f WRU/s", d, float64(r)/secs, float64(w)/secs, rru/secs, wru/secs)
	}
	in.procReadsPerSecond, in.procWritesPerSec = (rru-choreReads)/secs, wru/secs
	in.chore2026RRU = choreReads / secs / float64(n/2)
	in.chore2026WRU = 1 / (listenHeldTTL / 2).Seconds()
	// A held GET stream checks its session once per idleCheckInterval
	// and extends its expiry once per half the session TTL.
	in.chore2025RRU, in.chore2025WRU = 1/idleCheckInterval.Seconds(), 1/(sessionTTL/2).Seconds()

	in.published = time.Now()
	publishOn(tb, be.reopen(tb), topic) // the ingest's own store
	for _, c := range []*heldclients.Child{listeners, gets} {
		d, err := c.Delivered()
		if err != nil {
			tb.Fatal(err)
		}
		if d.Got != n/2 || d.Duplicates != 0 {
			tb.Errorf("an event reached %d of %d streams, %d more than once; want each exactly once", d.Got, n/2, d.Duplicates)
		}
		in.delivery.Got += d.Got
		in.delivery.Duplicates += d.Duplicates
		in.delivery.Arrivals = append(in.delivery.Arrivals, d.Arrivals...)
	}
	return in
}

// BenchmarkScaleCostModel prints the cost model at scale (issue 17):
// dollars per idle client-month at 1,000, 100,000 and 1,000,000 connected
// clients for on-demand Lambda (2025 era: SSE polling, a reconnection
// every second; 2026 era: a held listen stream) and for Lambda Managed
// Instances holding both eras' streams to the invocation deadline, and the
// break-even point between them, from:
//
//   - measured with idle held streams on one process (clients in child
//     processes), on SQLite (scaleStreams) and on DynamoDB through moto
//     (scaleStreamsDynamo), one table each: the server's memory and CPU
//     time per stream, the process's store requests per second, the store
//     requests of opening each era's stream, and the delivery of one event
//     to all of them;
//   - measured as BenchmarkCostModel does: an idle 2025 client's
//     reconnections and an idle listen stream on on-demand Lambda;
//   - list prices with their date (prices_test.go); store requests priced
//     by their DynamoDB request units: metered on DynamoDB, one unit per
//     counted Store call on SQLite.
//
// The goal: at most $0.05 per idle client-month at 100,000 clients, with
// delivery within 1 s, in both eras.
func BenchmarkScaleCostModel(b *testing.B) {
	for _, sc := range []struct {
		be      func(testing.TB) backend
		streams int
	}{{sqliteBackend, scaleStreams}, {dynamoBackend, scaleStreamsDynamo}} {
		be := sc.be(b)
		b.Run(be.name, func(b *testing.B) {
			var (
				in     scaleInputs
				idle   idleFigures
				listen listenFigures
			)
			for b.Loop() {
				idle = measureIdle(b, be, 3)
				listen = measureListen(b, be, 2*time.Second)
				// Before measureScale, whose streams and their process
				// stay until the benchmark ends: their requests would be
				// counted with the park and the adoption.
				pr, pw, ar, aw, d := measureRelisten(b, be)
				in = measureScale(b, be, sc.streams, scaleWindow)
				in.reopen2026RRU, in.reopen2026WRU, in.reopenDetail = pr+ar, pw+aw, d
			}
			// measureListen's window is shorter than a listen stream's
			// refresh and its process's heartbeat: add them (on demand,
			// a sandbox holds one stream, and its own heartbeat).
			in.onDemand2025 = idle.dollars
			in.onDemand2026 = listen.dollars + month.Seconds()*(in.chore2026RRU*dynamoPerRRU+(in.chore2026WRU+in.procWritesPerSec)*dynamoPerWRU)
			in.odConcurrency2025 = idle.held.Seconds() / (idle.retry + idle.held).Seconds()
			in.reopen2025RRU, in.reopen2025WRU = idle.rru, idle.wru
			lats := heldclients.Latencies(in.published, in.delivery)
			lat := func(p float64) time.Duration { return heldclients.Percentile(lats, p) }
			report, at100k := scaleReport(be.name, in, lat(50), lat(99), lat(100))
			fmt.Print(report)
			b.ReportMetric(in.bytesPerStream/1024, "KiB/held-stream")
			b.ReportMetric(in.procReadsPerSecond, "reads/s/process")
			b.ReportMetric(at100k[0], "$/client-month-lmi-2025@100k")
			b.ReportMetric(at100k[1], "$/client-month-lmi-2026@100k")
			b.ReportMetric(float64(lat(99).Milliseconds()), "p99-delivery-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// scaleReport prints the table; at100k are the Managed Instances dollars
// per client-month at 100,000 clients (2025, 2026) at the most
// invocations per environment.
func scaleReport(store string, in scaleInputs, p50, p99, maxLat time.Duration) (string, [2]float64) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\ncost model at scale (Lambda and DynamoDB prices checked %s, Managed Instances %s; measured on %s, %d idle held streams on one process, half each era):\n",
		pricesChecked, lmiPricesChecked, store, in.streams)
	fmt.Fprintf(&sb, "| measured | value |\n|---|---|\n")
	fmt.Fprintf(&sb, "| server memory per idle held stream (heap + stacks) | %.1f KiB |\n", in.bytesPerStream/1024)
	fmt.Fprintf(&sb, "| CPU per stream-second of a process holding them | %.3g s (%.3g vCPU for 1,000 streams) |\n", in.cpuPerStreamSecond, 1000*in.cpuPerStreamSecond)
	fmt.Fprintf(&sb, "| store requests per second of that process's watcher and liveness heartbeat (counted: %s in all) | %.1f reads, %.2f writes |\n", in.choreDetail, in.procReadsPerSecond, in.procWritesPerSec)
	fmt.Fprintf(&sb, "| store requests per second of one idle stream's upkeep | 2026 listen %.3g reads + %.3g writes (derived: a backing-session refresh per %v); 2025 GET %.3g reads + %.3g writes (derived: a session check per %v, an expiry extension per %v) |\n",
		in.chore2026RRU, in.chore2026WRU, listenHeldTTL/2, in.chore2025RRU, in.chore2025WRU, idleCheckInterval, sessionTTL/2)
	fmt.Fprintf(&sb, "| store requests (request units) to hold a stream again at the deadline | 2025 reconnection %.2g reads + %.2g writes; 2026 listen: its park and adoption %.2g + %.2g (%s), a fresh listen %.2g + %.2g |\n",
		in.reopen2025RRU, in.reopen2025WRU, in.reopen2026RRU, in.reopen2026WRU, in.reopenDetail, in.open2026RRU, in.open2026WRU)
	fmt.Fprintf(&sb, "| one event ingested to all %d | %d got it, %d more than once; latency p50 %v, p99 %v, max %v (ingest start to arrival) |\n",
		in.streams, in.delivery.Got, in.delivery.Duplicates, p50.Round(time.Millisecond), p99.Round(time.Millisecond), maxLat.Round(time.Millisecond))
	fmt.Fprintf(&sb, "| on-demand idle 2025 client / idle 2026 listen stream | $%.3f / $%.2f per month; 2025 Lambda concurrency %.4f per client |\n",
		in.onDemand2025, in.onDemand2026, in.odConcurrency2025)

	fmt.Fprintf(&sb, "\n| clients | on-demand 2025 (SSE polling) | on-demand 2026 (held listen) | Managed Instances 2025 | Managed Instances 2026 | instances (%s) | Managed Instances at %d per environment (2025 / 2026) |\n|---|---|---|---|---|---|---|\n",
		lmiInstanceType, lmiLowConc)
	var at100k [2]float64
	for _, n := range []int{1000, 100_000, 1_000_000} {
		m25, m26 := lmiMonth(in, n, lmiTemplateConc, true), lmiMonth(in, n, lmiTemplateConc, false)
		d25, d26 := lmiMonth(in, n, lmiLowConc, true), lmiMonth(in, n, lmiLowConc, false)
		per := func(f lmiFigures) float64 { return f.dollars / float64(n) }
		if n == 100_000 {
			at100k = [2]float64{per(m25), per(m26)}
		}
		fmt.Fprintf(&sb, "| %d | $%.4f ($%.0f; Lambda concurrency %.1f) | $%.2f ($%.0f) | $%.4f ($%.0f) | $%.4f ($%.0f) | %d (%d environments of %d streams) | $%.4f / $%.4f (%d instances) |\n",
			n, in.onDemand2025, in.onDemand2025*float64(n), in.odConcurrency2025*float64(n), in.onDemand2026, in.onDemand2026*float64(n),
			per(m25), m25.dollars, per(m26), m26.dollars, m25.instances, m25.envs, m25.perEnv, per(d25), per(d26), d25.instances)
	}
	f := lmiMonth(in, 100_000, lmiTemplateConc, true)
	fmt.Fprintf(&sb, "| of which at 100,000 (2025) | | | instances $%.0f, requests $%.0f, store $%.0f | | | |\n", f.instanceCost, f.requestCost, f.storeCost)
	be25, be26 := breakEven(in, in.onDemand2025, lmiTemplateConc, true), breakEven(in, in.onDemand2026, lmiTemplateConc, false)
	fmt.Fprintf(&sb, "| break-even | Managed Instances cost less from %d idle 2025 clients and from %d idle 2026 listeners (at the template's %d per environment; at %d: %d and %d) |\n",
		be25, be26, lmiTemplateConc, lmiLowConc, breakEven(in, in.onDemand2025, lmiLowConc, true), breakEven(in, in.onDemand2026, lmiLowConc, false))
	meets := func(ok bool) string {
		if ok {
			return "meets"
		}
		return "MISSES"
	}
	fmt.Fprintf(&sb, "| goal ≤ $0.05 per idle client-month at 100,000, delivery ≤ 1 s | Managed Instances (%d per environment): 2025 $%.4f %s, 2026 $%.4f %s; p99 delivery %v %s; on-demand: 2025 $%.3f %s, 2026 $%.2f %s |\n",
		lmiTemplateConc, at100k[0], meets(at100k[0] <= 0.05), at100k[1], meets(at100k[1] <= 0.05), p99.Round(time.Millisecond), meets(p99 <= time.Second),
		in.onDemand2025, meets(in.onDemand2025 <= 0.05), in.onDemand2026, meets(in.onDemand2026 <= 0.05))
	return sb.String(), at100k
}

// TestScaleModelArithmetic checks the scale cost model's arithmetic on
// fixed inputs (no timing): Managed Instances cost the instance floor
// for few clients, grow with clients but not faster than linearly past
// it, an environment holds no more streams than its concurrency, memory
// and CPU allow, and the break-even point is where the two costs cross.
func TestScaleModelArithmetic(t *testing.T) {
	in := scaleInputs{bytesPerStream: 40 << 10, cpuPerStreamSecond: 1e-5, procReadsPerSecond: 12,
		reopen2025RRU: 1, reopen2026RRU: 4, reopen2026WRU: 3, onDemand2025: 0.88, onDemand2026: 9.29}
	floor := lmiMinInstances * lmiInstancePerHour * (1 + lmiManagementFee) * month.Hours()
	if f := lmiMonth(in, 1, lmiMaxConcurrency, true); f.instances != lmiMinInstances || f.instanceCost != floor {
		t.Errorf("one client: %d instances, $%.2f; want the floor of %d, $%.2f", f.instances, f.instanceCost, lmiMinInstances, floor)
	}
	prev := 0.0
	for _, n := range []int{1, 1000, 100_000, 1_000_000, 10_000_000} {
		for _, era := range []bool{true, false} {
			f := lmiMonth(in, n, lmiMaxConcurrency, era)
			if f.perEnv > lmiMaxConcurrency || f.perEnv > int(0.5/in.cpuPerStreamSecond) {
				t.Errorf("%d streams per environment: more than concurrency or CPU allow", f.perEnv)
			}
			if f.envs*f.perEnv < n {
				t.Errorf("%d clients in %d environments of %d", n, f.envs, f.perEnv)
			}
		}
		f := lmiMonth(in, n, lmiMaxConcurrency, true)
		if f.dollars < prev {
			t.Errorf("%d clients cost $%.2f, fewer cost $%.2f: not monotonic", n, f.dollars, prev)
		}
		prev = f.dollars
	}
	// CPU bound: at 1e-3 s per stream-second an environment holds 500.
	hot := in
	hot.cpuPerStreamSecond = 1e-3
	if f := lmiMonth(hot, 100_000, lmiMaxConcurrency, true); f.perEnv != 500 {
		t.Errorf("CPU-bound environment holds %d streams, want 500", f.perEnv)
	}
	for _, c := range []struct {
		perClient float64
		era       bool
	}{{in.onDemand2025, true}, {in.onDemand2026, false}} {
		n := breakEven(in, c.perClient, lmiMaxConcurrency, c.era)
		if n <= 1 {
			t.Fatalf("break-even at %d clients", n)
		}
		if lmiMonth(in, n, lmiMaxConcurrency, c.era).dollars > c.perClient*float64(n) ||
			lmiMonth(in, n-1, lmiMaxConcurrency, c.era).dollars <= c.perClient*float64(n-1) {
			t.Errorf("break-even %d: not where Managed Instances become the cheaper", n)
		}
		if want := int(math.Ceil(floor / c.perClient)); n > want+100 || n < want-100 {
			t.Errorf("break-even %d, want about the floor over the per-client price, %d", n, want)
		}
	}
}

// publishOn ingests one event on topic through st, as sns-ingest does.
func publishOn(tb testing.TB, st notify.Store, topic string) {
	msg, _ := json.Marshal(map[string]any{"type": "event", "topic": topic, "data": 1})
	sum, err := ingest.New(st, nil).Handle(context.Background(), events.SNSEvent{Records: []events.SNSEventRecord{{
		EventVersion: "1.0", EventSource: "aws:sns",
		SNS: events.SNSEntity{Type: "Notification", MessageID: topic + "-m1", TopicArn: "arn:aws:sns:us-east-1:123456789012:mcpush-events",
			Timestamp: time.Now(), Message: string(msg), SignatureVersion: "1"},
	}}})
	if err != nil || sum.Accepted != 1 {
		tb.Fatalf("ingest: %+v, %v", sum, err)
	}
}

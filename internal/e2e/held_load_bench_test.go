package e2e

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/heldclients"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
)

// The load of BenchmarkHeldStreamsLoad (issue 17), bounded in count and
// time.
const (
	heldLoadStreams   = 10_000 // half 2025-11-25 GET streams, half 2026-07-28 listen streams
	heldLoadChildren  = 2      // client processes, heldLoadStreams/heldLoadChildren streams each
	heldLoadIdle      = 10 * time.Second
	heldLoadOpenLimit = 5 * time.Minute
)

// BenchmarkHeldStreamsLoad is the load test of issue 17, on SQLite:
// 10,000 idle held streams over 3 server processes sharing one store
// (MCPUSH_STREAM_HOLD=15m, as Managed Instances hold them), half
// 2025-11-25 sessions subscribed to events://T with their GET stream open,
// half 2026-07-28 subscriptions/listen streams on it. The clients run in
// two child processes of 5,000 streams each (internal/heldclients) and
// connect to the three processes directly, stream i to process i mod 3:
// through the proxy, this process would hold 10,000 more connections on
// each side, past the machine's 20,000 open files. After every stream is
// open and idle it counts the processes' store requests for 10 s
// (MCPUSH_STORE_STATS), reads each process's resident memory (VmRSS, less
// what it had before the streams), then ingests one event with
// sns-ingest: every stream must get it exactly once, with p99 latency
// from sns-ingest's exit (as BenchmarkPushLoad measures) within 1 s; the
// latency from its start, its fan-out to all 10,000 included, is reported
// too.
func BenchmarkHeldStreamsLoad(b *testing.B) {
	for b.Loop() {
		benchHeldStreamsLoad(b)
	}
	b.ReportMetric(0, "ns/op")
}

func benchHeldStreamsLoad(b *testing.B) {
	heldclients.RaiseFileLimit()
	statsDir := b.TempDir()
	e := startPushEnv(b, SQLiteStore(), instances, 0, "MCPUSH_STORE_STATS="+statsDir,
		"MCPUSH_STREAM_HOLD=15m", "MCPUSH_MAX_LISTENS_PER_PRINCIPAL=1000000")
	urls := make([]string, instances)
	rssBefore := make([]int64, instances)
	for i := range urls {
		urls[i] = e.cluster.URL(i)
		rssBefore[i] = residentKB(e.cluster.Pid(i))
	}
	topic := fmt.Sprintf("held%d", time.Now().UnixNano())
	opening := time.Now()
	var children []*heldclients.Child
	for range heldLoadChildren {
		children = append(children, heldclients.Start(b, heldclients.Options{
			URLs: urls, N: heldLoadStreams / heldLoadChildren, Era: "both", URI: ingest.EventURI(topic), Wait: 30 * time.Second,
		}, heldLoadOpenLimit))
	}
	opened := time.Since(opening)

	// Idle: the store requests of the three processes over heldLoadIdle.
	time.Sleep(2 * time.Second)
	before, _ := storeRequests(b, statsDir)
	start := time.Now()
	time.Sleep(heldLoadIdle)
	after, _ := storeRequests(b, statsDir)
	window := time.Since(start)
	idle := after["mcp"].Sub(before["mcp"])
	var rss []string
	var rssTotal int64
	for i := range instances {
		kb := residentKB(e.cluster.Pid(i)) - rssBefore[i]
		rssTotal += kb
		rss = append(rss, fmt.Sprintf("%.0f MB", float64(kb)/1024))
	}
	perStream := float64(rssTotal) * 1024 / heldLoadStreams

	ingestStart := time.Now()
	_, exited, err := e.ingest.deliver(pushSNSRecord{MessageID: topic + "-1", Message: pushEventMessage(topic, map[string]int{"n": 1})})
	if err != nil {
		b.Fatal(err)
	}
	var ds []heldclients.Delivery
	got, dup := 0, 0
	for _, c := range children {
		d, err := c.Delivered()
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, d)
		got += d.Got
		dup += d.Duplicates
	}
	// From sns-ingest's exit, as BenchmarkPushLoad measures (arrivals
	// before it count as 0), and from its start: its process start and
	// the fan-out to all 10,000 included.
	lat := heldclients.Latencies(exited, ds...)
	for i := range lat {
		lat[i] = max(0, lat[i])
	}
	p50, p99 := heldclients.Percentile(lat, 50), heldclients.Percentile(lat, 99)
	maxLat := heldclients.Percentile(lat, 100)
	fromStart := heldclients.Latencies(ingestStart, ds...)
	s50, s99, smax := heldclients.Percentile(fromStart, 50), heldclients.Percentile(fromStart, 99), heldclients.Percentile(fromStart, 100)
	if got != heldLoadStreams || dup != 0 {
		b.Errorf("the event reached %d of %d streams, %d of them more than once; want each exactly once", got, heldLoadStreams, dup)
	}
	if p99 > time.Second {
		b.Errorf("delivery p99 %v; want at most 1 s", p99)
	}
	readsPerS := float64(idle.Reads()) / window.Seconds()
	b.ReportMetric(readsPerS, "store-reads/s")
	b.ReportMetric(perStream/1024, "RSS-KiB/stream")
	b.ReportMetric(pushMS(p50), "p50-ms")
	b.ReportMetric(pushMS(p99), "p99-ms")
	b.ReportMetric(pushMS(maxLat), "max-ms")
	b.ReportMetric(pushMS(s99), "p99-from-ingest-start-ms")
	fmt.Printf("\nheld streams load (SQLite, %d processes, clients connected to them directly from %d child processes): %d idle held streams (%d GET streams of 2025-11-25 sessions, %d 2026-07-28 listen streams), opened in %v\n",
		instances, heldLoadChildren, heldLoadStreams, heldLoadStreams/2, heldLoadStreams/2, opened.Round(time.Second))
	fmt.Printf("| store requests per second of the %d processes while idle (%v, counted in the processes) | %.1f reads, %.1f writes (%s) |\n",
		instances, window.Round(time.Second), readsPerS, float64(idle.Writes())/window.Seconds(), rates(idle, window))
	fmt.Printf("| resident memory the streams added per process (VmRSS) | %s: %.1f KiB per stream |\n", strings.Join(rss, ", "), perStream/1024)
	fmt.Printf("| one event (sns-ingest) to all %d | %d got it, %d more than once; latency from sns-ingest's exit p50 %.0f ms, p99 %.0f ms, max %.0f ms; from its start p50 %.0f ms, p99 %.0f ms, max %.0f ms (sns-ingest ran %.0f ms: process start, store open, fan-out to 10,000 subscribers) |\n",
		heldLoadStreams, got, dup, pushMS(p50), pushMS(p99), pushMS(maxLat), pushMS(s50), pushMS(s99), pushMS(smax), pushMS(exited.Sub(ingestStart)))
}

// residentKB returns the VmRSS of a Linux process in kB, or 0.
func residentKB(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

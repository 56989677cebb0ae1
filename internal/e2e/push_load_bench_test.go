package e2e

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/storecount"
)

// The load of BenchmarkPushLoad (issue 8), bounded in count and time.
const (
	loadSessions    = 200
	loadTopics      = 50 // each session subscribes to one; 4 sessions per topic
	loadEventsPerS  = 50
	loadBatch       = 10 // events per sns-ingest run (an SNS batch)
	loadDuration    = 30 * time.Second
	loadCallsPerS   = 20 // tools/call, round robin over the sessions
	loadKillAfter   = loadDuration / 2
	loadDrainWithin = 60 * time.Second
)

// BenchmarkPushLoad is the load test of issue 8, on SQLite (moto cannot
// take this load): 200 sessions over 3 server processes behind the
// round-robin proxy, each subscribed to one of 50 topics with its GET
// stream open, tool calls at 20 per second, while 50 events per second are
// ingested (batches of 10 through sns-ingest) for 30 s; process 1 is
// killed (SIGKILL) midway and stays dead, so a third of all requests meet
// a dead backend (502) and are retried. Every session must receive each
// event of its topic exactly once, in order (notifications/message with
// sequence 1..n). It reports delivery latency (sns-ingest exit to arrival;
// p50, p99, max), each process's peak memory (VmHWM), and the tool calls
// that needed a retry; and the store requests per second over the load
// window (from the first batch to the end of ingest), reads and writes
// apart, by operation and by process kind, counted in the processes
// themselves: every server and every sns-ingest run writes its counts of
// notify.Store calls (on SQLite one statement or transaction each) to a
// file of its own (MCPUSH_STORE_STATS), and the benchmark adds them up.
// Servers write every 500 ms: the window starts once each has written
// after the setup, its end is early by up to that much, and the killed
// process's last half second is not counted (about 1% of the figures).
func BenchmarkPushLoad(b *testing.B) {
	for b.Loop() {
		benchPushLoad(b)
	}
	b.ReportMetric(0, "ns/op")
}

// storeRequests adds up the stats files in dir (MCPUSH_STORE_STATS) by
// process kind ("mcp", "sns-ingest"). oldest is the time of the least
// recent server ("mcp") file.
func storeRequests(tb testing.TB, dir string) (by map[string]storecount.Counts, oldest time.Time) {
	tb.Helper()
	all, err := storecount.ReadStats(dir)
	if err != nil {
		tb.Fatal(err)
	}
	by = map[string]storecount.Counts{}
	for _, s := range all {
		if by[s.Process] == nil {
			by[s.Process] = storecount.Counts{}
		}
		by[s.Process].Add(s.Ops)
		if s.Process == "mcp" && (oldest.IsZero() || s.Updated.Before(oldest)) {
			oldest = s.Updated
		}
	}
	return by, oldest
}

// rates formats counts per second over d, most frequent operation first:
// "GetSession 1959 (read), Append 201 (write)".
func rates(c storecount.Counts, d time.Duration) string {
	var ops []string
	for op := range c {
		ops = append(ops, op)
	}
	slices.SortFunc(ops, func(x, y string) int { return cmp.Or(cmp.Compare(c[y], c[x]), cmp.Compare(x, y)) })
	var parts []string
	for _, op := range ops {
		kind := "write"
		if storecount.IsRead(op) {
			kind = "read"
		}
		parts = append(parts, fmt.Sprintf("%s %.0f (%s)", op, float64(c[op])/d.Seconds(), kind))
	}
	return strings.Join(parts, ", ")
}

func benchPushLoad(b *testing.B) {
	statsDir := b.TempDir()
	e := startPushEnv(b, SQLiteStore(), instances, 0, "MCPUSH_STORE_STATS="+statsDir)
	type session struct {
		c      *pushClient
		topic  string
		stream *pushStream
	}
	sessions := make([]*session, loadSessions)
	for i := range sessions {
		s := &session{c: e.connect(b, fmt.Sprintf("load-%03d", i)), topic: fmt.Sprintf("load%02d", i%loadTopics)}
		s.c.subscribe(s.topic)
		s.stream = s.c.openStream()
		sessions[i] = s
	}
	defer func() {
		for _, s := range sessions {
			s.stream.close()
		}
	}()

	// Tool calls at a steady rate, retried (a dead backend answers 502).
	var calls, retried, failed atomic.Int64
	stopCalls := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / loadCallsPerS)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopCalls:
				return
			case <-tick.C:
			}
			c := sessions[i%len(sessions)].c
			calls.Add(1)
			for attempt := 0; ; attempt++ {
				_, err := c.callURL(c.url, "tools/call", map[string]any{"name": "session_info", "arguments": map[string]any{}})
				if err == nil {
					break
				}
				if attempt == 3 {
					failed.Add(1)
					break
				}
				retried.Add(1)
			}
		}
	}()

	// Events: loadEventsPerS per second, in batches, for loadDuration.
	type published struct {
		topic string
		seq   int64
		at    time.Time // sns-ingest exited
	}
	var (
		pubs     []published
		next     = map[string]int64{}
		memory   = make([]string, instances)
		killedAt time.Time
	)
	// The servers' stats files, once written after the setup, hold all
	// of its requests and little else.
	setupDone := time.Now()
	countsBefore, oldest := storeRequests(b, statsDir)
	for !oldest.After(setupDone) && time.Since(setupDone) < 5*time.Second {
		time.Sleep(50 * time.Millisecond)
		countsBefore, oldest = storeRequests(b, statsDir)
	}
	start := time.Now()
	interval := time.Second * loadBatch / loadEventsPerS
	for n := 0; time.Since(start) < loadDuration; n++ {
		if killedAt.IsZero() && time.Since(start) >= loadKillAfter {
			memory[1] = peakMemory(e.cluster.Pid(1))
			if err := e.cluster.Kill(1); err != nil {
				b.Fatal(err)
			}
			killedAt = time.Now()
		}
		var recs []pushSNSRecord
		var batch []published
		for k := range loadBatch {
			topic := fmt.Sprintf("load%02d", (n*loadBatch+k)%loadTopics)
			next[topic]++
			recs = append(recs, pushSNSRecord{
				MessageID: fmt.Sprintf("load-%s-%d", topic, next[topic]),
				Message:   pushEventMessage(topic, map[string]int64{"n": next[topic]}),
			})
			batch = append(batch, published{topic: topic, seq: next[topic]})
		}
		_, exited, err := e.ingest.deliver(recs...)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range batch {
			p.at = exited
			pubs = append(pubs, p)
		}
		if d := time.Until(start.Add(time.Duration(n+1) * interval)); d > 0 {
			time.Sleep(d)
		}
	}
	ingestDone := time.Now()
	countsAfter, _ := storeRequests(b, statsDir)
	close(stopCalls)
	wg.Wait()

	// Every session gets every event of its topic, once, in order.
	exitAt := map[string]time.Time{}
	for _, p := range pubs {
		exitAt[fmt.Sprintf("%s/%d", p.topic, p.seq)] = p.at
	}
	var lat []time.Duration
	deadline := time.Now().Add(loadDrainWithin)
	for _, s := range sessions {
		want := next[s.topic]
		events := func(msgs []pushMessage) []pushEventData {
			var out []pushEventData
			for _, m := range msgs {
				if m.Method != "notifications/message" {
					continue
				}
				if _, logger, data := m.logMessage(); logger == "events/"+s.topic {
					out = append(out, data)
				}
			}
			return out
		}
		if !s.stream.waitUntil(time.Until(deadline), func(msgs []pushMessage) bool { return int64(len(events(msgs))) >= want }) {
			b.Fatalf("session %s (%s): %d of %d events within %v after ingest ended: %s",
				s.c.session, s.topic, len(events(s.stream.messages())), want, loadDrainWithin, s.stream.report())
		}
		msgs := s.stream.messages()
		got := events(msgs)
		for i, d := range got {
			if d.Sequence != int64(i+1) {
				b.Fatalf("session %s (%s): event %d has sequence %d: lost, repeated or out of order", s.c.session, s.topic, i+1, d.Sequence)
			}
		}
		if p := s.stream.problemList(); len(p) > 0 {
			b.Fatalf("session %s: stream problems %q", s.c.session, p)
		}
		for _, m := range msgs {
			if m.Method != "notifications/message" {
				continue
			}
			if _, _, d := m.logMessage(); d.Topic == s.topic {
				lat = append(lat, max(0, m.At.Sub(exitAt[fmt.Sprintf("%s/%d", d.Topic, d.Sequence)])))
			}
		}
	}
	for i := range instances {
		if i != 1 {
			memory[i] = peakMemory(e.cluster.Pid(i))
		}
	}
	slices.Sort(lat)
	p50, p99 := pushPercentile(lat, 50), pushPercentile(lat, 99)
	b.ReportMetric(pushMS(p50), "p50-ms")
	b.ReportMetric(pushMS(p99), "p99-ms")
	fmt.Printf("\npush load (SQLite, %d processes behind the proxy, process 1 killed at %v): %d sessions on %d topics, %d events in %v (%d per second asked), %d deliveries, each exactly once and in order\n",
		instances, killedAt.Sub(start).Round(time.Second), loadSessions, loadTopics, len(pubs), ingestDone.Sub(start).Round(time.Second), loadEventsPerS, len(lat))
	fmt.Printf("| delivery latency, sns-ingest exit to arrival | p50 %.0f ms, p99 %.0f ms, max %.0f ms |\n", pushMS(p50), pushMS(p99), pushMS(lat[len(lat)-1]))
	fmt.Printf("| tools/call | %d at %d/s, %d retries (dead backend), %d failed 4 times |\n", calls.Load(), loadCallsPerS, retried.Load(), failed.Load())
	fmt.Printf("| peak memory per process (VmHWM) | %s |\n", strings.Join(memory, ", "))

	// Store requests in the load window, in all and by process kind.
	window := ingestDone.Sub(start)
	perS := func(n int64) float64 { return float64(n) / window.Seconds() }
	servers := countsAfter["mcp"].Sub(countsBefore["mcp"])
	ingests := countsAfter["sns-ingest"].Sub(countsBefore["sns-ingest"])
	if servers.Total() == 0 || ingests["AppendTopicEvent"] != int64(len(pubs)) {
		b.Fatalf("store stats: servers counted %v, sns-ingest %v; want server requests and one AppendTopicEvent per event (%d)", servers, ingests, len(pubs))
	}
	total := storecount.Counts{}
	total.Add(servers)
	total.Add(ingests)
	b.ReportMetric(perS(total.Total()), "store-req/s")
	b.ReportMetric(perS(total.Reads()), "store-reads/s")
	b.ReportMetric(perS(total.Writes()), "store-writes/s")
	fmt.Printf("| store requests per second over the %v of load, counted in the processes (SQLite: one statement or transaction each) | %.0f: %.0f reads, %.0f writes; servers %.0f, sns-ingest %.0f (%.1f per event) |\n",
		window.Round(time.Second), perS(total.Total()), perS(total.Reads()), perS(total.Writes()),
		perS(servers.Total()), perS(ingests.Total()), float64(ingests.Total())/float64(len(pubs)))
	fmt.Printf("| store requests per second of the servers, by operation | %s |\n", rates(servers, window))
	fmt.Printf("| store requests per second of sns-ingest, by operation | %s |\n", rates(ingests, window))
	if failed.Load() > 0 {
		b.Errorf("%d tool calls failed four times", failed.Load())
	}
}

// peakMemory returns the VmHWM line of a Linux process, or "n/a".
func peakMemory(pid int) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "n/a"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "n/a"
}

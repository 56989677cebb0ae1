package e2e

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
// that needed a retry. Store requests per second are not counted here:
// the servers are separate processes on SQLite (internal/costs counts
// requests per operation).
func BenchmarkPushLoad(b *testing.B) {
	for b.Loop() {
		benchPushLoad(b)
	}
	b.ReportMetric(0, "ns/op")
}

func benchPushLoad(b *testing.B) {
	e := startPushEnv(b, SQLiteStore(), instances, 0)
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

package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// pushEvent is one external event the events test publishes.
type pushEvent struct {
	topic     string
	n         int64 // 1, 2, ... within the topic: the sequence it must get
	messageID string
	message   string
}

// pushEventPayload is the data of the events the test publishes.
type pushEventPayload struct {
	Topic string `json:"topic"`
	N     int64  `json:"n"`
}

// pushEventsSession is a session of the events test: what it subscribes to,
// its log level, and its open GET stream.
type pushEventsSession struct {
	name    string
	topics  []string
	level   string // "" = never set
	c       *pushClient
	stream  *pushStream
	backend int // the process that first served its GET stream
}

// wantsMessages reports whether the session's level admits info, so that
// it gets each event as notifications/message too.
func (s *pushEventsSession) wantsMessages() bool {
	return s.level == "" || s.level == "debug" || s.level == "info"
}

// expected is how many messages the session must receive for the events
// of topics a and b: per subscribed topic one resources/updated per event,
// plus one notifications/message per event if it admits info.
func (s *pushEventsSession) expected(perTopic int) int {
	n := len(s.topics) * perTopic
	if s.wantsMessages() {
		n *= 2
	}
	return n
}

const (
	pushEventsPerTopic  = 100
	pushEventsRedeliver = 50
	pushEventsBatchSize = 20 // new events per SNS batch (plus redeliveries)
)

var pushEventTopics = []string{"a", "b"}

// eventsPollInterval is the servers' poll interval in the events test.
// On DynamoDB it is 500ms instead of the default 100ms: the test's moto
// endpoint serialises every request to a table, so five GET streams
// polling every 100ms (and marking deliveries) take most of its capacity
// and leave sns-ingest about one event per second; 1250 fan-out appends
// would then take many minutes. Real DynamoDB has no such bottleneck;
// what the test checks does not depend on the interval.
func eventsPollInterval(store Store) time.Duration {
	if store.Name == "dynamodb" {
		return 500 * time.Millisecond
	}
	return 0
}

// TestPushEvents is the external events acceptance test of issue 4: three
// server processes behind the round-robin proxy on one store; 200 events
// on topics a and b published with sns-ingest in SNS batches, 50 of them
// delivered again (same MessageId and body) in later batches; five
// sessions subscribed to events://a, events://b or both, at log levels
// unset, "warning" and "info". While the events flow, the process serving
// one session's GET stream is killed (SIGKILL); the stream resumes with
// Last-Event-ID through the proxy, on another process.
//
// Every session receives exactly its events, once, in order: per
// subscribed topic 100 notifications/resources/updated, and, when its
// level admits info, 100 notifications/message (logger events/<topic>,
// level info) with sequences 1..100 in order, each carrying the message
// id and payload published for it, right after the resources/updated of
// the same event; nothing for topics it is not subscribed to; and event
// ids on its stream that only increase (nothing replayed twice), across
// the kill. A final marker event proves each stream delivered its whole
// log before the counts are checked.
func TestPushEvents(t *testing.T) {
	for _, store := range testStores() {
		t.Run(store.Name, func(t *testing.T) { testPushEvents(t, store) })
	}
}

func testPushEvents(t *testing.T, store Store) {
	start := time.Now()
	e := startPushEnv(t, store, instances, eventsPollInterval(store))
	sessions := []*pushEventsSession{
		{name: "a-unset", topics: []string{"a"}, level: ""},
		{name: "b-info", topics: []string{"b"}, level: "info"},
		{name: "ab-warning", topics: []string{"a", "b"}, level: "warning"},
		{name: "ab-unset", topics: []string{"a", "b"}, level: ""},
		{name: "a-info", topics: []string{"a"}, level: "info"},
	}
	victim := sessions[3] // both topics, with messages: the most traffic
	defer func() {
		if t.Failed() {
			for _, s := range sessions {
				if s.stream != nil {
					t.Logf("%s (%s, process %d): %s", s.name, s.c.session, s.backend, s.stream.report())
				}
			}
		}
	}()

	// Sessions, then their GET streams one at a time, so that the
	// proxy's counts tell which process serves each (the proxy sends each
	// request to the next backend).
	for _, s := range sessions {
		s.c = e.connect(t, s.name)
		s.c.setLevel(s.level)
		for _, topic := range s.topics {
			s.c.subscribe(topic)
		}
		s.c.subscribe("end")
	}
	for _, s := range sessions {
		before := e.proxy.Counts()
		s.stream = s.c.openStream()
		after := e.proxy.Counts()
		s.backend = -1
		for i := range after {
			if after[i] == before[i]+1 && s.backend == -1 {
				s.backend = i
			} else if after[i] != before[i] {
				t.Fatalf("proxy counts went from %v to %v while opening one stream", before, after)
			}
		}
		if s.backend == -1 {
			t.Fatalf("proxy counts %v -> %v: no backend served the stream", before, after)
		}
	}

	batches, all := pushEventBatches()
	totalRecords := 0
	for _, b := range batches {
		totalRecords += len(b)
	}

	// Publish in the background; kill the victim's process once it has
	// received a quarter of its messages, while events still flow.
	type result struct {
		sum pushIngestSummary
		err error
	}
	results := make(chan result, len(batches))
	quit := make(chan struct{}) // the test ended early: publish no more
	defer close(quit)
	go func() {
		defer close(results)
		for _, b := range batches {
			select {
			case <-quit:
				return
			default:
			}
			sum, _, err := e.ingest.deliver(b...)
			results <- result{sum, err}
			if err != nil {
				return
			}
		}
	}()
	want := victim.expected(pushEventsPerTopic)
	if !victim.stream.waitProgressing(pushDeliveryTimeout, func(msgs []pushMessage) bool { return len(msgs) >= want/4 }) {
		t.Fatalf("%s: delivery stalled for %v before a quarter of its %d messages: %s", victim.name, pushDeliveryTimeout, want, victim.stream.report())
	}
	atKill := len(victim.stream.messages())
	connectsBefore, _ := victim.stream.stats()
	killedAt := time.Now()
	if err := e.cluster.Kill(victim.backend); err != nil {
		t.Fatal(err)
	}
	published := 0
	var sum pushIngestSummary
	for r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		published++
		sum.Accepted += r.sum.Accepted
		sum.Duplicates += r.sum.Duplicates
		sum.Rejected += r.sum.Rejected
	}
	t.Logf("killed process %d serving %s's GET stream after it received %d of %d messages; %d SNS records in %d batches published in %.1fs",
		victim.backend, victim.name, atKill, want, totalRecords, published, time.Since(start).Seconds())
	if atKill >= want {
		t.Logf("note: %s had received all its messages before the kill; the kill was not mid-stream", victim.name)
	}
	if wantSum := (pushIngestSummary{Accepted: len(all), Duplicates: pushEventsRedeliver}); sum.Accepted != wantSum.Accepted || sum.Duplicates != wantSum.Duplicates || sum.Rejected != 0 {
		t.Errorf("sns-ingest summaries add up to %+v, want %+v", sum, wantSum)
	}

	// A marker event after all others: a stream that delivered it has
	// delivered its whole log.
	e.ingest.mustDeliver(t, pushSNSRecord{MessageID: "end-marker", Message: pushEventMessage("end", map[string]bool{"end": true})})
	for _, s := range sessions {
		if !s.stream.waitProgressing(pushDeliveryTimeout, func(msgs []pushMessage) bool { return pushCountUpdated(msgs, "end") >= 1 }) {
			t.Fatalf("%s: delivery stalled for %v before the end marker: %s", s.name, pushDeliveryTimeout, s.stream.report())
		}
	}
	connects, resumes := victim.stream.stats()
	t.Logf("%s: stream resumed %.2fs after the kill; %d GET connections, %d with Last-Event-ID", victim.name,
		victim.stream.lastOpened().Sub(killedAt).Seconds(), connects, resumes)
	if connects <= connectsBefore || resumes == 0 {
		t.Errorf("%s: the stream was not resumed with Last-Event-ID after its process was killed: %s", victim.name, victim.stream.report())
	}

	byID := map[string]pushEvent{}
	for _, ev := range all {
		byID[ev.messageID] = ev
	}
	for _, s := range sessions {
		pushCheckEventsSession(t, s, byID)
		if s.backend == victim.backend {
			if _, r := s.stream.stats(); r == 0 {
				t.Errorf("%s: served by the killed process %d, but never resumed with Last-Event-ID", s.name, s.backend)
			}
		}
	}
	t.Logf("done in %.1fs; proxy: %d requests %v", time.Since(start).Seconds(), e.proxy.Total(), e.proxy.Counts())
}

// pushCheckEventsSession checks everything a session received for topics a
// and b.
func pushCheckEventsSession(t *testing.T, s *pushEventsSession, byID map[string]pushEvent) {
	t.Helper()
	msgs := s.stream.messages()
	if p := s.stream.problemList(); len(p) > 0 {
		t.Errorf("%s: delivery problems: %q", s.name, p)
	}
	for _, topic := range pushEventTopics {
		subscribed := slices.Contains(s.topics, topic)
		wantUpdated, wantMessages := 0, 0
		if subscribed {
			wantUpdated = pushEventsPerTopic
			if s.wantsMessages() {
				wantMessages = pushEventsPerTopic
			}
		}
		if got := pushCountUpdated(msgs, topic); got != wantUpdated {
			t.Errorf("%s: %d notifications/resources/updated for events://%s, want %d", s.name, got, topic, wantUpdated)
		}
		var seqs []int64
		for i, m := range msgs {
			if m.Method != "notifications/message" {
				continue
			}
			level, logger, data := m.logMessage()
			if logger != "events/"+topic {
				continue
			}
			seqs = append(seqs, data.Sequence)
			ev, ok := byID[data.MessageID]
			var payload pushEventPayload
			json.Unmarshal(data.Payload, &payload)
			switch {
			case level != "info" || data.Topic != topic:
				t.Errorf("%s: event message %s: level %q topic %q, want info and %q", s.name, m.EventID, level, data.Topic, topic)
			case !ok || ev.topic != topic || ev.n != data.Sequence:
				t.Errorf("%s: event message %s: sequence %d with message id %q, which the test published as %+v", s.name, m.EventID, data.Sequence, data.MessageID, ev)
			case payload != (pushEventPayload{Topic: topic, N: ev.n}):
				t.Errorf("%s: event message %s: payload %s, want %+v", s.name, m.EventID, data.Payload, pushEventPayload{Topic: topic, N: ev.n})
			case data.ReceivedAt.IsZero():
				t.Errorf("%s: event message %s: no receivedAt", s.name, m.EventID)
			case i == 0 || msgs[i-1].Method != "notifications/resources/updated" || msgs[i-1].uri() != "events://"+topic:
				t.Errorf("%s: event message %s (%s seq %d) does not follow its resources/updated", s.name, m.EventID, topic, data.Sequence)
			}
		}
		if len(seqs) != wantMessages || !pushIsOneToN(seqs) {
			t.Errorf("%s: notifications/message for topic %s carry sequences %s, want 1..%d in order, once each", s.name, topic, pushDescribeSeqs(seqs), wantMessages)
		}
	}
}

func pushIsOneToN(seqs []int64) bool {
	for i, s := range seqs {
		if s != int64(i+1) {
			return false
		}
	}
	return true
}

// pushDescribeSeqs summarises a sequence list for an error message: its
// length, and the first place it departs from 1, 2, 3, ...
func pushDescribeSeqs(seqs []int64) string {
	for i, s := range seqs {
		if s != int64(i+1) {
			lo, hi := max(0, i-3), min(len(seqs), i+4)
			return fmt.Sprintf("(%d values) departing from 1..N at index %d: ...%v...", len(seqs), i, seqs[lo:hi])
		}
	}
	return fmt.Sprintf("1..%d", len(seqs))
}

// pushEventBatches returns the SNS batches of the events test and the events
// in publication order: 100 events per topic, interleaved in a fixed
// pseudo-random order, pushEventsBatchSize new events per batch, and 50 of
// them delivered again, each once, in a later batch, at a random place.
func pushEventBatches() (batches [][]pushSNSRecord, all []pushEvent) {
	rng := rand.New(rand.NewPCG(4, 2025))
	order := rng.Perm(len(pushEventTopics) * pushEventsPerTopic)
	next := map[string]int64{}
	for _, i := range order {
		topic := pushEventTopics[i%len(pushEventTopics)]
		next[topic]++
		n := next[topic]
		all = append(all, pushEvent{
			topic:     topic,
			n:         n,
			messageID: fmt.Sprintf("evt-%s-%03d", topic, n),
			message:   pushEventMessage(topic, pushEventPayload{Topic: topic, N: n}),
		})
	}
	nBatches := len(all) / pushEventsBatchSize
	var pool []pushEvent // published in earlier batches, not yet redelivered
	redelivered := 0
	for b := range nBatches {
		var batch []pushSNSRecord
		for _, ev := range all[b*pushEventsBatchSize : (b+1)*pushEventsBatchSize] {
			batch = append(batch, pushSNSRecord{MessageID: ev.messageID, Message: ev.message})
		}
		if b > 0 {
			// Spread the redeliveries over batches 1..nBatches-1.
			k := pushEventsRedeliver*b/(nBatches-1) - redelivered
			for range k {
				j := rng.IntN(len(pool))
				ev := pool[j]
				pool = slices.Delete(pool, j, j+1)
				at := rng.IntN(len(batch) + 1)
				batch = slices.Insert(batch, at, pushSNSRecord{MessageID: ev.messageID, Message: ev.message})
			}
			redelivered += k
		}
		pool = append(pool, all[b*pushEventsBatchSize:(b+1)*pushEventsBatchSize]...)
		batches = append(batches, batch)
	}
	if redelivered != pushEventsRedeliver {
		panic(fmt.Sprintf("pushEventBatches: %d redeliveries, want %d", redelivered, pushEventsRedeliver))
	}
	return batches, all
}

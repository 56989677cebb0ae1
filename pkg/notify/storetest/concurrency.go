package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
)

const workers = 8

// race runs f(0) ... f(n-1) in goroutines released at the same moment, and
// waits for them.
func race(n int, f func(g int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range n {
		wg.Go(func() {
			<-start
			f(g)
		})
	}
	close(start)
	wg.Wait()
}

// twoStores opens two Stores on one fresh backing database, as two
// processes would.
func (s *suite) twoStores(t *testing.T) [2]notify.Store {
	st, dsn := s.storeDSN(t)
	return [2]notify.Store{st, s.reopen(t, dsn)}
}

// testConcurrentAppend races appends of batches of 1 to 3 events to one
// stream: the log is 1..N with no gap or duplicate, and every batch is
// contiguous.
func testConcurrentAppend(t *testing.T, s *suite) {
	stores := s.twoStores(t)
	ctx := t.Context()
	createSession(t, stores[0], "s1")
	const perWorker = 50
	type batch struct {
		last int64
		data []string
	}
	batches := make([][]batch, workers)
	race(workers, func(g int) {
		st := stores[g%2]
		size := g%3 + 1
		for i := range perWorker {
			data := make([]string, size)
			for j := range data {
				data[j] = fmt.Sprintf("g%d-%d-%d", g, i, j)
			}
			seq, ok, err := st.Append(ctx, "s1", "s", bytesOf(data...), nil)
			if err != nil || !ok {
				t.Errorf("worker %d: Append = %d, %t, %v", g, seq, ok, err)
				return
			}
			batches[g] = append(batches[g], batch{seq, data})
		}
	})
	if t.Failed() {
		return
	}

	total := 0
	for g := range workers {
		total += perWorker * (g%3 + 1)
	}
	evs := readEvents(t, stores[1], "s1", "s", 0, total+10)
	if len(evs) != total {
		t.Fatalf("ReadEvents: %d events, want %d", len(evs), total)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("ReadEvents: event %d has Seq %d, want %d (gap or duplicate)", i, ev.Seq, i+1)
		}
	}
	for g, bs := range batches {
		var prev int64
		for _, b := range bs {
			if b.last <= prev {
				t.Errorf("worker %d: Append returned %d after %d", g, b.last, prev)
			}
			prev = b.last
			first := int(b.last) - len(b.data) // index of the batch's first event
			if first < 0 {
				t.Errorf("worker %d: Append returned last seq %d for %d events", g, b.last, len(b.data))
				continue
			}
			var got []string
			for _, ev := range evs[first:int(b.last)] {
				got = append(got, string(ev.Data))
			}
			if diff := cmp.Diff(b.data, got); diff != "" {
				t.Errorf("worker %d: batch ending at %d is not where Append said (-want +got):\n%s", g, b.last, diff)
			}
		}
	}
}

// testConcurrentConditions races conditional writes that exactly one
// writer may win: a NotifiedHash CAS, an IdempotencyKey, a PutMessage.
func testConcurrentConditions(t *testing.T, s *suite) {
	stores := s.twoStores(t)
	ctx := t.Context()
	createSession(t, stores[0], "s1")

	// Five rounds of CAS from the previous round's hash.
	old := ""
	for round := range 5 {
		var wins atomic.Int32
		winner := make([]bool, workers)
		race(workers, func(g int) {
			_, ok, err := stores[g%2].Append(ctx, "s1", "cas", bytesOf(fmt.Sprintf("r%d-g%d", round, g)),
				&notify.AppendOptions{NotifiedHash: &notify.HashCAS{
					Registry: notify.RegistryTools, Old: old, New: fmt.Sprintf("h%d-g%d", round, g)}})
			if err != nil {
				t.Errorf("round %d, worker %d: Append: %v", round, g, err)
			}
			if ok {
				wins.Add(1)
				winner[g] = true
			}
		})
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d CAS winners, want 1", round, n)
		}
		g := slices.Index(winner, true)
		want := fmt.Sprintf("h%d-g%d", round, g)
		if got := getSession(t, stores[round%2], "s1").NotifiedHashes[notify.RegistryTools]; got != want {
			t.Errorf("round %d: NotifiedHashes[tools] = %q, want the winner's %q", round, got, want)
		}
		evs := readEvents(t, stores[0], "s1", "cas", 0, 100)
		if len(evs) != round+1 || string(evs[round].Data) != fmt.Sprintf("r%d-g%d", round, g) {
			t.Errorf("round %d: events %v, want %d with the winner's last", round, evs, round+1)
		}
		old = want
	}

	var appended atomic.Int32
	race(workers, func(g int) {
		_, ok, err := stores[g%2].Append(ctx, "s1", "idem", bytesOf("x"), &notify.AppendOptions{IdempotencyKey: "k"})
		if err != nil {
			t.Errorf("worker %d: Append with key: %v", g, err)
		}
		if ok {
			appended.Add(1)
		}
	})
	if n := appended.Load(); n != 1 {
		t.Errorf("Append with one IdempotencyKey: %d appended, want 1", n)
	}
	if evs := readEvents(t, stores[1], "s1", "idem", 0, 100); len(evs) != 1 {
		t.Errorf("Append with one IdempotencyKey: %d events, want 1", len(evs))
	}

	var created atomic.Int32
	won := make([]bool, workers)
	race(workers, func(g int) {
		ok, err := stores[g%2].PutMessage(ctx, "s1", "resp", []byte(fmt.Sprintf("g%d", g)))
		if err != nil {
			t.Errorf("worker %d: PutMessage: %v", g, err)
		}
		if ok {
			created.Add(1)
			won[g] = true
		}
	})
	if n := created.Load(); n != 1 {
		t.Fatalf("PutMessage: %d created, want 1", n)
	}
	got, err := stores[1].GetMessage(ctx, "s1", "resp")
	if want := fmt.Sprintf("g%d", slices.Index(won, true)); err != nil || string(got) != want {
		t.Errorf("GetMessage = %q, %v; want the winner's %q", got, err, want)
	}
}

// testConcurrentTopics races topic appends with distinct message ids and
// with one shared message id.
func testConcurrentTopics(t *testing.T, s *suite) {
	stores := s.twoStores(t)
	ctx := t.Context()
	const perWorker = 10
	var created atomic.Int32
	sharedSeq := make([]int64, workers)
	race(workers, func(g int) {
		st := stores[g%2]
		for i := range perWorker {
			if i == perWorker/2 {
				ev, ok, err := st.AppendTopicEvent(ctx, "orders", "shared", now(), json.RawMessage(fmt.Sprintf(`{"g":%d}`, g)))
				if err != nil {
					t.Errorf("worker %d: AppendTopicEvent(shared): %v", g, err)
					return
				}
				if ok {
					created.Add(1)
				}
				sharedSeq[g] = ev.Seq
			}
			id := fmt.Sprintf("g%d-%d", g, i)
			if _, ok, err := st.AppendTopicEvent(ctx, "orders", id, now(), json.RawMessage(`{}`)); err != nil || !ok {
				t.Errorf("worker %d: AppendTopicEvent(%q) = %t, %v", g, id, ok, err)
				return
			}
		}
	})
	if t.Failed() {
		return
	}
	if n := created.Load(); n != 1 {
		t.Errorf("AppendTopicEvent(shared): %d created, want 1", n)
	}
	for g, seq := range sharedSeq {
		if seq != sharedSeq[0] || seq < 1 {
			t.Errorf("worker %d: AppendTopicEvent(shared) returned Seq %d, worker 0 got %d", g, seq, sharedSeq[0])
		}
	}
	total := workers*perWorker + 1
	evs, err := stores[0].ReadTopicEvents(ctx, "orders", 0, total+10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != total {
		t.Fatalf("ReadTopicEvents: %d events, want %d", len(evs), total)
	}
	ids := make(map[string]bool)
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("ReadTopicEvents: event %d has Seq %d, want %d", i, ev.Seq, i+1)
		}
		if ids[ev.MessageID] {
			t.Errorf("message id %q appended twice", ev.MessageID)
		}
		ids[ev.MessageID] = true
	}
	topics, err := stores[1].Topics(ctx)
	if err != nil || len(topics) != 1 || topics[0].LastSeq != int64(total) {
		t.Errorf("Topics() = %+v, %v; want orders with LastSeq %d", topics, err, total)
	}
}

// testConcurrentRegistry races puts of distinct items: every one is
// applied, and the final hash matches the final items.
func testConcurrentRegistry(t *testing.T, s *suite) {
	stores := s.twoStores(t)
	ctx := t.Context()
	const perWorker = 5
	want := make(items)
	for g := range workers {
		for i := range perWorker {
			want[fmt.Sprintf("g%d-%d", g, i)] = json.RawMessage(fmt.Sprintf(`{"g":%d,"i":%d}`, g, i))
		}
	}
	race(workers, func(g int) {
		for i := range perWorker {
			key := fmt.Sprintf("g%d-%d", g, i)
			reg, ok, err := stores[g%2].ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, items{key: want[key]}, key)
			if err != nil || !ok {
				t.Errorf("ApplyRegistry(%q) = %t, %v", key, ok, err)
				return
			}
			if _, has := reg.Items[key]; !has || reg.Hash != notify.HashItems(reg.Items) {
				t.Errorf("ApplyRegistry(%q) returned a registry without its item or with a wrong hash", key)
			}
		}
	})
	reg, err := stores[0].GetRegistry(ctx, notify.RegistryTools)
	if err != nil {
		t.Fatal(err)
	}
	checkRegistry(t, "GetRegistry", reg, notify.RegistryTools, want)
	checkHashes(t, stores[1], "final", map[string]string{notify.RegistryTools: notify.HashItems(want)})
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pushRegistryKinds are the registries whose changes a session is told of.
var pushRegistryKinds = []string{"tools", "resources", "prompts"}

func pushListChanged(kind string) string { return "notifications/" + kind + "/list_changed" }

// pushRegistryItem returns an item of the registry kind. Item "A" carries a
// version that changes its content (and so the registry's hash); item "B"
// is a second, fixed item. With only the key set (keyOnly), it is the
// form a delete takes.
func pushRegistryItem(kind, item, version string, keyOnly bool) map[string]any {
	switch kind {
	case "tools":
		if item == "A" {
			if keyOnly {
				return map[string]any{"name": "events_recent"}
			}
			return map[string]any{"name": "events_recent", "description": "events_recent " + version}
		}
		if keyOnly {
			return map[string]any{"name": "topics_list"}
		}
		return map[string]any{"name": "topics_list", "enabled": false}
	case "resources":
		uri := "file:///push/" + item + ".txt"
		if keyOnly {
			return map[string]any{"uri": uri}
		}
		return map[string]any{"uri": uri, "name": item, "text": item + " " + version}
	default:
		name := "prompt" + item
		if keyOnly {
			return map[string]any{"name": name}
		}
		return map[string]any{"name": name, "messages": []any{map[string]any{"role": "user", "text": item + " " + version}}}
	}
}

// pushDedupChange is the k-th (1..4) registry change of the main phase; every
// one changes the registry's hash to one it never had:
//
//	1: put A(v1)        -> {A v1}
//	2: put B            -> {A v1, B}
//	3: delete A         -> {B}
//	4: replace with A(v4) -> {A v4}
func pushDedupChange(kind string, k int) string {
	switch k {
	case 1:
		return pushRegistryMessage(kind, "put", pushRegistryItem(kind, "A", "v1", false))
	case 2:
		return pushRegistryMessage(kind, "put", pushRegistryItem(kind, "B", "", false))
	case 3:
		return pushRegistryMessage(kind, "delete", pushRegistryItem(kind, "A", "", true))
	default:
		return pushRegistryMessage(kind, "replace", pushRegistryItem(kind, "A", "v4", false))
	}
}

// pushDedupSession is one session of the dedup test with its open GET stream.
type pushDedupSession struct {
	name   string
	c      *pushClient
	stream *pushStream
}

// pushDedupRun holds the state of one run of TestPushListChanged.
type pushDedupRun struct {
	env      *pushEnv
	sessions []*pushDedupSession
	markers  int // sync events published so far
	msgIDs   int
}

func (d *pushDedupRun) newSession(t *testing.T, name string) *pushDedupSession {
	t.Helper()
	c := d.env.connect(t, name)
	c.subscribe("sync") // for barriers, see settle
	s := &pushDedupSession{name: name, c: c, stream: c.openStream()}
	d.sessions = append(d.sessions, s)
	return s
}

func (d *pushDedupRun) record(message string) pushSNSRecord {
	d.msgIDs++
	return pushSNSRecord{MessageID: fmt.Sprintf("registry-%03d", d.msgIDs), Message: message}
}

// counts returns a session's list_changed counts by registry kind.
func (s *pushDedupSession) counts() map[string]int {
	msgs := s.stream.messages()
	out := map[string]int{}
	for _, kind := range pushRegistryKinds {
		out[kind] = pushCountMethod(msgs, pushListChanged(kind))
	}
	return out
}

// snapshot returns every session's counts, by session name.
func (d *pushDedupRun) snapshot() map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, s := range d.sessions {
		out[s.name] = s.counts()
	}
	return out
}

// settle makes every notification that the servers will produce for the
// registries as they are now visible to the test: it waits for more than
// two registry refreshes plus two polls (every process's cache has then
// been re-read and every GET stream and POST checked against it; this
// wait is the observation window in which a spurious notification would
// be produced), then publishes a marker event on topic "sync", to which
// every session is subscribed, and waits until every stream delivered it.
// The marker enters each session's GET-stream log after anything
// appended before it, so when a stream has delivered the marker it has
// delivered every notification appended in the window.
func (d *pushDedupRun) settle(t *testing.T) {
	t.Helper()
	time.Sleep(2*pushRegistryRefresh + 2*pushPollInterval)
	d.markers++
	marker := d.markers
	d.env.ingest.mustDeliver(t, pushSNSRecord{MessageID: fmt.Sprintf("sync-%03d", marker), Message: pushEventMessage("sync", map[string]int{"marker": marker})})
	for _, s := range d.sessions {
		ok := s.stream.waitUntil(pushDeliveryTimeout, func(msgs []pushMessage) bool {
			for _, m := range slices.Backward(msgs) {
				if m.Method != "notifications/message" {
					continue
				}
				if _, logger, data := m.logMessage(); logger == "events/sync" {
					var p struct{ Marker int }
					json.Unmarshal(data.Payload, &p)
					return p.Marker == marker
				}
			}
			return false
		})
		if !ok {
			t.Fatalf("%s: sync marker %d not delivered within %v: %s", s.name, marker, pushDeliveryTimeout, s.stream.report())
		}
	}
}

// chatter makes every session send requests through the proxy (pings
// and tools/list, alternately, about every 100ms) until the returned
// function is called, which reports any failed request. Every POST checks
// the session's registry hashes, so while registries change, the
// processes serving these requests race the GET streams' pumps (and each
// other) to notify the same session of the same change: only the
// conditional write keeps it to one notification.
func (d *pushDedupRun) chatter(t *testing.T) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		errs  []string
		calls atomic.Int64
	)
	for i, s := range d.sessions {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			for n := 0; ; n++ {
				select {
				case <-ctx.Done():
					return
				case <-time.After(50*time.Millisecond + time.Duration(rng.Int64N(int64(100*time.Millisecond)))):
				}
				method := "ping"
				if n%2 == 1 {
					method = "tools/list"
				}
				if _, err := s.c.callURL(s.c.url, method, nil); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("%s: %s: %v", s.name, method, err))
					mu.Unlock()
				}
				calls.Add(1)
			}
		})
	}
	return func() {
		t.Helper()
		cancel()
		wg.Wait()
		t.Logf("concurrent requests: %d pings and tools/list calls through the proxy", calls.Load())
		if len(errs) > 0 {
			t.Fatalf("%d concurrent requests failed, first: %s", len(errs), errs[0])
		}
	}
}

// requireUnchanged checks that no session received a list_changed since
// before.
func (d *pushDedupRun) requireUnchanged(t *testing.T, what string, before map[string]map[string]int) {
	t.Helper()
	for _, s := range d.sessions {
		if got, want := s.counts(), before[s.name]; !pushCountsEqual(got, want) {
			t.Errorf("%s: %s: list_changed counts went from %v to %v, want no new notification", s.name, what, want, got)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

func pushCountsEqual(a, b map[string]int) bool {
	for _, k := range pushRegistryKinds {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

// TestPushListChanged is the list_changed dedup acceptance test of issue
// 4: three server processes behind the round-robin proxy on one store,
// five sessions each with an open GET stream (through the proxy), and
// registry changes published with sns-ingest.
//
//  1. Four changes per registry kind, each published once every session
//     was told of the previous one: every session receives exactly four
//     list_changed of each kind (no coalescing, no duplicate).
//  2. A session initialized after the last change receives none, in
//     every phase below.
//  3. tools/list, resources/list and prompts/list on every process, for
//     every session, serve the changed registries and cause nothing.
//  4. A process killed and restarted, and every stream reconnected
//     (Last-Event-ID, through the proxy): nothing.
//  5. Registry messages that leave the content, and so the hash,
//     unchanged (a put of the current item, a replace with the current
//     items, each with a new MessageId): nothing.
//  6. A change and its undo in one SNS batch (to a hash other than the
//     notified one, then back to it): 0 notifications when no process
//     saw the intermediate hash, or 2 (there and back) when one did; the
//     test logs which. ("A change back to a notified hash sends nothing"
//     can only be asserted this way end to end: whether a process
//     refreshes its cache between the two records is up to timing.)
//  7. Three changes per kind in one SNS batch, faster than any delivery:
//     every session receives between 1 and 3 list_changed of each kind,
//     and the test logs how many coalesced.
//
// The absence of notifications is checked after an observation window of
// more than two registry refreshes, closed by a marker event (settle).
func TestPushListChanged(t *testing.T) {
	for _, store := range testStores() {
		t.Run(store.Name, func(t *testing.T) { testPushListChanged(t, store) })
	}
}

func testPushListChanged(t *testing.T, store Store) {
	start := time.Now()
	phase := func(name string) func() {
		t0 := time.Now()
		return func() { t.Logf("%-44s %6.2fs", name, time.Since(t0).Seconds()) }
	}
	d := &pushDedupRun{env: startPushEnv(t, store, instances, 0)}
	e := d.env
	defer func() {
		if t.Failed() {
			for _, s := range d.sessions {
				t.Logf("%s (%s): %s", s.name, s.c.session, s.stream.report())
			}
		}
	}()

	done := phase("sessions")
	for i := range 5 {
		d.newSession(t, fmt.Sprintf("session-%d", i))
	}
	done()

	// 1. Four changes per kind, each delivered before the next, with
	// concurrent requests from every session.
	done = phase("4 changes x 3 registries, one at a time")
	stopChatter := d.chatter(t)
	for k := 1; k <= 4; k++ {
		for _, kind := range pushRegistryKinds {
			e.ingest.mustDeliver(t, d.record(pushDedupChange(kind, k)))
			for _, s := range d.sessions {
				method := pushListChanged(kind)
				if !s.stream.waitUntil(pushDeliveryTimeout, func(msgs []pushMessage) bool { return pushCountMethod(msgs, method) >= k }) {
					t.Fatalf("%s: change %d of %s: no list_changed within %v: %s", s.name, k, kind, pushDeliveryTimeout, s.stream.report())
				}
			}
		}
	}
	d.settle(t)
	stopChatter()
	for _, s := range d.sessions {
		if got, want := s.counts(), map[string]int{"tools": 4, "resources": 4, "prompts": 4}; !pushCountsEqual(got, want) {
			t.Errorf("%s: list_changed counts %v after 4 changes of each registry, want %v", s.name, got, want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	done()

	// 2. A fresh session: its baseline is the current hashes.
	fresh := d.newSession(t, "fresh")
	before := d.snapshot()

	// 3. Lists on every process.
	done = phase("lists on every process")
	for i := range e.cluster.Len() {
		url := e.cluster.URL(i)
		for _, s := range d.sessions {
			for range 2 {
				pushRequireListed(t, s, url)
			}
		}
	}
	d.settle(t)
	d.requireUnchanged(t, "after tools/list, resources/list and prompts/list on every process", before)
	done()

	// 4. A process restart, and every stream reconnected.
	done = phase("process restart, streams reconnected")
	if err := e.cluster.Restart(1); err != nil {
		t.Fatal(err)
	}
	e.proxy.CloseIdleConnections()
	for _, s := range d.sessions {
		connects, _ := s.stream.stats()
		s.stream.reconnect()
		if !s.stream.waitConnects(connects+1, pushDeliveryTimeout) {
			t.Fatalf("%s: stream not reconnected within %v: %s", s.name, pushDeliveryTimeout, s.stream.report())
		}
	}
	for _, s := range d.sessions {
		pushRequireListed(t, s, e.cluster.URL(1)) // the restarted process, with a cold cache
	}
	d.settle(t)
	d.requireUnchanged(t, "after a process restart and stream reconnects", before)
	done()

	// 5. Content unchanged, hash unchanged.
	done = phase("messages that keep the hash")
	var same []pushSNSRecord
	for _, kind := range pushRegistryKinds {
		same = append(same,
			d.record(pushRegistryMessage(kind, "put", pushRegistryItem(kind, "A", "v4", false))),
			d.record(pushRegistryMessage(kind, "replace", pushRegistryItem(kind, "A", "v4", false))))
	}
	if sum := e.ingest.mustDeliver(t, same...); sum.Accepted+sum.Duplicates != len(same) {
		t.Fatalf("sns-ingest summary %+v for %d registry messages", sum, len(same))
	}
	d.settle(t)
	d.requireUnchanged(t, "after registry messages that leave the content as it was", before)
	if got := fresh.counts(); !pushCountsEqual(got, map[string]int{}) {
		t.Fatalf("fresh session received list_changed %v, want none", got)
	}
	done()

	// 6. There and back in one batch.
	done = phase("change and undo in one batch")
	before = d.snapshot()
	e.ingest.mustDeliver(t,
		d.record(pushRegistryMessage("tools", "put", pushRegistryItem("tools", "A", "flip", false))),
		d.record(pushRegistryMessage("tools", "put", pushRegistryItem("tools", "A", "v4", false))))
	d.settle(t)
	var flips []int
	for _, s := range d.sessions {
		got := s.counts()
		n := got["tools"] - before[s.name]["tools"]
		flips = append(flips, n)
		if n != 0 && n != 2 {
			t.Errorf("%s: %d tools/list_changed for a change and its undo, want 0 (intermediate hash not seen) or 2 (seen, and the way back)", s.name, n)
		}
		if got["resources"] != before[s.name]["resources"] || got["prompts"] != before[s.name]["prompts"] {
			t.Errorf("%s: resources or prompts list_changed after a tools change: %v -> %v", s.name, before[s.name], got)
		}
	}
	t.Logf("change and undo in one batch: tools/list_changed per session %v (0: the intermediate hash was never seen)", flips)
	if t.Failed() {
		t.FailNow()
	}
	done()

	// 7. Coalescing: three changes per kind in one batch.
	done = phase("3 changes x 3 registries in one batch")
	before = d.snapshot()
	stopChatter = d.chatter(t)
	var burst []pushSNSRecord
	for _, kind := range pushRegistryKinds {
		for v := 1; v <= 3; v++ {
			burst = append(burst, d.record(pushRegistryMessage(kind, "put", pushRegistryItem(kind, "A", fmt.Sprintf("burst%d", v), false))))
		}
	}
	if sum := e.ingest.mustDeliver(t, burst...); sum.Accepted != len(burst) {
		t.Fatalf("sns-ingest summary %+v for %d new registry changes, want all accepted", sum, len(burst))
	}
	for _, s := range d.sessions {
		for _, kind := range pushRegistryKinds {
			method, base := pushListChanged(kind), before[s.name][kind]
			if !s.stream.waitUntil(pushDeliveryTimeout, func(msgs []pushMessage) bool { return pushCountMethod(msgs, method) > base }) {
				t.Fatalf("%s: no %s after a batch of 3 changes within %v: %s", s.name, method, pushDeliveryTimeout, s.stream.report())
			}
		}
	}
	d.settle(t)
	stopChatter()
	for _, kind := range pushRegistryKinds {
		var deltas []int
		coalesced := 0
		for _, s := range d.sessions {
			n := s.counts()[kind] - before[s.name][kind]
			deltas = append(deltas, n)
			coalesced += 3 - n
			if n < 1 || n > 3 {
				t.Errorf("%s: %d %s for 3 changes in one batch, want 1 to 3", s.name, n, pushListChanged(kind))
			}
		}
		t.Logf("coalescing: %s: 3 changes in one batch -> list_changed per session %v (%d of %d notifications coalesced)", kind, deltas, coalesced, 3*len(d.sessions))
	}
	done()

	for _, s := range d.sessions {
		if p := s.stream.problemList(); len(p) > 0 {
			t.Errorf("%s: stream delivery problems: %q", s.name, p)
		}
	}
	connects := 0
	for _, s := range d.sessions {
		n, _ := s.stream.stats()
		connects += n
	}
	t.Logf("done in %.1fs: %d sessions, %d GET connections, %d sync markers, proxy %d requests %v",
		time.Since(start).Seconds(), len(d.sessions), connects, d.markers, e.proxy.Total(), e.proxy.Counts())
}

// pushRequireListed lists tools, resources and prompts for s on url (one
// process) and checks that the dynamic registries are served as the main
// phase left them: events_recent re-described "v4", resource A and
// prompt A present, B gone.
func pushRequireListed(t *testing.T, s *pushDedupSession, url string) {
	t.Helper()
	var tools struct {
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	json.Unmarshal(s.c.callAt(url, "tools/list", nil), &tools)
	var names []string
	desc := ""
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Name == "events_recent" {
			desc = tool.Description
		}
	}
	if desc != "events_recent v4" || !slices.Contains(names, "topics_list") {
		t.Fatalf("%s: tools/list on %s: tools %v, events_recent described %q; want topics_list enabled again and events_recent described %q",
			s.name, url, names, desc, "events_recent v4")
	}
	var resources struct {
		Resources []struct {
			URI string `json:"uri"`
		} `json:"resources"`
	}
	json.Unmarshal(s.c.callAt(url, "resources/list", nil), &resources)
	var uris []string
	for _, r := range resources.Resources {
		uris = append(uris, r.URI)
	}
	if !slices.Contains(uris, "file:///push/A.txt") || slices.Contains(uris, "file:///push/B.txt") {
		t.Fatalf("%s: resources/list on %s: %v, want file:///push/A.txt and not file:///push/B.txt", s.name, url, uris)
	}
	var prompts struct {
		Prompts []struct {
			Name string `json:"name"`
		} `json:"prompts"`
	}
	json.Unmarshal(s.c.callAt(url, "prompts/list", nil), &prompts)
	var pnames []string
	for _, p := range prompts.Prompts {
		pnames = append(pnames, p.Name)
	}
	if !slices.Contains(pnames, "promptA") || slices.Contains(pnames, "promptB") {
		t.Fatalf("%s: prompts/list on %s: %v, want promptA and not promptB", s.name, url, pnames)
	}
}

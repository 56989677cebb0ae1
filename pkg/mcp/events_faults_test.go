package mcp

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// newFaultsRig is newEventsRig's rig with f as the server's EventFaults.
func newFaultsRig(t *testing.T, f *EventFaults, items ...string) *heldRig {
	path := filepath.Join(t.TempDir(), "faults.db")
	st, err := sqlitestore.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := sqlitestore.New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(&Implementation{Name: "events", Version: "1"}, st, &ServerOptions{PollInterval: heldPoll,
		DynamicRegistries: true, Events: true, StateKeys: [][]byte{[]byte("events-faults-key-0123456789abcdef01")},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), EventFaults: f})
	h := NewStreamableHandler(srv, &StreamableOptions{})
	r := &heldRig{t: t, st: st, other: other, srv: srv, h: h}
	t.Cleanup(func() {
		h.Close()
		time.Sleep(time.Second)
		other.Close()
		st.Close()
	})
	r.putTypes(notify.OpPut, "types-1", items...)
	return r
}

// TestEventFaults: the faults of ServerOptions.EventFaults reach the live
// events/stream streams of their event type at once, and only those: an
// upstream error is a notifications/events/error (-32603) on a stream
// that goes on delivering, a gap a second notifications/events/active
// with truncated, and a termination ends the type's streams with
// notifications/events/terminated and the empty result, and every
// stream of the type opened after it; the other type's stream stays
// open throughout.
func TestEventFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &EventFaults{}
		r := newFaultsRig(t, f, `{"name":"order","topic":"orders","delivery":["poll","push"]}`, `{"name":"spare","topic":"spares","delivery":["push"]}`)
		g := r.stream(`"name":"order","cursor":null`, 0)
		spare := r.stream(`"name":"spare","cursor":null`, 0)
		if err := f.Inject("order", FaultUpstreamError); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got := msgs(t, g)
		if len(got) != 2 || got[1].Method != methodEventsError || got[1].Params.Error == nil || got[1].Params.Error.Code != CodeInternalError ||
			string(got[1].Params.Meta) != `{"io.modelcontextprotocol/subscriptionId":"S1"}` || g.ended() {
			t.Fatalf("after an upstream error: %+v (ended %v)", got, g.ended())
		}
		if err := f.Inject("order", FaultGap); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got = msgs(t, g)
		if len(got) != 3 || got[2].Method != methodEventsActive || !got[2].Params.Truncated || got[2].Params.Cursor == nil || g.ended() {
			t.Fatalf("after a gap: %+v", got)
		}
		r.publish("orders", "o-1", `{"id":1}`)
		time.Sleep(heldWithin)
		got = msgs(t, g)
		if last := got[len(got)-1]; last.Method != methodEventsEvent || last.Params.EventID != EventID("order", "o-1") {
			t.Fatalf("an event after the faults: %+v", got)
		}
		if got := msgs(t, spare); len(got) != 1 || spare.ended() {
			t.Fatalf("the other type's stream saw the faults: %+v", got)
		}

		if err := f.Inject("spare", FaultTerminate); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		<-spare.done
		got = msgs(t, spare)
		if n := len(got); n != 3 || got[1].Method != methodEventsTerminated || got[1].Params.Error == nil || got[2].Result["resultType"] != "complete" {
			t.Fatalf("the terminated stream: %+v", got)
		}
		later := r.stream(`"name":"spare","cursor":null`, 0)
		time.Sleep(heldWithin)
		<-later.done
		if got := msgs(t, later); len(got) != 3 || got[0].Method != methodEventsActive || got[1].Method != methodEventsTerminated {
			t.Fatalf("a stream opened after the termination: %+v", got)
		}
		if g.ended() {
			t.Fatal("the order stream ended with the spare type's termination")
		}
		n := len(msgs(t, g))
		if err := f.Inject("order", EventFault(99)); err == nil {
			t.Error("an unknown fault was accepted")
		}
		synctest.Wait()
		if len(msgs(t, g)) != n {
			t.Error("a refused fault reached the stream")
		}
		g.stop()
	})
}

// TestEventFaultsBounded: an EventFaults keeps faults for at most
// MaxFaultTypes event types; the next is refused, one already kept is not.
func TestEventFaultsBounded(t *testing.T) {
	f := &EventFaults{}
	for i := range MaxFaultTypes {
		if err := f.Inject(fmt.Sprintf("type-%d", i), FaultGap); err != nil {
			t.Fatal(i, err)
		}
	}
	if err := f.Inject("one-more", FaultGap); err == nil {
		t.Error("faults for one type more than MaxFaultTypes were accepted")
	}
	if err := f.Inject("type-0", FaultUpstreamError); err != nil {
		t.Errorf("a type already kept: %v", err)
	}
	if err := f.Inject("", FaultGap); err == nil {
		t.Error("no event type was accepted")
	}
}

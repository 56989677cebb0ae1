package mcp_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// TestEventsPollStores: events/list and events/poll on both stores, two
// processes each (DynamoDB on moto): a poll from now, the events since
// on the other process, an idle poll, and a cursor past all that has
// left the log (truncated).
func TestEventsPollStores(t *testing.T) {
	var skew atomic.Int64 // how far the stores' clock is ahead
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	for _, hs := range clockedStores(t, now) {
		t.Run(hs.name, func(t *testing.T) {
			ctx := context.Background()
			var urls []string
			var st mcp.Store
			for range 2 {
				st = hs.open(t)
				srv := mcp.NewServer(&mcp.Implementation{Name: "events", Version: "1"}, st, &mcp.ServerOptions{
					DynamicRegistries: true, Events: true, RegistryRefresh: 20 * time.Millisecond,
					StateKeys: [][]byte{[]byte("events-stores-key-0123456789abcdef01")},
				})
				h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
				ts := httptest.NewServer(h)
				t.Cleanup(func() { ts.Close(); h.Close() })
				urls = append(urls, ts.URL)
			}
			item, _ := json.Marshal(notify.EventItem{Name: "order.created", Topic: "orders-" + hs.name}.WithDefaults())
			if _, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order.created": item}, "m-"+hs.name); err != nil {
				t.Fatal(err)
			}
			if r := rpc2026(t, urls[1], "events/list", ""); r.Error != nil || len(r.Result["events"].([]any)) != 1 {
				t.Fatalf("events/list: %+v", r)
			}
			first := poll(t, urls[0], `"name":"order.created","cursor":null`)
			if first.Error != nil || first.Result.Cursor == nil {
				t.Fatalf("first poll: %+v", first.Error)
			}
			for _, id := range []string{"a", "b"} {
				if _, _, err := st.AppendTopicEvent(ctx, "orders-"+hs.name, id, time.Now(), json.RawMessage(`{"id":"`+id+`"}`)); err != nil {
					t.Fatal(err)
				}
			}
			r := poll(t, urls[1], `"name":"order.created",`+cursorParam(first.Result.Cursor))
			if r.Error != nil || len(r.Result.Events) != 2 || r.Result.Events[1].EventID != mcp.EventID("order.created", "b") || r.Result.Truncated {
				t.Fatalf("poll: %+v %+v", r.Result, r.Error)
			}
			idle := poll(t, urls[0], `"name":"order.created",`+cursorParam(r.Result.Cursor))
			if idle.Error != nil || len(idle.Result.Events) != 0 || idle.Result.Truncated || *idle.Result.Cursor != *r.Result.Cursor {
				t.Fatalf("idle poll: %+v %+v", idle.Result, idle.Error)
			}
			// Eight days later (past notify.DefaultTopicEventTTL) the events have left the log: a poll from
			// before them is truncated, its cursor moved past them.
			skew.Store(int64(8 * 24 * time.Hour))
			defer skew.Store(0)
			late := poll(t, urls[1], `"name":"order.created",`+cursorParam(first.Result.Cursor))
			if late.Error != nil || len(late.Result.Events) != 0 || !late.Result.Truncated || *late.Result.Cursor != *r.Result.Cursor {
				t.Fatalf("poll after the events expired: %+v %+v", late.Result, late.Error)
			}
		})
	}
}

package mcp_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// TestEventsListenOptIn: a 2026 listen stream that opts in with
// eventsListChanged has it acknowledged and gets exactly one
// notifications/events/list_changed per change of the events registry,
// tagged with its subscription id; a stream that does not gets none.
// It is skipped while listen.go does not take the field (the hook named
// in docs/events.md, "Not built yet").
func TestEventsListenOptIn(t *testing.T) {
	c := newCluster(t, 2, eventsOn)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := postListen(t, ctx, c.urls[0], `{"jsonrpc":"2.0","id":"E1","method":"subscriptions/listen","params":{"notifications":{"eventsListChanged":true},`+meta2026(`{}`)+`}}`)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("listen refused: %s", b)
	}
	opted := streamMessages(t, resp)
	first := next(t, opted)
	ack, _ := first["params"].(map[string]any)["notifications"].(map[string]any)
	if first["method"] != "notifications/subscriptions/acknowledged" || ack["eventsListChanged"] != true {
		t.Fatalf("first message %v, want the acknowledgement with eventsListChanged", first)
	}
	plain := listenStreamID(t, ctx, c.urls[1], "T1", `{"toolsListChanged":true}`)
	next(t, plain)
	for n := 1; n <= 2; n++ {
		putEventTypes(t, c.dbPath, notify.OpPut, fmt.Sprintf("m%d", n), fmt.Sprintf(`{"name":"e","description":"v%d"}`, n))
		m := next(t, opted)
		meta, _ := m["params"].(map[string]any)["_meta"].(map[string]any)
		if m["method"] != "notifications/events/list_changed" || meta["io.modelcontextprotocol/subscriptionId"] != "E1" {
			t.Fatalf("change %d: got %v, want events/list_changed tagged E1", n, m)
		}
	}
	select {
	case m := <-opted:
		t.Errorf("a second notification for one change: %v", m)
	case m := <-plain:
		t.Errorf("a stream that did not opt in got %v", m)
	case <-time.After(500 * time.Millisecond):
	}
	_ = mcp.EventsExtension
}

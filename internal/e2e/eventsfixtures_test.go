package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/eventsconformance"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// TestEventsFixtures: the server built with -tags conformance and run
// with MCPUSH_FIXTURES=conformance serves the Events suite's fixtures
// (functions/mcp/fixtures.go): the diagnostic controls in tools/list
// (without authentication, those that need no webhook delivery), its
// event types in events/list, and an event every second on
// conformance.events, which a poll from a cursor finds.
func TestEventsFixtures(t *testing.T) {
	c := StartCluster(t, 1, &ClusterOptions{Env: append(SQLiteStore().Env(t), "MCPUSH_FIXTURES=conformance"), ReadyPath: "/healthz"})
	call := func(method, params string) map[string]any {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` +
			mcp.ProtocolVersion2026 + `","io.modelcontextprotocol/clientCapabilities":{}}` + params + `}}`
		_, b := testutil.PostRead(t, nil, c.URL(0), "", body, "Mcp-Protocol-Version", mcp.ProtocolVersion2026, "Mcp-Method", method)
		var r struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(b, &r); err != nil || r.Result == nil {
			t.Fatalf("%s: %s", method, b)
		}
		return r.Result
	}
	tools, _ := json.Marshal(call("tools/list", "")["tools"])
	for _, name := range []string{eventsconformance.ToolYieldError, eventsconformance.ToolYieldGap, eventsconformance.ToolTerminate,
		eventsconformance.ToolQuota, eventsconformance.ToolRestart, eventsconformance.ToolGeneration} {
		if !strings.Contains(string(tools), `"`+name+`"`) {
			t.Errorf("tools/list has no %s", name)
		}
	}
	if strings.Contains(string(tools), eventsconformance.ToolAllowCallbackOrigin) {
		t.Error("a server without webhook delivery lists allow_callback_origin")
	}
	if list := call("events/list", ""); list["nextCursor"] == nil {
		t.Errorf("events/list is one page: %d types", len(list["events"].([]any)))
	}
	first := call("events/poll", `,"name":"`+eventsconformance.EventsType+`","cursor":null`)
	time.Sleep(2500 * time.Millisecond)
	next := call("events/poll", `,"name":"`+eventsconformance.EventsType+`","cursor":"`+first["cursor"].(string)+`"`)
	if evs, _ := next["events"].([]any); len(evs) < 1 {
		t.Errorf("no event on %s in 2.5 s: %v", eventsconformance.EventsType, next)
	}
}

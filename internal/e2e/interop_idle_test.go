package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// interopIdleWindow is how long the idle test leaves a client idle: past
// the servers' short stream hold, then about seven reconnections at the
// default retry interval (1 s), more than the five reconnections without
// a new event id after which the Go SDK client gives up a stream.
const interopIdleWindow = 8 * time.Second

// TestInteropIdle checks that real clients come back on time after the
// server ends an idle GET stream with "retry:" (SEP-1699), as mcpush does
// so that an idle client costs one short request a second instead of a
// held Lambda invocation (issue 8). Three processes behind the proxy hold
// an idle stream only 300 ms (MCPUSH_STREAM_HOLD); each client — the
// official Go SDK client, mcpush's own Go client (pkg/mcp) and the
// TypeScript SDK 1.x client — subscribes
// to a topic and stays idle for 8 s, during which it must reconnect about
// once a second, every time with Last-Event-ID and answered 200 (counted,
// not timed: at least four times); then an event published on the topic
// must reach it (the delivery time is logged).
func TestInteropIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping interop tests in -short mode")
	}
	e := startInterop(t, "MCPUSH_STREAM_HOLD=300ms")

	t.Run("go-sdk", func(t *testing.T) {
		rec := newInteropRecorder()
		rt := newInteropRoundTripper(rec)
		client := gosdk.NewClient(&gosdk.Implementation{Name: "interop-go-idle", Version: "1.0.0"}, interopClientOptions(rec))
		cs, err := client.Connect(t.Context(), &gosdk.StreamableClientTransport{
			Endpoint:   e.url,
			HTTPClient: &http.Client{Transport: rt},
		}, &gosdk.ClientSessionOptions{ProtocolVersion: interopProtocol}) // the 2025 era's GET stream
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		defer cs.Close()
		if err := cs.Subscribe(t.Context(), &gosdk.SubscribeParams{URI: "events://idle-go"}); err != nil {
			t.Fatal(err)
		}
		e.idle(t, rec, "idle-go")
		// The session goes on.
		if res := interopCall(t, cs, &gosdk.CallToolParams{Name: "session_info"}); res.IsError {
			t.Errorf("session_info after idleness: %+v", res)
		}
	})

	t.Run("mcpush-client", func(t *testing.T) {
		rec := newInteropRecorder()
		client := mcp.NewClient(&mcp.Implementation{Name: "interop-mcpush-idle", Version: "1.0.0"}, &mcp.ClientOptions{
			ProtocolVersion: interopProtocol,
			HTTPClient:      &http.Client{Transport: newInteropRoundTripper(rec)},
		})
		for _, method := range []string{"notifications/message", "notifications/resources/updated"} {
			client.AddNotificationHandler(method, func(_ context.Context, _ *mcp.ClientSession, method string, params json.RawMessage) {
				rec.addNotification(method, params)
			})
		}
		cs, err := client.Connect(t.Context(), e.url)
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		defer cs.Close(context.Background())
		if err := cs.Subscribe(t.Context(), "events://idle-mcpush"); err != nil {
			t.Fatal(err)
		}
		e.idle(t, rec, "idle-mcpush")
	})

	t.Run("typescript-sdk", func(t *testing.T) {
		node, script := requireInteropTS(t)
		rec := newInteropRecorder()
		ts := startInteropTS(t, node, script, e.url, rec)
		t.Logf("TypeScript SDK %s on Node %s", ts.sdkVersion, ts.nodeVersion)
		ts.do(t, "connect", nil, nil)
		ts.do(t, "subscribe", map[string]any{"uri": "events://idle-ts"}, nil)
		e.idle(t, rec, "idle-ts")
		var res interopToolResult
		ts.do(t, "callTool", map[string]any{"name": "session_info"}, &res)
		if res.IsError {
			t.Errorf("session_info after idleness: %+v", res)
		}
	})
}

// idle leaves a subscribed client idle for interopIdleWindow, checks its
// reconnections, then publishes one event on topic and waits for it.
func (e *interopEnv) idle(t *testing.T, rec *interopRecorder, topic string) {
	t.Helper()
	mark := len(rec.all())
	time.Sleep(interopIdleWindow)
	// The client's first GET (without Last-Event-ID) may end within the
	// window too; every other GET is a reconnection.
	var gets []interopObs
	fresh := 0
	for _, o := range interopHTTP(rec.all(), mark) {
		if o.Method != http.MethodGet || o.Gated {
			continue
		}
		if o.Status != http.StatusOK {
			t.Errorf("an idle reconnection: %s; want 200", interopStatus(o))
		}
		if o.LastEventID == "" {
			if fresh++; fresh > 1 {
				t.Errorf("a second GET without Last-Event-ID: %s; a reconnection must resume", interopStatus(o))
			}
			continue
		}
		gets = append(gets, o)
	}
	if len(gets) < 4 {
		t.Errorf("the client reconnected %d times in %v of idleness; want about one a second (at least 4): it does not come back on time after retry:\n%s",
			len(gets), interopIdleWindow, interopDump(rec.all()[mark:], 40))
	}
	if errs := interopErrors(rec.all()[mark:]); len(errs) > 0 {
		t.Errorf("client errors while idle: %q", errs)
	}
	published := time.Now()
	e.publishEvent(t, topic, 1)
	ingested := time.Now()
	interopWaitEvents(t, rec, topic, 1)
	t.Logf("%d reconnections in %v of idleness; the event arrived %v after publishing started (%v after sns-ingest exited)",
		len(gets), interopIdleWindow, time.Since(published).Round(time.Millisecond), time.Since(ingested).Round(time.Millisecond))
}

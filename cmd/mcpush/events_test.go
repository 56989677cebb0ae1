package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// TestEventsCommands: `events list` prints the event types; `events
// poll NAME` from now prints a result with a cursor; `events poll NAME
// region=eu --cursor C` the events after it that match; `--follow` one
// JSON line per event, then the cursor to resume from.
func TestEventsCommands(t *testing.T) {
	ctx := context.Background()
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "cli-test", Version: "1"}, store,
		&mcp.ServerOptions{DynamicRegistries: true, Events: true, EventsPollInterval: 10 * time.Millisecond})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
	item := json.RawMessage(`{"name":"order.created","topic":"orders","description":"An order","delivery":["poll"],"inputSchema":{"type":"object","properties":{"region":{"type":"string"}}},"payloadSchema":{"type":"object"}}`)
	if _, _, err := store.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order.created": item}, "m1"); err != nil {
		t.Fatal(err)
	}

	e, out, errb := testEnv(ts.URL)
	if code := run(ctx, []string{"events", "list"}, e); code != 0 {
		t.Fatalf("events list: exit %d: %s", code, errb)
	}
	if out.String() != "order.created\tpoll\tAn order\n" {
		t.Errorf("events list: %q", out.String())
	}

	for _, proto := range []string{"2025", "2026"} {
		e, out, errb = testEnv(ts.URL)
		if code := run(ctx, []string{"--protocol", proto, "events", "poll", "order.created"}, e); code != 0 {
			t.Fatalf("%s: events poll: exit %d: %s", proto, code, errb)
		}
		var first mcp.PollEventsResult
		if err := json.Unmarshal([]byte(out.String()), &first); err != nil || first.Cursor == nil || len(first.Events) != 0 {
			t.Fatalf("%s: events poll: %q: %v", proto, out.String(), err)
		}
		for i, d := range []string{`{"region":"eu","n":1}`, `{"region":"us","n":2}`, `{"region":"eu","n":3}`} {
			if _, _, err := store.AppendTopicEvent(ctx, "orders", proto+"-m"+string(rune('0'+i)), time.Now(), json.RawMessage(d)); err != nil {
				t.Fatal(err)
			}
		}
		e, out, errb = testEnv(ts.URL)
		if code := run(ctx, []string{"--protocol", proto, "events", "poll", "order.created", "region=eu", "--cursor", *first.Cursor}, e); code != 0 {
			t.Fatalf("%s: events poll region=eu: exit %d: %s", proto, code, errb)
		}
		var res mcp.PollEventsResult
		if err := json.Unmarshal([]byte(out.String()), &res); err != nil || len(res.Events) != 2 || res.Events[0].EventID != mcp.EventID("order.created", proto+"-m0") {
			t.Fatalf("%s: events poll region=eu: %q: %v", proto, out.String(), err)
		}

		fctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		e, out, errb = testEnv(ts.URL)
		code := run(fctx, []string{"--protocol", proto, "events", "poll", "--follow", "order.created", "--cursor", *first.Cursor}, e)
		cancel()
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 3 || !strings.Contains(lines[2], `"n":3`) || !strings.Contains(errb.String(), "cursor: ev1.") {
			t.Errorf("%s: events poll --follow: exit %d, stdout %q, stderr %q", proto, code, out.String(), errb.String())
		}
	}

	e, _, errb = testEnv(ts.URL)
	if code := run(ctx, []string{"events", "poll", "nope"}, e); code != 1 || !strings.Contains(errb.String(), "NotFound") {
		t.Errorf("events poll of an unknown type: exit %d, %q", code, errb.String())
	}
	e, _, errb = testEnv(ts.URL)
	if code := run(ctx, []string{"events", "frob"}, e); code != 2 {
		t.Errorf("events frob: exit %d, %q", code, errb.String())
	}
}

package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// TestEventsStream: `events stream NAME region=eu` (and --arg) prints
// each matching event published through the ingest as one line, --json
// as one JSON object with its cursor, both eras, across the server's
// stream ends (MaxStreamDuration 1 s: the client reconnects from its
// cursor, without a lost or repeated event), and on Ctrl-C exits 130 with
// the cursor to resume from on stderr; `--cursor` replays from it; an
// unknown event type exits 1 with NotFound.
func TestEventsStream(t *testing.T) {
	ctx := context.Background()
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "cli-test", Version: "1"}, store,
		&mcp.ServerOptions{DynamicRegistries: true, Events: true, PollInterval: 20 * time.Millisecond})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, MaxStreamDuration: time.Second, StreamMargin: 100 * time.Millisecond})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
	item := json.RawMessage(`{"name":"order.created","topic":"orders","inputSchema":{"type":"object","properties":{"region":{"type":"string"}}}}`)
	e, _ := notify.DecodeEventItem(item)
	item, _ = json.Marshal(e)
	if _, _, err := store.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order.created": item}, "m1"); err != nil {
		t.Fatal(err)
	}
	publish := func(id, data string) {
		msg := `{"type":"event","topic":"orders","data":` + data + `}`
		sum, err := ingest.New(store, nil).Handle(ctx, events.SNSEvent{Records: []events.SNSEventRecord{{EventVersion: "1.0", EventSource: "aws:sns",
			SNS: events.SNSEntity{Type: "Notification", MessageID: id, TopicArn: "arn:aws:sns:us-east-1:123456789012:t", Timestamp: time.Now(), Message: msg, SignatureVersion: "1"}}}})
		if err != nil || sum.Accepted != 1 {
			t.Fatalf("ingest: %+v %v", sum, err)
		}
	}
	for _, proto := range []string{"2025", "2026"} {
		for _, asJSON := range []bool{false, true} {
			sctx, interrupt := context.WithCancel(ctx)
			env, out, errb := testEnv(ts.URL)
			args := []string{"--protocol", proto, "events", "stream", "order.created", "region=eu"}
			if asJSON {
				args = []string{"--protocol", proto, "events", "stream", "--json", "--arg", "region=eu", "order.created"}
			}
			done := make(chan int)
			go func() { done <- run(sctx, args, env) }()
			time.Sleep(500 * time.Millisecond) // the stream opens from now
			tag := proto + "-" + map[bool]string{false: "text", true: "json"}[asJSON]
			publish(tag+"-1", `{"region":"eu","n":1}`)
			publish(tag+"-2", `{"region":"us","n":2}`)
			time.Sleep(1500 * time.Millisecond) // the server ends the stream at least once
			publish(tag+"-3", `{"region":"eu","n":3}`)
			for deadline := time.Now().Add(10 * time.Second); strings.Count(out.String(), "\n") < 2 && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond)
			interrupt()
			code := <-done
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			ok := len(lines) == 2 && code == 130 && strings.Contains(errb.String(), "cursor: ev1.")
			for i, n := range []string{"1", "3"} {
				if !ok {
					break
				}
				id := mcp.EventID("order.created", tag+"-"+n)
				if asJSON {
					var ev mcp.EventOccurrence
					ok = json.Unmarshal([]byte(lines[i]), &ev) == nil && ev.EventID == id && ev.Cursor != nil && strings.Contains(string(ev.Data), `"n":`+n)
				} else {
					f := strings.Split(lines[i], "\t")
					ok = len(f) == 5 && f[1] == "order.created" && f[2] == id && f[3] == `{"region":"eu","n":`+n+`}` && strings.HasPrefix(f[4], "ev1.")
				}
			}
			if !ok {
				t.Errorf("%s: exit %d, stdout %q, stderr %q", tag, code, out.String(), errb.String())
			}
		}
	}
	// --cursor replays from a cursor (here a poll's).
	res, err := pollFromNow(ctx, ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	publish("replayed", `{"region":"eu","n":4}`)
	sctx, interrupt := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer interrupt()
	env, out, errb := testEnv(ts.URL)
	if code := run(sctx, []string{"events", "stream", "--cursor", *res.Cursor, "order.created"}, env); code != 130 || !strings.Contains(out.String(), mcp.EventID("order.created", "replayed")) {
		t.Errorf("--cursor: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	env, _, errb = testEnv(ts.URL)
	if code := run(ctx, []string{"events", "stream", "nope"}, env); code != 1 || !strings.Contains(errb.String(), "NotFound") {
		t.Errorf("events stream of an unknown type: exit %d, %q", code, errb.String())
	}
}

// pollFromNow polls order.created from now at url.
func pollFromNow(ctx context.Context, url string) (*mcp.PollEventsResult, error) {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{NoStandaloneStream: true}).Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer cs.Close(ctx)
	return cs.PollEvents(ctx, &mcp.PollEventsParams{Name: "order.created"})
}

package eventtools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpush/mcpush/internal/schemacheck"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// TestSchemasPortable: every event tool's input and output schema, as
// tools/list serves them, is portable (internal/schemacheck: Gemini's
// single-type dialect, OpenAI's strict function schemas).
func TestSchemasPortable(t *testing.T) {
	e := setup(t)
	c := mcp.NewClient(&mcp.Implementation{Name: "schemas", Version: "1"}, &mcp.ClientOptions{NoStandaloneStream: true})
	cs, err := c.Connect(context.Background(), e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	tools, err := cs.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) == 0 {
		t.Fatal("no tools listed")
	}
	for _, tl := range tools {
		if p := schemacheck.Input(tl.InputSchema); len(p) > 0 {
			t.Errorf("%s: input schema:\n  %s", tl.Name, strings.Join(p, "\n  "))
		}
		if tl.OutputSchema == nil {
			t.Errorf("%s: no output schema", tl.Name)
		} else if p := schemacheck.Output(tl.OutputSchema); len(p) > 0 {
			t.Errorf("%s: output schema:\n  %s", tl.Name, strings.Join(p, "\n  "))
		}
	}
}

// TestTopicsListedAsResources: resources/list names each known topic as a
// concrete events://<topic> resource (none before any event), paged with
// the server's page size; and an argument given as null is taken as
// absent, as the nullable schema accepted it before.
func TestTopicsListedAsResources(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "resources", Version: "1"}, &mcp.ClientOptions{NoStandaloneStream: true})
	cs, err := c.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if rs, err := cs.ListResources(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("resources/list with no events = %v, %v; want none", rs, err)
	}
	var want []string
	for i := range 150 { // more than one page of 100
		topic := fmt.Sprintf("t%03d", i)
		want = append(want, "events://"+topic)
		if _, _, err := e.store.AppendTopicEvent(ctx, topic, "m"+topic, time.Now(), json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	var first mcp.ListResourcesResult
	if err := cs.Call(ctx, "resources/list", map[string]any{}, &first); err != nil {
		t.Fatal(err)
	}
	if len(first.Resources) != 100 || first.NextCursor == "" {
		t.Errorf("first page: %d resources, cursor %q; want 100 and a cursor", len(first.Resources), first.NextCursor)
	}
	rs, err := cs.ListResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.URI)
		if r.MimeType != "application/json" || r.Name == "" {
			t.Errorf("resource %+v", r)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resources/list (-want +got):\n%s", diff)
	}
	res, err := cs.ReadResource(ctx, "events://t007")
	if err != nil || len(res.Contents) != 1 {
		t.Errorf("reading a listed resource: %v %v", res, err)
	}

	out, isErr, _ := e.call("events_recent", `{"topic":"t001","after":null}`)
	if isErr {
		t.Errorf("events_recent with after null: %s", out)
	}
}

// TestEventsWaitTask: events_wait runs as a task for a 2026-era client
// that supports tasks, on the stock server: the call returns a task, and
// the task's result is the next event.
func TestEventsWaitTask(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "tasks", Version: "1"}, &mcp.ClientOptions{Mode: mcp.ClientMode2026})
	cs, err := c.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	// after 0: the topic is empty, so this is "the next event"; without it
	// the event appended below may land before the task's worker reads
	// the topic's head, and the task would wait for another (3 of 15 runs
	// timed out so).
	res, task, err := cs.StartTool(ctx, "events_wait", map[string]any{"topic": "orders", "after": 0, "timeoutSeconds": 10}, nil)
	if err != nil || task == nil {
		t.Fatalf("events_wait: result %v, task %v, %v; want a task", res, task, err)
	}
	if _, _, err := e.store.AppendTopicEvent(ctx, "orders", "m1", time.Now(), json.RawMessage(`{"id":1}`)); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	res, err = cs.AwaitTask(actx, task.TaskID, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Event struct {
			Sequence int64           `json:"sequence"`
			Data     json.RawMessage `json:"data"`
		} `json:"event"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || out.Event.Sequence != 1 || string(out.Event.Data) != `{"id":1}` {
		t.Errorf("the task's result %s (%v); want event 1", b, err)
	}
}

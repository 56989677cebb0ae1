package eventtools_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

type env struct {
	t     *testing.T
	url   string
	sid   string
	store notify.Store
}

func setup(t *testing.T) *env {
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, nil)
	eventtools.Add(srv, store, &eventtools.Options{PollInterval: 10 * time.Millisecond, MaxWait: 10 * time.Second})
	h := mcp.NewStreamableHandler(srv, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
	e := &env{t: t, url: ts.URL, store: store}
	resp := e.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"tester","version":"9"}}}`)
	resp.Body.Close()
	e.sid = resp.Header.Get("Mcp-Session-Id")
	return e
}

func (e *env) post(body string) *http.Response {
	return testutil.Post(e.t, nil, e.url, e.sid, body)
}

// call runs tools/call and returns the structured result and the
// progress notifications that came before it.
func (e *env) call(name, args string) (structured json.RawMessage, isError bool, progress []float64) {
	e.t.Helper()
	resp := e.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"progressToken":"p"}}}`, name, args))
	defer resp.Body.Close()
	var msgs []mcp.Message
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
				var m mcp.Message
				json.Unmarshal([]byte(d), &m)
				msgs = append(msgs, m)
			}
		}
	} else {
		var m mcp.Message
		json.NewDecoder(resp.Body).Decode(&m)
		msgs = append(msgs, m)
	}
	for _, m := range msgs {
		switch {
		case m.Method == "notifications/progress":
			var p mcp.ProgressParams
			json.Unmarshal(m.Params, &p)
			progress = append(progress, p.Progress)
		case m.IsResponse():
			var r struct {
				StructuredContent json.RawMessage
				IsError           bool
			}
			if m.Error != nil {
				e.t.Fatalf("%s: %v", name, m.Error)
			}
			json.Unmarshal(m.Result, &r)
			return r.StructuredContent, r.IsError, progress
		}
	}
	e.t.Fatalf("%s: no response in %+v", name, msgs)
	return nil, false, nil
}

func TestEventsTools(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	for i := 1; i <= 5; i++ {
		if _, _, err := e.store.AppendTopicEvent(ctx, "orders", fmt.Sprintf("m%d", i), time.Now(), json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	var recent eventtools.EventsOutput
	out, _, _ := e.call("events_recent", `{"topic":"orders","limit":2}`)
	json.Unmarshal(out, &recent)
	var seqs []int64
	for _, ev := range recent.Events {
		seqs = append(seqs, ev.Sequence)
	}
	if diff := cmp.Diff([]int64{4, 5}, seqs); diff != "" {
		t.Errorf("events_recent limit 2 (-want +got):\n%s", diff)
	}
	out, _, _ = e.call("events_recent", `{"topic":"orders","after":1,"limit":2}`)
	json.Unmarshal(out, &recent)
	if len(recent.Events) != 2 || recent.Events[0].Sequence != 2 || recent.LastSequence != 3 {
		t.Errorf("events_recent after 1 = %+v", recent)
	}
	if _, isErr, _ := e.call("events_recent", `{"topic":"orders","limit":1000}`); !isErr {
		t.Error("limit 1000 was accepted")
	}

	var topics eventtools.TopicsListOutput
	out, _, _ = e.call("topics_list", `{}`)
	json.Unmarshal(out, &topics)
	if len(topics.Topics) != 1 || topics.Topics[0].Name != "orders" || topics.Topics[0].LastSequence != 5 {
		t.Errorf("topics_list = %+v", topics)
	}

	// events_wait sees an event published while it waits, and reports
	// progress meanwhile.
	go func() {
		time.Sleep(1200 * time.Millisecond)
		e.store.AppendTopicEvent(ctx, "orders", "m6", time.Now(), json.RawMessage(`"six"`))
	}()
	var waited eventtools.EventsWaitOutput
	out, _, progress := e.call("events_wait", `{"topic":"orders","timeoutSeconds":5}`)
	json.Unmarshal(out, &waited)
	if waited.TimedOut || waited.Event == nil || waited.Event.Sequence != 6 || string(waited.Event.Data) != `"six"` {
		t.Errorf("events_wait = %+v", waited)
	}
	if len(progress) < 2 {
		t.Errorf("events_wait reported progress %v, want at least 2 notifications over 1.2 s", progress)
	}
	out, _, _ = e.call("events_wait", `{"topic":"orders","after":6,"timeoutSeconds":0.2}`)
	waited = eventtools.EventsWaitOutput{}
	json.Unmarshal(out, &waited)
	if !waited.TimedOut || waited.Event != nil {
		t.Errorf("events_wait with nothing new = %+v, want timed out", waited)
	}

	// A timeout too large for a time.Duration is refused, not turned into
	// an immediate timeout (issue 12, finding 10).
	for _, secs := range []string{"1e10", "1e300", "3601"} {
		if out, isErr, _ := e.call("events_wait", `{"topic":"orders","after":6,"timeoutSeconds":`+secs+`}`); !isErr {
			t.Errorf("events_wait timeoutSeconds %s = %s, want an error result", secs, out)
		}
	}

	var info eventtools.SessionInfoOutput
	out, _, _ = e.call("session_info", `{}`)
	json.Unmarshal(out, &info)
	if info.SessionID != e.sid || info.ClientName != "tester" || info.ProtocolVersion != "2025-11-25" {
		t.Errorf("session_info = %+v", info)
	}

	resp := e.post(`{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"events://orders"}}`)
	defer resp.Body.Close()
	var m struct {
		Result mcp.ReadResourceResult
	}
	json.NewDecoder(resp.Body).Decode(&m)
	if len(m.Result.Contents) != 1 || !strings.Contains(m.Result.Contents[0].Text, `"sequence":6`) {
		t.Errorf("events://orders = %+v", m.Result)
	}
}

// TestNamesMatchIngest: the SNS ingest accepts registry items for exactly
// the tools this package registers.
func TestNamesMatchIngest(t *testing.T) {
	e := setup(t)
	resp := e.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	defer resp.Body.Close()
	var m struct {
		Result mcp.ListToolsResult
	}
	json.NewDecoder(resp.Body).Decode(&m)
	var names []string
	for _, tool := range m.Result.Tools {
		names = append(names, tool.Name)
	}
	if diff := cmp.Diff(ingest.BuiltinTools, names); diff != "" {
		t.Errorf("ingest.BuiltinTools differs from the registered tools (-ingest +registered):\n%s", diff)
	}
	if diff := cmp.Diff(eventtools.Names, names); diff != "" {
		t.Errorf("eventtools.Names differs from the registered tools (-Names +registered):\n%s", diff)
	}
}

// TestSessionInfoEras: session_info reports the session's times in the
// 2025 era; in the 2026-07-28 era, which has no session, it reports no
// session id and leaves the times out (never 0001-01-01).
func TestSessionInfoEras(t *testing.T) {
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, nil)
	eventtools.Add(srv, store, nil)
	h := mcp.NewStreamableHandler(srv, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close(); store.Close() })

	before := time.Now().Add(-time.Second)
	for _, mode := range []mcp.ClientMode{mcp.ClientMode2025, mcp.ClientMode2026} {
		client := mcp.NewClient(&mcp.Implementation{Name: "eras", Version: "1"}, &mcp.ClientOptions{Mode: mode, NoStandaloneStream: true})
		cs, err := client.Connect(t.Context(), ts.URL)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(t.Context(), "session_info", nil, nil)
		cs.Close(t.Context())
		if err != nil || res.IsError {
			t.Fatalf("mode %v: session_info: %v %+v", mode, err, res)
		}
		raw, _ := res.StructuredContent.(json.RawMessage)
		var fields map[string]json.RawMessage
		var info eventtools.SessionInfoOutput
		if json.Unmarshal(raw, &fields) != nil || json.Unmarshal(raw, &info) != nil {
			t.Fatalf("mode %v: structured content %s", mode, raw)
		}
		_, hasCreated := fields["createdAt"]
		_, hasExpires := fields["expiresAt"]
		if mode == mcp.ClientMode2026 {
			if info.ProtocolVersion != "2026-07-28" || info.SessionID != "" || hasCreated || hasExpires {
				t.Errorf("2026 era: session_info = %s; want protocol 2026-07-28, no session id, no createdAt or expiresAt", raw)
			}
			continue
		}
		if info.SessionID == "" || info.CreatedAt.Before(before) || info.CreatedAt.After(time.Now()) || !info.ExpiresAt.After(info.CreatedAt) {
			t.Errorf("2025 era: session_info = %s; want a session id, createdAt now, expiresAt after it", raw)
		}
	}
}

package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

func dynamic(o *mcp.ServerOptions) {
	o.DynamicRegistries = true
	o.RegistryRefresh = 20 * time.Millisecond
}

// counter reads a session's GET stream on a rotating process and counts
// the list_changed notifications by method.
type counter struct {
	mu  sync.Mutex
	got map[string]int
}

func (c *counter) add(method string) {
	c.mu.Lock()
	c.got[method]++
	c.mu.Unlock()
}

func (c *counter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.got {
		out[k] = v
	}
	return out
}

func openGET(t *testing.T, ctx context.Context, url, sid string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET stream: %d %s", resp.StatusCode, b)
	}
	return resp
}

// TestListChangedExactlyOnce: sessions on three processes, registry
// changes written to the store; every session gets exactly one
// list_changed per change, none when fresh, none after repeated lists.
func TestListChangedExactlyOnce(t *testing.T) {
	c := newCluster(t, 3, dynamic)
	store, err := sqlitestore.New(c.dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A change before any session exists is the sessions' baseline.
	if _, _, err := store.ApplyRegistry(ctx, notify.RegistryPrompts, notify.OpPut, map[string]json.RawMessage{"p0": json.RawMessage(`{"name":"p0"}`)}, "m-0"); err != nil {
		t.Fatal(err)
	}
	const sessions, changes = 4, 3
	counters := make([]*counter, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		sid := initialize(t, c.urls[i%3], "2025-11-25")
		counters[i] = &counter{got: map[string]int{}}
		resp := openGET(t, ctx, c.urls[(i+1)%3], sid)
		wg.Add(1)
		go func(ct *counter) {
			defer wg.Done()
			defer resp.Body.Close()
			readEvents(t, resp.Body, func(e sseEvent) bool {
				var m mcp.Message
				if json.Unmarshal([]byte(e.data), &m) == nil && strings.HasSuffix(m.Method, "list_changed") {
					ct.add(m.Method)
				}
				return false
			})
		}(counters[i])
		// Lists on every process: no notification may follow from them.
		for j := range 3 {
			r := post(t, c.urls[j], sid, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
			r.Body.Close()
		}
	}
	time.Sleep(300 * time.Millisecond)
	for i, ct := range counters {
		if got := ct.snapshot(); len(got) != 0 {
			t.Fatalf("fresh session %d got %v", i, got)
		}
	}
	for n := 1; n <= changes; n++ {
		for _, kind := range []string{notify.RegistryTools, notify.RegistryResources, notify.RegistryPrompts} {
			item := map[string]json.RawMessage{}
			switch kind {
			case notify.RegistryTools:
				item["echo"] = json.RawMessage(fmt.Sprintf(`{"name":"echo","description":"v%d"}`, n))
			case notify.RegistryResources:
				item["test://r"] = json.RawMessage(fmt.Sprintf(`{"uri":"test://r","name":"r","text":"v%d"}`, n))
			case notify.RegistryPrompts:
				item["p"] = json.RawMessage(fmt.Sprintf(`{"name":"p","messages":[{"role":"user","text":"v%d {{x}}"}]}`, n))
			}
			if _, _, err := store.ApplyRegistry(ctx, kind, notify.OpPut, item, fmt.Sprintf("m-%s-%d", kind, n)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(400 * time.Millisecond) // slower than delivery: no coalescing
	}
	want := map[string]int{
		"notifications/tools/list_changed":     changes,
		"notifications/resources/list_changed": changes,
		"notifications/prompts/list_changed":   changes,
	}
	for i, ct := range counters {
		got := ct.snapshot()
		for k, v := range want {
			if got[k] != v {
				t.Errorf("session %d: %s x%d, want %d (all: %v)", i, k, got[k], v, got)
			}
		}
	}

	// The dynamic items are served.
	sid := initialize(t, c.urls[0], "2025-11-25")
	r := post(t, c.urls[1], sid, `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":{"x":"world"}}}`)
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(b), fmt.Sprintf("v%d world", changes)) {
		t.Errorf("prompts/get of a dynamic prompt: %s", b)
	}
	r = post(t, c.urls[2], sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	b, _ = io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(b), fmt.Sprintf(`"description":"v%d"`, changes)) {
		t.Errorf("tools/list does not show the re-described tool: %s", b)
	}
	// Disable the tool: it leaves the list and cannot be called.
	if _, _, err := store.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, map[string]json.RawMessage{"echo": json.RawMessage(`{"name":"echo","enabled":false}`)}, "m-off"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	r = post(t, c.urls[0], sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	b, _ = io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(b), "disabled") {
		t.Errorf("calling a disabled tool: %s", b)
	}
	cancel()
	wg.Wait()
}

// TestRegistryToolsOption: a tools item re-describes or disables any tool
// registered in code, unless ServerOptions.RegistryTools leaves it out.
func TestRegistryToolsOption(t *testing.T) {
	for _, tc := range []struct {
		name          string
		registryTools []string
		wantEcho      string // echo's description after the items
		wantAsk       bool   // ask still listed
	}{
		{"all tools by default", nil, "changed", false},
		{"only echo", []string{"echo"}, "changed", true},
		{"only ask", []string{"ask"}, "echoes", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1, dynamic, func(o *mcp.ServerOptions) { o.RegistryTools = tc.registryTools })
			store, err := sqlitestore.New(c.dbPath, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			items := map[string]json.RawMessage{
				"echo": json.RawMessage(`{"name":"echo","description":"changed"}`),
				"ask":  json.RawMessage(`{"name":"ask","enabled":false}`),
			}
			if _, _, err := store.ApplyRegistry(context.Background(), notify.RegistryTools, notify.OpPut, items, "m-1"); err != nil {
				t.Fatal(err)
			}
			sid := initialize(t, c.urls[0], "2025-11-25")
			r := post(t, c.urls[0], sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			var res struct {
				Result struct{ Tools []mcp.Tool }
			}
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatalf("tools/list: %v: %s", err, b)
			}
			var echo string
			ask := false
			for _, tool := range res.Result.Tools {
				switch tool.Name {
				case "echo":
					echo = tool.Description
				case "ask":
					ask = true
				}
			}
			if echo != tc.wantEcho || ask != tc.wantAsk {
				t.Errorf("echo described %q, ask listed %v; want %q, %v", echo, ask, tc.wantEcho, tc.wantAsk)
			}
		})
	}
}

package mcp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// TestUnaskedInputResponses (issue 20, finding 9): inputResponses the
// handler never used (4 × 20 KB, under keys shaped like the server's own)
// are not copied into the next round's signed state, which stays small
// (they made it exceed 64 KiB: -32603); with a requestState, those its
// round did not ask for are ignored, and the retry completes with the
// answers that were asked for. Answers the handler did use but that are
// too large to carry on are the client's -32602, never -32603.
func TestUnaskedInputResponses(t *testing.T) {
	p := newProc2026(t, filepath.Join(t.TempDir(), "db"), []string{"test-key-0123456789abcdef0123456789"}, nil)
	body := func(id int, extra string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"quiz","arguments":{},%s%s}}`, id, extra, meta2026(`{"elicitation":{}}`))
	}
	answer := func(key string, size int) string {
		return fmt.Sprintf(`%q:{"action":"accept","content":{"a":%q}},`, key, strings.Repeat("j", size))
	}
	responses := func(answers ...string) string {
		return `"inputResponses":{` + strings.TrimSuffix(strings.Join(answers, ""), ",") + `},`
	}
	call := func(b string) *rpcReply {
		t.Helper()
		status, r := call2026(t, p.url, b, headers2026("tools/call", "quiz")...)
		if status != 200 {
			t.Fatalf("HTTP %d %+v", status, r.Error)
		}
		return r
	}
	round := func(b string) (string, string) {
		t.Helper()
		r := call(b)
		if r.Error != nil {
			t.Fatalf("error %+v, want a result", r.Error)
		}
		if r.Result["resultType"] != "input_required" {
			return "", fmt.Sprint(r.Result["content"])
		}
		state, _ := r.Result["requestState"].(string)
		for k := range r.Result["inputRequests"].(map[string]any) {
			return k, state
		}
		t.Fatalf("input_required without input requests: %+v", r.Result)
		return "", ""
	}
	junk := []string{answer("elicitation/create#2", 20<<10), answer("elicitation/create#3", 20<<10), answer("elicitation/create#9", 20<<10), answer("other", 20<<10)}
	// The first request, with unasked answers only.
	k1, s1 := round(body(1, responses(junk...)))
	if k1 != "elicitation/create#1" {
		t.Fatalf("first round asks %q, want elicitation/create#1", k1)
	}
	if len(s1) > 4<<10 {
		t.Errorf("the first round's requestState is %d bytes: the unused answers were copied into it", len(s1))
	}
	// The asked answer with the same four unasked ones: with a state they
	// are ignored, even #2, which the handler asks next.
	k2, s2 := round(body(2, fmt.Sprintf(`"requestState":%q,`, s1)+responses(append(junk, answer(k1, 1))...)))
	if k2 != "elicitation/create#2" {
		t.Fatalf("second round asks %q, want elicitation/create#2 (an answer its round did not ask for was taken)", k2)
	}
	if len(s2) > 4<<10 {
		t.Errorf("the second round's requestState is %d bytes: the unasked answers were copied into it", len(s2))
	}
	if _, text := round(body(3, fmt.Sprintf(`"requestState":%q,`, s2)+responses(answer(k2, 1)))); !strings.Contains(text, "[j j]") {
		t.Fatalf("last round %q, want the complete result with both answers", text)
	}
	// An answer the handler uses, too large to carry on: -32602.
	r := call(body(4, fmt.Sprintf(`"requestState":%q,`, s1)+responses(answer(k1, 70<<10))))
	if r.Error == nil || r.Error.Code != mcp.CodeInvalidParams {
		t.Errorf("an asked answer of 70 KB: %+v %+v, want -32602", r.Error, r.Result)
	}
}

// TestRepeatedMCPHeaders (issue 20, finding 10): a request that repeats
// MCP-Protocol-Version, Mcp-Method or Mcp-Name gets HTTP 400 with
// -32020, in both eras, instead of being served by the first one.
func TestRepeatedMCPHeaders(t *testing.T) {
	p := newProc2026(t, filepath.Join(t.TempDir(), "db"), nil, nil)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta2026(`{}`) + `}}`
	echo := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},` + meta2026(`{}`) + `}}`
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, c := range []struct {
		name string
		body string
		hdr  [][2]string
	}{
		{"two MCP-Protocol-Version (2026)", list, [][2]string{{"MCP-Protocol-Version", v2026}, {"MCP-Protocol-Version", "2025-11-25"}, {"Mcp-Method", "tools/list"}}},
		{"two Mcp-Method", list, [][2]string{{"MCP-Protocol-Version", v2026}, {"Mcp-Method", "tools/list"}, {"Mcp-Method", "tools/call"}}},
		{"two Mcp-Name", echo, [][2]string{{"MCP-Protocol-Version", v2026}, {"Mcp-Method", "tools/call"}, {"Mcp-Name", "echo"}, {"Mcp-Name", "echo"}}},
		{"two MCP-Protocol-Version (2025 initialize)", init, [][2]string{{"MCP-Protocol-Version", "2025-11-25"}, {"Mcp-Protocol-Version", "2025-06-18"}}},
	} {
		resp, b := rawCall{body: c.body, hdr: c.hdr}.do(t, p.url)
		var msg struct {
			Error *mcp.Error `json:"error"`
		}
		json.Unmarshal(b, &msg)
		if resp.StatusCode != http.StatusBadRequest || msg.Error == nil || msg.Error.Code != mcp.CodeHeaderMismatch {
			t.Errorf("%s: HTTP %d %s, want 400 with -32020", c.name, resp.StatusCode, b)
		}
		if resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: a session was created", c.name)
		}
	}
	// Once each: served.
	resp, b := rawCall{body: echo, hdr: [][2]string{{"MCP-Protocol-Version", v2026}, {"Mcp-Method", "tools/call"}, {"Mcp-Name", "echo"}}}.do(t, p.url)
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"error"`) {
		t.Errorf("tools/call with each header once: HTTP %d %s", resp.StatusCode, b)
	}
}

// TestReservedURINamespace (issue 20, finding 10): a 2025-era
// resources/subscribe (or unsubscribe) of a URI in the server's reserved
// mcpush- namespace, where listen streams' control subscriptions live,
// gets -32602 and stores no subscription; so does a 2026 listen filter
// naming one.
func TestReservedURINamespace(t *testing.T) {
	c := newCluster(t, 1, func(o *mcp.ServerOptions) { o.DynamicRegistries = true })
	st, err := sqlitestore.New(c.dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := initialize(t, c.urls[0], "2025-11-25")
	for i, uri := range []string{"mcpush-listen:AAAAAAAAAAAAAAAAAAAAAAAA", "mcpush-listen:park:AAAAAAAAAAAAAAAAAAAAAAAA", "MCPUSH-Listen:x", "mcpush-other:x"} {
		for _, method := range []string{"resources/subscribe", "resources/unsubscribe"} {
			resp, b := rawCall{session: id, body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"uri":%q}}`, i, method, uri)}.do(t, c.urls[0])
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"code":-32602`) {
				t.Errorf("%s %s: HTTP %d %s, want -32602", method, uri, resp.StatusCode, b)
			}
		}
	}
	sess, err := st.GetSession(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(sess.Subscriptions) != 0 {
		t.Errorf("the session has subscriptions %q after refused ones", sess.Subscriptions)
	}
	// An ordinary URI is still fine.
	if resp, b := (rawCall{session: id, body: `{"jsonrpc":"2.0","id":9,"method":"resources/subscribe","params":{"uri":"events://fine"}}`}).do(t, c.urls[0]); resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"error"`) {
		t.Errorf("subscribe events://fine: HTTP %d %s", resp.StatusCode, b)
	}
	resp, b := openListen(t, t.Context(), c.urls[0], "R1", `{"resourceSubscriptions":["mcpush-listen:park:x"]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"code":-32602`) {
		t.Errorf("listen on a reserved URI: HTTP %d %s, want -32602", resp.StatusCode, b)
	}
}

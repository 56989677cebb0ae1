package mcp_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnaskedInputResponses (issue 20, finding 9): inputResponses under
// keys the server never asked for (4 × 20 KB) are ignored: they are not
// copied into the next round's signed state (which stays small, where
// they made it exceed 64 KiB: -32603), and the retry completes with the
// answer that was asked for.
func TestUnaskedInputResponses(t *testing.T) {
	p := newStatelessProc(t, filepath.Join(t.TempDir(), "db"), []string{"test-key-0123456789abcdef0123456789"}, nil)
	body := func(id int, extra string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"quiz","arguments":{},%s%s}}`, id, extra, meta2026(`{"elicitation":{}}`))
	}
	junk := func(keys ...string) string {
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, `%q:{"action":"accept","content":{"a":%q}},`, k, strings.Repeat("j", 20<<10))
		}
		return b.String()
	}
	round := func(b string) (string, string) {
		t.Helper()
		status, r := call2026(t, p.url, b, headers2026("tools/call", "quiz")...)
		if status != 200 || r.Error != nil {
			t.Fatalf("HTTP %d %+v, want a result", status, r.Error)
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
	// Unasked answers on the first request (no state: nothing was asked),
	// under keys shaped like the server's own.
	k1, s1 := round(body(1, `"inputResponses":{`+strings.TrimSuffix(junk("elicitation/create#1", "elicitation/create#2", "elicitation/create#3", "x"), ",")+`},`))
	if k1 != "elicitation/create#1" {
		t.Fatalf("first round asks %q, want elicitation/create#1: the unasked answer was taken", k1)
	}
	// The asked answer, with four unasked ones of 20 KB.
	k2, s2 := round(body(2, fmt.Sprintf(`"requestState":%q,"inputResponses":{%s%q:{"action":"accept","content":{"a":"x"}}},`, s1,
		junk("elicitation/create#2", "elicitation/create#3", "elicitation/create#9", "other"), k1)))
	if k2 != "elicitation/create#2" {
		t.Fatalf("second round asks %q, want elicitation/create#2", k2)
	}
	if len(s2) > 4<<10 {
		t.Errorf("the second round's requestState is %d bytes: the unasked answers were copied into it", len(s2))
	}
	_, text := round(body(3, fmt.Sprintf(`"requestState":%q,"inputResponses":{%q:{"action":"accept","content":{"a":"y"}}},`, s2, k2)))
	if !strings.Contains(text, "[x y]") {
		t.Fatalf("last round %q, want the complete result with both answers", text)
	}
}

package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeMessages(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantKinds []string // "request", "notification", "response"
		wantBatch bool
		wantCode  int // 0: no error
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{"request"}, false, 0},
		{"string id", `{"jsonrpc":"2.0","id":"a","method":"ping","params":{}}`, []string{"request"}, false, 0},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, []string{"notification"}, false, 0},
		{"response", `{"jsonrpc":"2.0","id":"s1","result":{}}`, []string{"response"}, false, 0},
		{"error response", `{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}`, []string{"response"}, false, 0},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"}]`, []string{"request", "notification"}, true, 0},
		{"empty body", ``, nil, false, CodeParseError},
		{"malformed", `{"jsonrpc":"2.0",`, nil, false, CodeParseError},
		{"not an object", `42`, nil, false, CodeInvalidRequest},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, nil, false, CodeInvalidRequest},
		{"missing version", `{"id":1,"method":"ping"}`, nil, false, CodeInvalidRequest},
		{"null request id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, nil, false, CodeInvalidRequest},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, nil, false, CodeInvalidRequest},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, nil, false, CodeInvalidRequest},
		{"empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, nil, false, CodeInvalidRequest},
		{"scalar params", `{"jsonrpc":"2.0","id":1,"method":"ping","params":3}`, nil, false, CodeInvalidRequest},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, nil, false, CodeInvalidRequest},
		{"neither", `{"jsonrpc":"2.0"}`, nil, false, CodeInvalidRequest},
		{"empty batch", `[]`, nil, true, CodeInvalidRequest},
		{"bad batch member", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0"}]`, nil, true, CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, batch, err := DecodeMessages([]byte(tt.body))
			if tt.wantCode != 0 {
				if err == nil || err.Code != tt.wantCode {
					t.Fatalf("DecodeMessages(%q) error = %v, want code %d", tt.body, err, tt.wantCode)
				}
				if err.Message == "" {
					t.Error("error has no message")
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeMessages(%q): %v", tt.body, err)
			}
			if batch != tt.wantBatch {
				t.Errorf("batch = %v, want %v", batch, tt.wantBatch)
			}
			var kinds []string
			for _, m := range msgs {
				switch {
				case m.IsRequest():
					kinds = append(kinds, "request")
				case m.IsNotification():
					kinds = append(kinds, "notification")
				case m.IsResponse():
					kinds = append(kinds, "response")
				}
			}
			if diff := cmp.Diff(tt.wantKinds, kinds); diff != "" {
				t.Errorf("kinds (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCanonicalID(t *testing.T) {
	if canonicalID(json.RawMessage(`1`)) != canonicalID(json.RawMessage(`1.0`)) {
		t.Error("1 and 1.0 should be the same id")
	}
	if canonicalID(json.RawMessage(`1`)) == canonicalID(json.RawMessage(`"1"`)) {
		t.Error(`1 and "1" must be different ids`)
	}
}

func TestEventID(t *testing.T) {
	for _, id := range []string{"g.0", "g.17", "aB-_9.3"} {
		stream, seq, ok := parseEventID(id)
		if !ok || eventID(stream, seq) != id {
			t.Errorf("parseEventID(%q) = %q, %d, %v; does not round-trip", id, stream, seq, ok)
		}
	}
	for _, bad := range []string{"", "g", ".3", "g.", "g.-1", "g.x", "a b.1", "g.1.2x", strings.Repeat("s", 4000) + ".1"} {
		if _, _, ok := parseEventID(bad); ok {
			t.Errorf("parseEventID(%q) accepted a malformed id", bad)
		}
	}
}

// FuzzDecodeMessages checks that the decoder never panics, and that what
// it accepts is a well-formed message that re-encodes and decodes to the
// same kinds.
func FuzzDecodeMessages(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"content":[]}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`[[]]`, `null`, `"x"`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, _, err := DecodeMessages(body)
		if err != nil {
			if err.Code != CodeParseError && err.Code != CodeInvalidRequest {
				t.Fatalf("unexpected error code %d", err.Code)
			}
			return
		}
		for _, m := range msgs {
			n := 0
			for _, b := range []bool{m.IsRequest(), m.IsNotification(), m.IsResponse()} {
				if b {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("message %+v is %d kinds at once", m, n)
			}
			b, merr := json.Marshal(m)
			if merr != nil {
				t.Fatalf("re-encoding %+v: %v", m, merr)
			}
			again, _, err := DecodeMessages(b)
			if err != nil || len(again) != 1 || again[0].IsRequest() != m.IsRequest() || again[0].IsResponse() != m.IsResponse() {
				t.Fatalf("re-decoding %s: %v", b, err)
			}
		}
	})
}

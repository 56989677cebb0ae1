package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpush/mcpush/internal/schemacheck"
)

type portableIn struct {
	Topic string   `json:"topic"`
	After *int64   `json:"after,omitempty"`
	Tags  []string `json:"tags"`
}

type portableOut struct {
	Items []string        `json:"items"`
	Next  *portableIn     `json:"next"`
	Data  json.RawMessage `json:"data"`
	Any   any             `json:"any,omitempty"`
	Named map[string]int  `json:"named,omitempty"`
}

// TestInferredSchemasPortable: the schemas AddTool infers from Go types
// with pointers, slices, maps and any-valued fields are portable, and the
// values that were null in the old nullable schemas still pass: a null
// argument is absent (an array: empty), a null array in a result is [],
// a null pointer is left out.
func TestInferredSchemasPortable(t *testing.T) {
	in, inResolved := mustSchema[portableIn]("t", "input", nil)
	out, outResolved := mustSchema[portableOut]("t", "output", nil)
	if p := schemacheck.Input(in); len(p) > 0 {
		t.Errorf("input schema:\n  %s", strings.Join(p, "\n  "))
	}
	if p := schemacheck.Output(out); len(p) > 0 {
		t.Errorf("output schema:\n  %s", strings.Join(p, "\n  "))
	}

	got, err := decodeArguments[portableIn](json.RawMessage(`{"topic":"t","after":null,"tags":null}`), inResolved)
	if err != nil || got.Topic != "t" || got.After != nil || len(got.Tags) != 0 {
		t.Errorf("arguments with nulls: %+v, %v", got, err)
	}
	if _, err := decodeArguments[portableIn](json.RawMessage(`{"topic":"t","after":"x"}`), inResolved); err == nil {
		t.Error("a string after was accepted")
	}

	for _, data := range []string{`null`, `1`, `"s"`, `[[1]]`, `{"a":null}`, `true`} {
		b, _ := json.Marshal(portableOut{Data: json.RawMessage(data)})
		b, err := fitNulls(b, outResolved.Schema())
		if err != nil {
			t.Fatal(err)
		}
		var v any
		json.Unmarshal(b, &v)
		if err := outResolved.Validate(v); err != nil {
			t.Errorf("result with data %s (%s): %v", data, b, err)
		}
		if want := `{"data":` + data + `,"items":[]}`; string(b) != want {
			t.Errorf("result with data %s: %s, want %s", data, b, want)
		}
	}
}

package schemacheck

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		input        bool
		want         string // a substring of the problems; "" for none
	}{
		{"portable input", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"array","items":{"type":"string"}}},"required":["a"],"additionalProperties":false}`, true, ""},
		{"portable output with any value", `{"type":"object","properties":{"data":{"anyOf":[{"type":"object"},{"type":"null"}]}}}`, false, ""},
		{"boolean schema", `{"type":"object","properties":{"data":true}}`, false, "boolean schema"},
		{"type union", `{"type":"object","properties":{"after":{"type":["null","integer"]}},"additionalProperties":false}`, true, "want one type name"},
		{"no type", `{"type":"object","properties":{"x":{}}}`, false, "no type"},
		{"open input object", `{"type":"object","properties":{}}`, true, "additionalProperties"},
		{"bare null", `{"type":"object","properties":{"x":{"type":"null"}}}`, false, "outside an anyOf"},
		{"array without items", `{"type":"object","properties":{"x":{"type":"array"}}}`, false, "without items"},
		{"root not object", `{"type":"string"}`, false, "root"},
		{"oneOf", `{"type":"object","properties":{"x":{"type":"string","oneOf":[{"type":"string"}]}}}`, false, "oneOf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s any
			if err := json.Unmarshal([]byte(tc.schema), &s); err != nil {
				t.Fatal(err)
			}
			problems := check(s, tc.input)
			got := strings.Join(problems, "\n")
			if tc.want == "" && got != "" {
				t.Errorf("problems:\n%s\nwant none", got)
			}
			if tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("problems:\n%s\nwant one with %q", got, tc.want)
			}
		})
	}
}

// Package schemacheck checks that a tool's JSON schemas are portable: that
// the hosts people use accept them as they are. It is a test helper: tests
// walk every registered tool's schemas with Tool.
//
// The rules are the intersection of two dialects stricter than JSON Schema:
//
//   - Gemini's function declarations (an OpenAPI 3 subset): one type per
//     schema, a string, never an array of types; a schema that allows
//     several types says so with anyOf, each branch of one type; no
//     boolean schemas (a bare true or false); no $ref, allOf, oneOf, not,
//     if/then/else or patternProperties; an array names the schema of its
//     items (in a result, the array branch of an anyOf that stands for a
//     value of any JSON type may leave them out: such a value has no
//     finite single-type schema).
//   - OpenAI's strict function schemas, for input schemas: the root is an
//     object (not an anyOf), and every object schema closes itself with
//     "additionalProperties": false (the only boolean allowed, where it is
//     a keyword's value rather than a schema of a value).
//
// A nullable value is expressed by leaving the property out of
// "required" (an optional argument, an absent result field) or, where null
// is itself a value, as an anyOf branch {"type": "null"}, never as
// "type": ["null", "integer"].
package schemacheck

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// types are the JSON Schema type names; "null" only in an anyOf branch.
var types = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

// refused are keywords outside the portable subset.
var refused = []string{"$ref", "$defs", "definitions", "allOf", "oneOf", "not", "if", "then", "else",
	"patternProperties", "dependentSchemas", "prefixItems", "unevaluatedProperties", "unevaluatedItems"}

// Input returns the portability problems of a tool's input schema (empty:
// none). schema is anything that marshals to JSON.
func Input(schema any) []string { return check(schema, true) }

// Output returns the portability problems of a tool's output schema.
func Output(schema any) []string { return check(schema, false) }

func check(schema any, input bool) []string {
	b, err := json.Marshal(schema)
	if err != nil {
		return []string{fmt.Sprintf("cannot encode: %v", err)}
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return []string{fmt.Sprintf("cannot decode: %v", err)}
	}
	c := &checker{input: input}
	m, ok := v.(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("$: the schema is %s, not an object schema", b)}
	}
	if m["type"] != "object" {
		c.addf("$", "the root has type %v, want \"object\"", m["type"])
	}
	c.schema("$", v, false)
	return c.problems
}

type checker struct {
	input    bool
	problems []string
}

func (c *checker) addf(path, format string, args ...any) {
	c.problems = append(c.problems, path+": "+fmt.Sprintf(format, args...))
}

// schema checks the schema v at path; inAnyOf says whether it is a branch
// of an anyOf (where {"type": "null"} is allowed).
func (c *checker) schema(path string, v any, inAnyOf bool) {
	m, ok := v.(map[string]any)
	if !ok {
		b, _ := json.Marshal(v)
		c.addf(path, "a boolean schema (%s); want an object schema with one type", b)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if slices.Contains(refused, k) {
			c.addf(path, "keyword %q is outside the portable subset", k)
		}
	}
	t, hasType := m["type"]
	anyOf, hasAnyOf := m["anyOf"]
	switch {
	case hasType && hasAnyOf:
		c.addf(path, "both type and anyOf")
	case !hasType && !hasAnyOf:
		c.addf(path, "no type (want one type, or an anyOf of typed branches)")
	case hasAnyOf:
		branches, ok := anyOf.([]any)
		if !ok || len(branches) == 0 {
			c.addf(path, "anyOf is not a non-empty array")
		}
		for i, b := range branches {
			c.schema(fmt.Sprintf("%s.anyOf[%d]", path, i), b, true)
		}
		return
	}
	name, ok := t.(string)
	if !ok {
		b, _ := json.Marshal(t)
		c.addf(path, "type is %s; want one type name (a nullable value is an optional property, or an anyOf branch {\"type\":\"null\"})", b)
		// Walk on as the first type other than null, to find the
		// problems below too.
		list, _ := t.([]any)
		for _, v := range list {
			if s, _ := v.(string); s != "null" && s != "" {
				name = s
				break
			}
		}
		inAnyOf = true
	}
	if !slices.Contains(types, name) {
		c.addf(path, "unknown type %q", name)
	}
	if name == "null" && !inAnyOf {
		c.addf(path, "type \"null\" outside an anyOf")
	}
	switch name {
	case "object":
		props, _ := m["properties"].(map[string]any)
		pkeys := make([]string, 0, len(props))
		for k := range props {
			pkeys = append(pkeys, k)
		}
		sort.Strings(pkeys)
		for _, k := range pkeys {
			c.schema(path+".properties."+k, props[k], false)
		}
		if req, ok := m["required"].([]any); ok {
			for _, r := range req {
				if s, _ := r.(string); props == nil || props[s] == nil {
					c.addf(path, "required %v is not a property", r)
				}
			}
		}
		ap, hasAP := m["additionalProperties"]
		switch {
		case hasAP && ap == false:
		case hasAP:
			c.schema(path+".additionalProperties", ap, false)
			if c.input {
				c.addf(path, "an input object must set \"additionalProperties\": false (OpenAI strict)")
			}
		case c.input:
			c.addf(path, "an input object must set \"additionalProperties\": false (OpenAI strict)")
		}
	case "array":
		items, ok := m["items"]
		if !ok && c.input {
			c.addf(path, "an input array without items")
		} else if !ok && !inAnyOf {
			c.addf(path, "an array without items (only an anyOf branch of a value of any type may leave them out)")
		} else if ok {
			c.schema(path+".items", items, false)
		}
	}
}

package mcp

import (
	"encoding/json"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// A portable schema is one every host accepts as a tool's schema: an
// object schema (never a boolean schema) with one type, never a list of
// types (Gemini's function declarations take one; OpenAI's strict schemas
// and most validators take either). AddTool makes the schemas it infers
// portable:
//
//   - A Go pointer, slice or map is nullable to jsonschema.For ("type":
//     ["null", T]); here it is of type T, and a nullable property is
//     optional ("null" means absent). In arguments a property given as
//     null is taken as absent; in a structured result a null array
//     becomes [] and any other null property is left out.
//   - json.RawMessage and interface values, which hold any JSON value,
//     are an anyOf of one branch per JSON type (anyValueSchema), not the
//     schema true.

// anyValueSchema is the schema of a value of any JSON type, each type a
// branch of its own.
func anyValueSchema() *jsonschema.Schema {
	s := &jsonschema.Schema{Description: "any JSON value"}
	for _, t := range []string{"object", "array", "string", "number", "boolean", "null"} {
		s.AnyOf = append(s.AnyOf, &jsonschema.Schema{Type: t})
	}
	return s
}

// schemaOptions map types whose Go shape is not their JSON shape:
// json.RawMessage holds any JSON value, not an array of bytes, and so does
// an interface.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): anyValueSchema(),
	reflect.TypeFor[any]():             anyValueSchema(),
}}

// makePortable rewrites an inferred schema in place: a nullable type
// ["null", T] becomes T, and such a property is no longer required unless
// it is an array of a result (output), which a null becomes [] in.
func makePortable(s *jsonschema.Schema, output bool) {
	if s == nil {
		return
	}
	for name, p := range s.Properties {
		if p == nil {
			continue
		}
		if nullable(p) {
			setNotNull(p)
			if !output || p.Type != "array" {
				s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return r == name })
			}
		}
		makePortable(p, output)
	}
	if s.Required != nil && len(s.Required) == 0 {
		s.Required = nil
	}
	if nullable(s) {
		setNotNull(s)
	}
	if s.Items != nil {
		if nullable(s.Items) {
			setNotNull(s.Items)
		}
		makePortable(s.Items, output)
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Not == nil {
		if nullable(ap) {
			setNotNull(ap)
		}
		makePortable(ap, output)
	}
	for _, d := range s.Defs {
		makePortable(d, output)
	}
}

// nullable reports whether s has two types, one of them null.
func nullable(s *jsonschema.Schema) bool {
	return s.Type == "" && len(s.Types) == 2 && slices.Contains(s.Types, "null")
}

func setNotNull(s *jsonschema.Schema) {
	for _, t := range s.Types {
		if t != "null" {
			s.Type = t
		}
	}
	s.Types = nil
}

// dropNulls makes a decoded JSON value fit a portable schema s: a null
// array property becomes [], and a null property that s does not require
// is removed. It reports whether it changed anything.
func dropNulls(v any, s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	changed := false
	switch x := v.(type) {
	case map[string]any:
		for k, pv := range x {
			ps := s.Properties[k]
			if ps == nil && s.AdditionalProperties != nil && s.AdditionalProperties.Not == nil {
				ps = s.AdditionalProperties
			}
			if ps == nil {
				continue
			}
			if pv == nil {
				switch {
				case ps.Type == "array":
					x[k] = []any{}
					changed = true
				case !slices.Contains(s.Required, k) && ps.Type != "":
					delete(x, k)
					changed = true
				}
				continue
			}
			if dropNulls(pv, ps) {
				changed = true
			}
		}
	case []any:
		for _, e := range x {
			if dropNulls(e, s.Items) {
				changed = true
			}
		}
	}
	return changed
}

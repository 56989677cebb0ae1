package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// TypedToolHandler handles a tool whose arguments decode into In and whose
// structured result is Out. Returning a nil *CallToolResult is fine: the
// server builds one from out (structuredContent plus a text copy).
type TypedToolHandler[In, Out any] func(ctx context.Context, req *CallToolRequest, in In) (*CallToolResult, Out, error)

// AddTool registers a typed tool. Unless t sets them, the input schema is
// inferred from In and the output schema from Out (none when Out is any).
// Arguments are validated against the input schema before the handler
// runs; invalid arguments produce an isError result that says what is
// wrong, so the model can correct itself. It panics if a schema cannot be
// inferred or resolved: that is a programming error.
func AddTool[In, Out any](s *Server, t *Tool, h TypedToolHandler[In, Out]) {
	inSchema, inResolved := mustSchema[In](t.Name, "input", t.InputSchema)
	t.InputSchema = inSchema
	var outResolved *jsonschema.Resolved
	if t.OutputSchema != nil || reflect.TypeFor[Out]() != reflect.TypeFor[any]() {
		t.OutputSchema, outResolved = mustSchema[Out](t.Name, "output", t.OutputSchema)
	}
	s.AddTool(t, func(ctx context.Context, req *CallToolRequest) (*CallToolResult, error) {
		in, err := decodeArguments[In](req.Params.Arguments, inResolved)
		if err != nil {
			return errorResult(fmt.Sprintf("invalid arguments for tool %q: %v", t.Name, err)), nil
		}
		res, out, err := h(ctx, req, in)
		if err != nil {
			var rpcErr *Error
			if errors.As(err, &rpcErr) {
				return nil, rpcErr
			}
			var ir *InputRequired
			if errors.As(err, &ir) {
				return nil, err // a 2026-era question for the client
			}
			if ctx.Err() != nil || isInternal(err) {
				return nil, err // cancelled: no tool result either; internal: an error id
			}
			return errorResult(err.Error()), nil
		}
		if res == nil {
			res = &CallToolResult{}
		}
		if outResolved != nil && res.StructuredContent == nil {
			b, err := json.Marshal(out)
			if err != nil {
				return nil, fmt.Errorf("tool %q: encoding structured result: %w", t.Name, err)
			}
			if b, err = fitNulls(b, outResolved.Schema()); err != nil {
				return nil, fmt.Errorf("tool %q: encoding structured result: %w", t.Name, err)
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				return nil, err
			}
			if err := outResolved.Validate(v); err != nil {
				return nil, fmt.Errorf("tool %q: structured result does not match its output schema: %w", t.Name, err)
			}
			res.StructuredContent = json.RawMessage(b)
			if res.Content == nil {
				res.Content = []Content{&TextContent{Text: string(b)}}
			}
		}
		if res.Content == nil {
			res.Content = []Content{}
		}
		return res, nil
	})
}

// fitNulls applies dropNulls to the JSON result b, re-encoding it (with its
// numbers as they were) only when that changed something.
func fitNulls(b []byte, s *jsonschema.Schema) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if !dropNulls(v, s) {
		return b, nil
	}
	return json.Marshal(v)
}

// errorResult is a tool result that reports a tool-level error.
func errorResult(msg string) *CallToolResult {
	return &CallToolResult{IsError: true, Content: []Content{&TextContent{Text: msg}}}
}

func mustSchema[T any](tool, which string, given any) (any, *jsonschema.Resolved) {
	var schema *jsonschema.Schema
	switch g := given.(type) {
	case nil:
		var err error
		schema, err = jsonschema.For[T](schemaOptions)
		if err != nil {
			panic(fmt.Sprintf("mcp: AddTool(%q): inferring %s schema: %v", tool, which, err))
		}
		makePortable(schema, which == "output")
	case *jsonschema.Schema:
		schema = g
	default:
		b, err := json.Marshal(g)
		if err == nil {
			schema = new(jsonschema.Schema)
			err = json.Unmarshal(b, schema)
		}
		if err != nil {
			panic(fmt.Sprintf("mcp: AddTool(%q): %s schema: %v", tool, which, err))
		}
	}
	if schema.Type != "object" {
		panic(fmt.Sprintf("mcp: AddTool(%q): %s schema must have type \"object\", not %q", tool, which, schema.Type))
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: AddTool(%q): resolving %s schema: %v", tool, which, err))
	}
	return schema, resolved
}

// decodeArguments validates raw against the resolved input schema (after
// applying its defaults) and decodes it into In.
func decodeArguments[In any](raw json.RawMessage, resolved *jsonschema.Resolved) (In, error) {
	var in In
	var v any = map[string]any{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &v); err != nil {
			return in, err
		}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return in, fmt.Errorf("arguments must be a JSON object")
	}
	dropNulls(m, resolved.Schema()) // null is absent (see makePortable)
	if err := resolved.ApplyDefaults(&m); err != nil {
		return in, err
	}
	if err := resolved.Validate(m); err != nil {
		return in, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return in, err
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, err
	}
	return in, nil
}

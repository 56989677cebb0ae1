// Package conformance holds the fixtures that the official MCP conformance
// suite (npm @modelcontextprotocol/conformance) expects of a server under
// test: the tools, resources, resource template, prompts and completions
// of the suite's reference "everything server"
// (examples/servers/typescript/everything-server.ts), with the same names,
// schemas, contents and behaviour.
//
// The fixtures are served only when a main asks for them
// (MCPUSH_FIXTURES=conformance), and only test builds of functions/mcp
// (-tags conformance) contain them; they are test scaffolding, not product
// features. They keep no state of their own, so every process sharing a
// store serves them identically.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// Payloads of the reference server.
const (
	// testImageBase64 is a 1x1 red PNG pixel.
	testImageBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	// testAudioBase64 is a minimal WAV file.
	testAudioBase64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

// Register adds the conformance fixtures to s. Call it before serving, on
// every process that serves s's store. Completions are not part of it: set
// Complete as ServerOptions.CompletionHandler when building s.
func Register(s *mcp.Server, store notify.Store) {
	registerTools(s)
	registerResources(s)
	registerPrompts(s)
	register2026(s, store)
	registerTasks(s)
	registerCustomHeaders(s)
}

// Complete answers completion/complete for the fixtures; set it as
// ServerOptions.CompletionHandler. A reference to a prompt or resource
// template that is not a fixture, or to an argument it does not have, is
// an invalid-params error. Values are the known values of the argument
// that start with what the client typed: the fixture resource URIs for
// test_prompt_with_embedded_resource's resourceUri; the other arguments
// are free text and complete to nothing, as in the reference server. It is
// safe for concurrent use.
func Complete(ctx context.Context, req *mcp.ServerRequest[*mcp.CompleteParams]) (*mcp.CompleteResult, error) {
	p := req.Params
	if p == nil || p.Ref == nil {
		return nil, mcp.Errorf(mcp.CodeInvalidParams, "invalid params: completion/complete needs a ref")
	}
	var ref string // the prompt name or template URI
	var args []string
	switch p.Ref.Type {
	case "ref/prompt":
		ref = p.Ref.Name
		var ok bool
		if args, ok = promptArguments[ref]; !ok {
			return nil, mcp.Errorf(mcp.CodeInvalidParams, "invalid params: unknown prompt %q", ref)
		}
	case "ref/resource":
		ref = p.Ref.URI
		if ref != templateURI {
			return nil, mcp.Errorf(mcp.CodeInvalidParams, "invalid params: unknown resource template %q", ref)
		}
		args = []string{"id"}
	default:
		return nil, mcp.Errorf(mcp.CodeInvalidParams, "invalid params: unknown reference type %q (want ref/prompt or ref/resource)", p.Ref.Type)
	}
	if !slices.Contains(args, p.Argument.Name) {
		return nil, mcp.Errorf(mcp.CodeInvalidParams, "invalid params: %q has no argument %q", ref, p.Argument.Name)
	}
	values := []string{}
	if p.Ref.Name == "test_prompt_with_embedded_resource" && p.Argument.Name == "resourceUri" {
		for _, uri := range resourceURIs {
			if strings.HasPrefix(uri, p.Argument.Value) {
				values = append(values, uri)
			}
		}
	}
	return &mcp.CompleteResult{Completion: mcp.Completion{Values: values, Total: len(values)}}, nil
}

// jsonText encodes v the way JavaScript's JSON.stringify does for the
// values the fixtures echo: compact, without escaping <, > and &.
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "null"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

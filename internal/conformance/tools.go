package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// Timing of the tools that report during a call.
const (
	// logStep separates the log messages of test_tool_with_logging, as in
	// the reference server.
	logStep = 50 * time.Millisecond
	// progressStep separates the progress notifications of
	// test_tool_with_progress. The reference server uses 50ms, but
	// mcp.ServerSession.NotifyProgress sends at most one notification per
	// ServerOptions.ProgressInterval (default 100ms) and coalesces the
	// rest: at 50ms the middle value races the throttle's timer and is
	// sometimes replaced by the last, leaving two notifications where the
	// suite wants three. At 100ms each value is sent when reported.
	progressStep = 100 * time.Millisecond
	// reconnectWait is how long test_reconnection runs after closing its
	// stream, as in the reference server.
	reconnectWait = 100 * time.Millisecond
)

// json2020Schema is the input schema of json_schema_2020_12_tool, exactly
// as the reference server lists it (SEP-1613 and SEP-2106): $schema,
// $defs with $anchor, allOf/anyOf, if/then/else and additionalProperties
// must all survive tools/list. It is a function so that no two
// registrations share a map.
func json2020Schema() map[string]any {
	return map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type":    "object",
		"$defs": map[string]any{
			"address": map[string]any{
				"$anchor": "addressDef",
				"type":    "object",
				"properties": map[string]any{
					"street": map[string]any{"type": "string"},
					"city":   map[string]any{"type": "string"},
				},
			},
		},
		"properties": map[string]any{
			"name":          map[string]any{"type": "string"},
			"address":       map[string]any{"$ref": "#/$defs/address"},
			"contactMethod": map[string]any{"type": "string", "enum": []any{"phone", "email"}},
			"phone":         map[string]any{"type": "string"},
			"email":         map[string]any{"type": "string"},
		},
		"allOf": []any{
			map[string]any{"anyOf": []any{
				map[string]any{"required": []any{"phone"}},
				map[string]any{"required": []any{"email"}},
			}},
		},
		"if": map[string]any{
			"properties": map[string]any{"contactMethod": map[string]any{"const": "phone"}},
			"required":   []any{"contactMethod"},
		},
		"then":                 map[string]any{"required": []any{"phone"}},
		"else":                 map[string]any{"required": []any{"email"}},
		"additionalProperties": false,
	}
}

// noArguments is the input schema of a tool without arguments, as the
// reference server lists it.
func noArguments() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{}}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// constant returns a handler that always returns res.
func constant(res func() *mcp.CallToolResult) mcp.ToolHandler {
	return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return res(), nil }
}

// samplingArgs are the arguments of test_sampling.
type samplingArgs struct {
	Prompt string `json:"prompt" jsonschema:"The prompt to send to the LLM"`
}

// elicitationArgs are the arguments of test_elicitation.
type elicitationArgs struct {
	Message string `json:"message" jsonschema:"The message to show the user"`
}

// address is the address argument of json_schema_2020_12_tool.
type address struct {
	Street *string `json:"street,omitempty"`
	City   *string `json:"city,omitempty"`
}

// jsonSchema2020Args are the arguments of json_schema_2020_12_tool, as
// the reference server parses them (unknown members dropped).
type jsonSchema2020Args struct {
	Name    *string  `json:"name,omitempty"`
	Address *address `json:"address,omitempty"`
}

func registerTools(s *mcp.Server) {
	s.AddTool(&mcp.Tool{
		Name:        "test_simple_text",
		Description: "Tests simple text content response",
		InputSchema: noArguments(),
	}, constant(func() *mcp.CallToolResult { return text("This is a simple text response for testing.") }))

	s.AddTool(&mcp.Tool{
		Name:        "test_image_content",
		Description: "Tests image content response",
		InputSchema: noArguments(),
	}, constant(func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: testImageBase64, MimeType: "image/png"}}}
	}))

	s.AddTool(&mcp.Tool{
		Name:        "test_audio_content",
		Description: "Tests audio content response",
		InputSchema: noArguments(),
	}, constant(func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: testAudioBase64, MimeType: "audio/wav"}}}
	}))

	s.AddTool(&mcp.Tool{
		Name:        "test_embedded_resource",
		Description: "Tests embedded resource content response",
		InputSchema: noArguments(),
	}, constant(func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI:      "test://embedded-resource",
			MimeType: "text/plain",
			Text:     "This is an embedded resource content.",
		}}}}
	}))

	s.AddTool(&mcp.Tool{
		Name:        "test_multiple_content_types",
		Description: "Tests response with multiple content types (text, image, resource)",
		InputSchema: noArguments(),
	}, constant(func() *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "Multiple content types test:"},
			&mcp.ImageContent{Data: testImageBase64, MimeType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI:      "test://mixed-content-resource",
				MimeType: "application/json",
				Text:     `{"test":"data","value":123}`,
			}},
		}}
	}))

	s.AddTool(&mcp.Tool{
		Name:        "test_tool_with_logging",
		Description: "Tests tool that emits log messages during execution",
		InputSchema: noArguments(),
	}, toolWithLogging)

	s.AddTool(&mcp.Tool{
		Name:        "test_error_handling",
		Description: "Tests error response handling",
		InputSchema: noArguments(),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		//lint:ignore ST1005 the conformance suite expects this exact text
		return nil, errors.New("This tool intentionally returns an error for testing")
	})

	s.AddTool(&mcp.Tool{
		Name:        "test_tool_with_progress",
		Description: "Tests tool that reports progress notifications",
		InputSchema: noArguments(),
	}, toolWithProgress)

	s.AddTool(&mcp.Tool{
		Name:        "test_reconnection",
		Description: "Tests SSE stream disconnection and client reconnection (SEP-1699). Server will close the stream mid-call and send the result after client reconnects.",
		InputSchema: noArguments(),
	}, reconnection)

	mcp.AddTool(s, &mcp.Tool{
		Name:        "test_sampling",
		Description: "Tests server-initiated sampling (LLM completion request)",
	}, sampling)

	mcp.AddTool(s, &mcp.Tool{
		Name:        "test_elicitation",
		Description: "Tests server-initiated elicitation (user input request)",
	}, elicitation)

	s.AddTool(&mcp.Tool{
		Name:        "test_elicitation_sep1034_defaults",
		Description: "Tests elicitation with default values per SEP-1034",
		InputSchema: noArguments(),
	}, elicitDefaults)

	s.AddTool(&mcp.Tool{
		Name:        "test_elicitation_sep1330_enums",
		Description: "Tests elicitation with enum schema improvements per SEP-1330",
		InputSchema: noArguments(),
	}, elicitEnums)

	// The untyped AddTool lists the schema as given, keyword for keyword;
	// like the reference server, the handler checks only the types of the
	// members it reads, not the schema's conditions.
	s.AddTool(&mcp.Tool{
		Name:        "json_schema_2020_12_tool",
		Description: "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
		InputSchema: json2020Schema(),
	}, jsonSchema2020)
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func toolWithLogging(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	msgs := []string{"Tool execution started", "Tool processing data", "Tool execution completed"}
	for i, msg := range msgs {
		if i > 0 {
			if err := sleep(ctx, logStep); err != nil {
				return nil, err
			}
		}
		if err := req.Session.Log(ctx, "info", "", msg); err != nil {
			return nil, err
		}
	}
	return text("Tool with logging executed successfully"), nil
}

func toolWithProgress(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	for i, p := range []float64{0, 50, 100} {
		if i > 0 {
			if err := sleep(ctx, progressStep); err != nil {
				return nil, err
			}
		}
		req.Session.NotifyProgress(ctx, p, 100, "Completed step "+strconv.Itoa(int(p))+" of 100")
	}
	return text(progressTokenText(req.Params.Meta["progressToken"])), nil
}

// progressTokenText renders a progress token as JavaScript's String does;
// a missing token is 0, as in the reference server.
func progressTokenText(tok any) string {
	switch t := tok.(type) {
	case nil:
		return "0"
	case string:
		return t
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	default:
		return jsonText(t)
	}
}

func reconnection(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	// The client reconnects with Last-Event-ID (after the retry delay) and
	// receives the result from the stream's log, on any process.
	mcp.CloseSSEStream(ctx)
	if err := sleep(ctx, reconnectWait); err != nil {
		return nil, err
	}
	return text("Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure."), nil
}

func sampling(ctx context.Context, req *mcp.CallToolRequest, in samplingArgs) (*mcp.CallToolResult, any, error) {
	res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}},
		MaxTokens: 100,
	})
	if err != nil {
		if ctx.Err() != nil || isInputRequired(err) {
			return nil, nil, err
		}
		return text("Sampling not supported or error: " + err.Error()), nil, nil
	}
	response := "No response"
	var content struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(res.Content, &content) == nil && content.Text != "" {
		response = content.Text
	}
	return text("LLM response: " + response), nil, nil
}

func elicitation(ctx context.Context, req *mcp.CallToolRequest, in elicitationArgs) (*mcp.CallToolResult, any, error) {
	res, err := elicit(ctx, req, &mcp.ElicitParams{
		Message: in.Message,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"response": map[string]any{"type": "string", "description": "User's response"},
			},
			"required": []any{"response"},
		},
	}, "User response")
	return res, nil, err
}

func elicitDefaults(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return elicit(ctx, req, &mcp.ElicitParams{
		Message: "Please review and update the form fields with defaults",
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name":  map[string]any{"type": "string", "description": "User name", "default": "John Doe"},
				"age":   map[string]any{"type": "integer", "description": "User age", "default": 30},
				"score": map[string]any{"type": "number", "description": "User score", "default": 95.5},
				"status": map[string]any{
					"type":        "string",
					"description": "User status",
					"enum":        []any{"active", "inactive", "pending"},
					"default":     "active",
				},
				"verified": map[string]any{"type": "boolean", "description": "Verification status", "default": true},
			},
			"required": []any{},
		},
	}, "Elicitation completed")
}

func elicitEnums(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	titled := func(prefix string, titles ...string) []any {
		out := make([]any, len(titles))
		for i, t := range titles {
			out[i] = map[string]any{"const": prefix + strconv.Itoa(i+1), "title": t}
		}
		return out
	}
	return elicit(ctx, req, &mcp.ElicitParams{
		Message: "Please select options from the enum fields",
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				// Untitled single-select enum.
				"untitledSingle": map[string]any{
					"type":        "string",
					"description": "Select one option",
					"enum":        []any{"option1", "option2", "option3"},
				},
				// Titled single-select enum (oneOf of const/title).
				"titledSingle": map[string]any{
					"type":        "string",
					"description": "Select one option with titles",
					"oneOf":       titled("value", "First Option", "Second Option", "Third Option"),
				},
				// Legacy titled enum (enumNames, deprecated).
				"legacyEnum": map[string]any{
					"type":        "string",
					"description": "Select one option (legacy)",
					"enum":        []any{"opt1", "opt2", "opt3"},
					"enumNames":   []any{"Option One", "Option Two", "Option Three"},
				},
				// Untitled multi-select enum.
				"untitledMulti": map[string]any{
					"type":        "array",
					"description": "Select multiple options",
					"minItems":    1,
					"maxItems":    3,
					"items":       map[string]any{"type": "string", "enum": []any{"option1", "option2", "option3"}},
				},
				// Titled multi-select enum (anyOf of const/title).
				"titledMulti": map[string]any{
					"type":        "array",
					"description": "Select multiple options with titles",
					"minItems":    1,
					"maxItems":    3,
					"items":       map[string]any{"anyOf": titled("value", "First Choice", "Second Choice", "Third Choice")},
				},
			},
			"required": []any{},
		},
	}, "Elicitation completed")
}

// elicit asks the client for input and reports its answer as the
// reference server does: "<label>: action=..., content=...", or, when the
// client cannot or will not answer, a text saying so (not a tool error).
func elicit(ctx context.Context, req *mcp.CallToolRequest, p *mcp.ElicitParams, label string) (*mcp.CallToolResult, error) {
	res, err := req.Session.Elicit(ctx, p)
	if err != nil {
		if ctx.Err() != nil || isInputRequired(err) {
			return nil, err
		}
		return text("Elicitation not supported or error: " + err.Error()), nil
	}
	content := res.Content
	if content == nil {
		content = map[string]any{}
	}
	return text(label + ": action=" + res.Action + ", content=" + jsonText(content)), nil
}

func jsonSchema2020(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args jsonSchema2020Args
	if len(req.Params.Arguments) > 0 {
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, errors.New("invalid arguments for tool json_schema_2020_12_tool: " + err.Error())
		}
	}
	return text("JSON Schema 2020-12 tool called with: " + jsonText(args)), nil
}

// isInputRequired reports whether err asks a 2026-era client for input (a
// multi round-trip request), which the handler must return as is.
func isInputRequired(err error) bool {
	var ir *mcp.InputRequired
	return errors.As(err, &ir)
}

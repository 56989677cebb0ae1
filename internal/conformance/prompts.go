package conformance

import (
	"context"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// promptArguments names the arguments of each fixture prompt; Complete
// consults it.
var promptArguments = map[string][]string{
	"test_simple_prompt":                 nil,
	"test_prompt_with_arguments":         {"arg1", "arg2"},
	"test_prompt_with_embedded_resource": {"resourceUri"},
	"test_prompt_with_image":             nil,
}

// messages returns a prompt result of user messages.
func messages(content ...mcp.Content) *mcp.GetPromptResult {
	res := &mcp.GetPromptResult{}
	for _, c := range content {
		res.Messages = append(res.Messages, &mcp.PromptMessage{Role: "user", Content: c})
	}
	return res
}

func registerPrompts(s *mcp.Server) {
	s.AddPrompt(&mcp.Prompt{
		Name:        "test_simple_prompt",
		Title:       "Simple Test Prompt",
		Description: "A simple prompt without arguments",
	}, func(context.Context, *mcp.ServerRequest[*mcp.GetPromptParams]) (*mcp.GetPromptResult, error) {
		return messages(&mcp.TextContent{Text: "This is a simple prompt for testing."}), nil
	})

	// The server library rejects a prompts/get that lacks a required
	// argument before the handler runs.
	s.AddPrompt(&mcp.Prompt{
		Name:        "test_prompt_with_arguments",
		Title:       "Prompt With Arguments",
		Description: "A prompt with required arguments",
		Arguments: []*mcp.PromptArgument{
			{Name: "arg1", Description: "First test argument", Required: true},
			{Name: "arg2", Description: "Second test argument", Required: true},
		},
	}, func(_ context.Context, req *mcp.ServerRequest[*mcp.GetPromptParams]) (*mcp.GetPromptResult, error) {
		a := req.Params.Arguments
		return messages(&mcp.TextContent{Text: "Prompt with arguments: arg1='" + a["arg1"] + "', arg2='" + a["arg2"] + "'"}), nil
	})

	s.AddPrompt(&mcp.Prompt{
		Name:        "test_prompt_with_embedded_resource",
		Title:       "Prompt With Embedded Resource",
		Description: "A prompt that includes an embedded resource",
		Arguments: []*mcp.PromptArgument{
			{Name: "resourceUri", Description: "URI of the resource to embed", Required: true},
		},
	}, func(_ context.Context, req *mcp.ServerRequest[*mcp.GetPromptParams]) (*mcp.GetPromptResult, error) {
		return messages(
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI:      req.Params.Arguments["resourceUri"],
				MimeType: "text/plain",
				Text:     "Embedded resource content for testing.",
			}},
			&mcp.TextContent{Text: "Please process the embedded resource above."},
		), nil
	})

	s.AddPrompt(&mcp.Prompt{
		Name:        "test_prompt_with_image",
		Title:       "Prompt With Image",
		Description: "A prompt that includes image content",
	}, func(context.Context, *mcp.ServerRequest[*mcp.GetPromptParams]) (*mcp.GetPromptResult, error) {
		return messages(
			&mcp.ImageContent{Data: testImageBase64, MimeType: "image/png"},
			&mcp.TextContent{Text: "Please analyze the image above."},
		), nil
	})
}

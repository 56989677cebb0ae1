package notify

// Registry items: what SNS registry messages carry and the store keeps,
// as JSON, under RegistryPrompts, RegistryResources and RegistryTools.
// Package ingest validates them; the server serves them.

// PromptItem is a prompts registry item: a prompt template. In the text of a
// message, {{arg}} stands for the value of argument arg. Only Name is
// required.
type PromptItem struct {
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	Messages    []PromptMessage  `json:"messages,omitempty"`
}

// PromptArgument is one argument of a PromptItem. Only Name is required;
// names are unique within a prompt.
type PromptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// PromptMessage is one message of a PromptItem. Role is "user" or
// "assistant"; empty means "user".
type PromptMessage struct {
	Role string `json:"role,omitempty"`
	Text string `json:"text,omitempty"`
}

// ResourceItem is a resources registry item: a static resource. URI (an
// absolute URI, not in the events: scheme, which belongs to topic logs)
// and Name are required; Text and Blob (standard base64) exclude each
// other. On delete only URI is required.
type ResourceItem struct {
	URI         string  `json:"uri"`
	Name        string  `json:"name,omitempty"`
	Description string  `json:"description,omitempty"`
	MIMEType    string  `json:"mimeType,omitempty"`
	Text        *string `json:"text,omitempty"`
	Blob        *string `json:"blob,omitempty"`
}

// ToolItem is a tools registry item: it enables, disables or re-describes a
// tool the server registered in code (by default the ingest accepts only
// the event tools: see ingest.Options.Tools and mcp.ServerOptions
// .RegistryTools). Only Name is required; a nil Enabled leaves the tool
// enabled and an empty Description keeps the one given in code.
type ToolItem struct {
	Name        string `json:"name"`
	Enabled     *bool  `json:"enabled,omitempty"`
	Description string `json:"description,omitempty"`
}

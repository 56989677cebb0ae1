package mcp

import (
	"encoding/json"
	"fmt"
)

// Protocol versions of the 2025 era, newest first. An initialize request
// that asks for one of these gets it; any other gets LatestProtocolVersion.
var SupportedProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// LatestProtocolVersion is the newest session-based protocol version.
const LatestProtocolVersion = "2025-11-25"

func supportedVersion(v string) bool {
	for _, s := range SupportedProtocolVersions {
		if s == v {
			return true
		}
	}
	return false
}

// Implementation names a client or server.
type Implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// Meta is the _meta member of params and results.
type Meta map[string]any

// InitializeParams are the params of initialize.
type InitializeParams struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ClientInfo      *Implementation `json:"clientInfo"`
}

// InitializeResult is the result of initialize.
type InitializeResult struct {
	ProtocolVersion string              `json:"protocolVersion"`
	Capabilities    *ServerCapabilities `json:"capabilities"`
	ServerInfo      *Implementation     `json:"serverInfo"`
	Instructions    string              `json:"instructions,omitempty"`
}

// ServerCapabilities are what the server declares at initialize.
type ServerCapabilities struct {
	Completions *struct{}            `json:"completions,omitempty"`
	Logging     *struct{}            `json:"logging,omitempty"`
	Prompts     *ListChangedCap      `json:"prompts,omitempty"`
	Resources   *ResourcesCapability `json:"resources,omitempty"`
	Tools       *ListChangedCap      `json:"tools,omitempty"`
	Extensions  map[string]any       `json:"extensions,omitempty"`
	// Events is ChatGPT's top-level declaration of the Events extension
	// (its "MCP Events" profile); SEP-3415 declares it in Extensions.
	Events *struct{} `json:"events,omitempty"`
}

// ListChangedCap declares a feature and whether list_changed is sent for it.
type ListChangedCap struct {
	ListChanged bool `json:"listChanged,omitempty"`
}

// ResourcesCapability declares resources.
type ResourcesCapability struct {
	Subscribe   bool `json:"subscribe,omitempty"`
	ListChanged bool `json:"listChanged,omitempty"`
}

// ClientCapabilities is the part of the client's capabilities the server
// consults before sending it requests.
type ClientCapabilities struct {
	Sampling    *json.RawMessage `json:"sampling,omitempty"`
	Elicitation *json.RawMessage `json:"elicitation,omitempty"`
	Roots       *json.RawMessage `json:"roots,omitempty"`
}

// requestMeta is the _meta every request may carry.
type requestMeta struct {
	ProgressToken json.RawMessage `json:"progressToken,omitempty"`
}

// paramsMeta extracts _meta from any params object.
type paramsMeta struct {
	Meta *requestMeta `json:"_meta,omitempty"`
}

// Tool describes a tool in tools/list.
type Tool struct {
	Name         string           `json:"name"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	InputSchema  any              `json:"inputSchema"`
	OutputSchema any              `json:"outputSchema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
	Execution    *ToolExecution   `json:"execution,omitempty"` // task support (tasks.go, tasks_engine.go)
	Meta         Meta             `json:"_meta,omitempty"`
}

// ToolAnnotations are hints about a tool's behaviour.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  bool   `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// CallToolParams are the params of tools/call.
type CallToolParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Meta      Meta            `json:"_meta,omitempty"`
}

// CallToolResult is the result of tools/call.
type CallToolResult struct {
	Content           []Content `json:"content"`
	StructuredContent any       `json:"structuredContent,omitempty"`
	IsError           bool      `json:"isError,omitempty"`
	Meta              Meta      `json:"_meta,omitempty"`
}

// Content is one content block: *TextContent, *ImageContent,
// *AudioContent, *ResourceLink or *EmbeddedResource.
type Content interface {
	contentType() string
}

// TextContent is text.
type TextContent struct {
	Text        string       `json:"text"`
	Annotations *Annotations `json:"annotations,omitempty"`
}

// ImageContent is a base64-encoded image.
type ImageContent struct {
	Data        string       `json:"data"`
	MimeType    string       `json:"mimeType"`
	Annotations *Annotations `json:"annotations,omitempty"`
}

// AudioContent is base64-encoded audio.
type AudioContent struct {
	Data        string       `json:"data"`
	MimeType    string       `json:"mimeType"`
	Annotations *Annotations `json:"annotations,omitempty"`
}

// ResourceLink points at a resource the client may read.
type ResourceLink struct {
	URI         string       `json:"uri"`
	Name        string       `json:"name"`
	Title       string       `json:"title,omitempty"`
	Description string       `json:"description,omitempty"`
	MimeType    string       `json:"mimeType,omitempty"`
	Annotations *Annotations `json:"annotations,omitempty"`
}

// EmbeddedResource embeds a resource's contents.
type EmbeddedResource struct {
	Resource    *ResourceContents `json:"resource"`
	Annotations *Annotations      `json:"annotations,omitempty"`
}

// Annotations tell the client how to use a piece of content.
type Annotations struct {
	Audience     []string `json:"audience,omitempty"`
	Priority     *float64 `json:"priority,omitempty"`
	LastModified string   `json:"lastModified,omitempty"`
}

func (*TextContent) contentType() string      { return "text" }
func (*ImageContent) contentType() string     { return "image" }
func (*AudioContent) contentType() string     { return "audio" }
func (*ResourceLink) contentType() string     { return "resource_link" }
func (*EmbeddedResource) contentType() string { return "resource" }

// MarshalJSON adds the "type" member.
func (c *TextContent) MarshalJSON() ([]byte, error) {
	type t TextContent
	return marshalTyped("text", (*t)(c))
}

// MarshalJSON adds the "type" member.
func (c *ImageContent) MarshalJSON() ([]byte, error) {
	type t ImageContent
	return marshalTyped("image", (*t)(c))
}

// MarshalJSON adds the "type" member.
func (c *AudioContent) MarshalJSON() ([]byte, error) {
	type t AudioContent
	return marshalTyped("audio", (*t)(c))
}

// MarshalJSON adds the "type" member.
func (c *ResourceLink) MarshalJSON() ([]byte, error) {
	type t ResourceLink
	return marshalTyped("resource_link", (*t)(c))
}

// MarshalJSON adds the "type" member.
func (c *EmbeddedResource) MarshalJSON() ([]byte, error) {
	type t EmbeddedResource
	return marshalTyped("resource", (*t)(c))
}

func marshalTyped(typ string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != '{' {
		return nil, fmt.Errorf("mcp: content %s did not marshal to an object", typ)
	}
	out := append([]byte(`{"type":`+fmt.Sprintf("%q", typ)), b[1:]...)
	if len(b) > 2 {
		out = append([]byte(`{"type":`+fmt.Sprintf("%q", typ)+","), b[1:]...)
	}
	return out, nil
}

// ResourceContents is the contents of a resource: Text, or Blob (base64).
type ResourceContents struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text"`
	Blob     string `json:"blob,omitempty"`
	Meta     Meta   `json:"_meta,omitempty"`
}

// MarshalJSON writes exactly one of text and blob.
func (rc *ResourceContents) MarshalJSON() ([]byte, error) {
	type text struct {
		URI      string `json:"uri"`
		MimeType string `json:"mimeType,omitempty"`
		Text     string `json:"text"`
		Meta     Meta   `json:"_meta,omitempty"`
	}
	type blob struct {
		URI      string `json:"uri"`
		MimeType string `json:"mimeType,omitempty"`
		Blob     string `json:"blob"`
		Meta     Meta   `json:"_meta,omitempty"`
	}
	if rc.Blob != "" {
		return json.Marshal(blob{rc.URI, rc.MimeType, rc.Blob, rc.Meta})
	}
	return json.Marshal(text{rc.URI, rc.MimeType, rc.Text, rc.Meta})
}

// Resource describes a resource in resources/list.
type Resource struct {
	URI         string       `json:"uri"`
	Name        string       `json:"name"`
	Title       string       `json:"title,omitempty"`
	Description string       `json:"description,omitempty"`
	MimeType    string       `json:"mimeType,omitempty"`
	Size        int64        `json:"size,omitempty"`
	Annotations *Annotations `json:"annotations,omitempty"`
}

// ResourceTemplate describes a family of resources by URI template (RFC 6570 level 1).
type ResourceTemplate struct {
	URITemplate string       `json:"uriTemplate"`
	Name        string       `json:"name"`
	Title       string       `json:"title,omitempty"`
	Description string       `json:"description,omitempty"`
	MimeType    string       `json:"mimeType,omitempty"`
	Annotations *Annotations `json:"annotations,omitempty"`
}

// ReadResourceParams are the params of resources/read.
type ReadResourceParams struct {
	URI string `json:"uri"`
}

// ReadResourceResult is the result of resources/read.
type ReadResourceResult struct {
	Contents []*ResourceContents `json:"contents"`
}

// SubscribeParams are the params of resources/subscribe and unsubscribe.
type SubscribeParams struct {
	URI string `json:"uri"`
}

// Prompt describes a prompt in prompts/list.
type Prompt struct {
	Name        string            `json:"name"`
	Title       string            `json:"title,omitempty"`
	Description string            `json:"description,omitempty"`
	Arguments   []*PromptArgument `json:"arguments,omitempty"`
}

// PromptArgument describes one argument of a prompt.
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// GetPromptParams are the params of prompts/get.
type GetPromptParams struct {
	Name      string            `json:"name"`
	Arguments map[string]string `json:"arguments,omitempty"`
}

// GetPromptResult is the result of prompts/get.
type GetPromptResult struct {
	Description string           `json:"description,omitempty"`
	Messages    []*PromptMessage `json:"messages"`
}

// PromptMessage is one message of a prompt.
type PromptMessage struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// CompleteParams are the params of completion/complete.
type CompleteParams struct {
	Ref      *CompleteReference `json:"ref"`
	Argument struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"argument"`
	Context *struct {
		Arguments map[string]string `json:"arguments,omitempty"`
	} `json:"context,omitempty"`
}

// CompleteReference names the prompt (ref/prompt) or resource template
// (ref/resource) whose argument is being completed.
type CompleteReference struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
	URI  string `json:"uri,omitempty"`
}

// CompleteResult is the result of completion/complete.
type CompleteResult struct {
	Completion Completion `json:"completion"`
}

// Completion holds completion values (at most 100).
type Completion struct {
	Values  []string `json:"values"`
	Total   int      `json:"total,omitempty"`
	HasMore bool     `json:"hasMore,omitempty"`
}

// LoggingLevel is a syslog severity, as MCP names them.
type LoggingLevel string

// Logging levels, least severe first.
var loggingLevels = []LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func levelRank(l LoggingLevel) int {
	for i, v := range loggingLevels {
		if v == l {
			return i
		}
	}
	return -1
}

// SetLevelParams are the params of logging/setLevel.
type SetLevelParams struct {
	Level LoggingLevel `json:"level"`
}

// LoggingMessageParams are the params of notifications/message.
type LoggingMessageParams struct {
	Level  LoggingLevel `json:"level"`
	Logger string       `json:"logger,omitempty"`
	Data   any          `json:"data"`
}

// ProgressParams are the params of notifications/progress.
type ProgressParams struct {
	ProgressToken json.RawMessage `json:"progressToken"`
	Progress      float64         `json:"progress"`
	Total         float64         `json:"total,omitempty"`
	Message       string          `json:"message,omitempty"`
}

// CancelledParams are the params of notifications/cancelled.
type CancelledParams struct {
	RequestID json.RawMessage `json:"requestId"`
	Reason    string          `json:"reason,omitempty"`
}

// listParams are the params of every */list request.
type listParams struct {
	Cursor string `json:"cursor,omitempty"`
}

// ListToolsResult is the result of tools/list.
type ListToolsResult struct {
	Tools      []*Tool `json:"tools"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// ListResourcesResult is the result of resources/list.
type ListResourcesResult struct {
	Resources  []*Resource `json:"resources"`
	NextCursor string      `json:"nextCursor,omitempty"`
}

// ListResourceTemplatesResult is the result of resources/templates/list.
type ListResourceTemplatesResult struct {
	ResourceTemplates []*ResourceTemplate `json:"resourceTemplates"`
	NextCursor        string              `json:"nextCursor,omitempty"`
}

// ListPromptsResult is the result of prompts/list.
type ListPromptsResult struct {
	Prompts    []*Prompt `json:"prompts"`
	NextCursor string    `json:"nextCursor,omitempty"`
}

// ResourceUpdatedParams are the params of notifications/resources/updated.
type ResourceUpdatedParams struct {
	URI string `json:"uri"`
}

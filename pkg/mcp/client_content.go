package mcp

import (
	"encoding/json"
	"fmt"
)

// This file decodes the polymorphic content blocks a client receives. The
// server side only encodes them (protocol.go).

// UnmarshalContent decodes one content block by its "type" member into
// *TextContent, *ImageContent, *AudioContent, *ResourceLink or
// *EmbeddedResource.
func UnmarshalContent(raw json.RawMessage) (Content, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("mcp: content block: %w", err)
	}
	var c Content
	switch head.Type {
	case "text":
		c = new(TextContent)
	case "image":
		c = new(ImageContent)
	case "audio":
		c = new(AudioContent)
	case "resource_link":
		c = new(ResourceLink)
	case "resource":
		c = new(EmbeddedResource)
	default:
		return nil, fmt.Errorf("mcp: unknown content type %q", head.Type)
	}
	if err := json.Unmarshal(raw, c); err != nil {
		return nil, fmt.Errorf("mcp: %s content: %w", head.Type, err)
	}
	return c, nil
}

// The content types' own UnmarshalJSON would recurse through
// marshalTyped's shape; decoding into an alias type avoids that.

// UnmarshalJSON decodes text content (ignoring "type").
func (c *TextContent) UnmarshalJSON(b []byte) error {
	type t TextContent
	return json.Unmarshal(b, (*t)(c))
}

// UnmarshalJSON decodes image content (ignoring "type").
func (c *ImageContent) UnmarshalJSON(b []byte) error {
	type t ImageContent
	return json.Unmarshal(b, (*t)(c))
}

// UnmarshalJSON decodes audio content (ignoring "type").
func (c *AudioContent) UnmarshalJSON(b []byte) error {
	type t AudioContent
	return json.Unmarshal(b, (*t)(c))
}

// UnmarshalJSON decodes a resource link (ignoring "type").
func (c *ResourceLink) UnmarshalJSON(b []byte) error {
	type t ResourceLink
	return json.Unmarshal(b, (*t)(c))
}

// UnmarshalJSON decodes an embedded resource (ignoring "type").
func (c *EmbeddedResource) UnmarshalJSON(b []byte) error {
	type t EmbeddedResource
	return json.Unmarshal(b, (*t)(c))
}

func unmarshalContents(raws []json.RawMessage) ([]Content, error) {
	out := make([]Content, 0, len(raws))
	for _, r := range raws {
		c, err := UnmarshalContent(r)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// UnmarshalJSON decodes a tool result, its content blocks by type.
// StructuredContent stays a json.RawMessage.
func (r *CallToolResult) UnmarshalJSON(b []byte) error {
	var w struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
		IsError           bool              `json:"isError,omitempty"`
		Meta              Meta              `json:"_meta,omitempty"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	content, err := unmarshalContents(w.Content)
	if err != nil {
		return err
	}
	*r = CallToolResult{Content: content, IsError: w.IsError, Meta: w.Meta}
	if len(w.StructuredContent) > 0 && string(w.StructuredContent) != "null" {
		r.StructuredContent = w.StructuredContent
	}
	return nil
}

// UnmarshalJSON decodes a prompt message, its content by type.
func (m *PromptMessage) UnmarshalJSON(b []byte) error {
	role, c, err := unmarshalRoleContent(b)
	if err != nil {
		return err
	}
	*m = PromptMessage{Role: role, Content: c}
	return nil
}

// UnmarshalJSON decodes a sampling message, its content by type.
func (m *SamplingMessage) UnmarshalJSON(b []byte) error {
	role, c, err := unmarshalRoleContent(b)
	if err != nil {
		return err
	}
	*m = SamplingMessage{Role: role, Content: c}
	return nil
}

// unmarshalRoleContent decodes the {"role", "content"} shape that prompt
// and sampling messages share, the content by its type.
func unmarshalRoleContent(b []byte) (string, Content, error) {
	var w struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return "", nil, err
	}
	c, err := UnmarshalContent(w.Content)
	return w.Role, c, err
}

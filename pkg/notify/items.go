package notify

import (
	"encoding/json"
	"slices"
)

// Registry items: what SNS registry messages carry and the store keeps,
// as JSON, under RegistryPrompts, RegistryResources, RegistryTools and
// RegistryEvents. Package ingest validates them; the server serves them.

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
	// Access, if set, restricts the tool to the callers it permits
	// (access.go): tools/list hides it from others, and tools/call
	// answers them as for an unknown tool.
	Access *Access `json:"access,omitempty"`
}

// Delivery modes of an event type (the Events extension, SEP-3415).
const (
	DeliveryPoll    = "poll"    // events/poll
	DeliveryPush    = "push"    // events/stream
	DeliveryWebhook = "webhook" // events/subscribe
)

// DeliveryModes are every delivery mode, in canonical order: an
// EventItem's Delivery is a non-empty subset of them in this order, and
// all of them when the item names none.
var DeliveryModes = []string{DeliveryPoll, DeliveryPush, DeliveryWebhook}

// EventItem is an events registry item: an event type of the Events
// extension. An event of the type is an event published to Topic (an SNS
// event message for that topic). Only Name is required: Topic defaults to
// Name, Delivery to every mode (DeliveryModes), and each schema to
// {"type":"object"}. InputSchema describes a subscription's arguments
// (each argument F: V admits the events whose data is an object with a
// member F equal to V); PayloadSchema describes an event's data. Both are
// JSON Schemas of top-level type "object".
type EventItem struct {
	Name          string          `json:"name"`
	Topic         string          `json:"topic,omitempty"`
	Description   string          `json:"description,omitempty"`
	Delivery      []string        `json:"delivery,omitempty"`
	InputSchema   json.RawMessage `json:"inputSchema,omitempty"`
	PayloadSchema json.RawMessage `json:"payloadSchema,omitempty"`
	// Access, if set, restricts the type, and its topic on every path
	// that reads it, to the callers it permits (access.go).
	Access *Access `json:"access,omitempty"`
}

// ObjectSchema is the default InputSchema and PayloadSchema of an
// EventItem.
var ObjectSchema = json.RawMessage(`{"type":"object"}`)

// WithDefaults returns the item with its defaults filled in: Topic,
// Delivery and both schemas.
func (e EventItem) WithDefaults() EventItem {
	if e.Topic == "" {
		e.Topic = e.Name
	}
	if len(e.Delivery) == 0 {
		e.Delivery = slices.Clone(DeliveryModes)
	}
	if len(e.InputSchema) == 0 {
		e.InputSchema = ObjectSchema
	}
	if len(e.PayloadSchema) == 0 {
		e.PayloadSchema = ObjectSchema
	}
	return e
}

// Supports reports whether the item offers delivery mode m.
func (e *EventItem) Supports(m string) bool { return slices.Contains(e.Delivery, m) }

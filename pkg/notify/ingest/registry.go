package ingest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"slices"
	"strings"

	"github.com/mcpush/mcpush/pkg/notify"
)

// The registry item shapes are defined once, in package notify, for
// ingest (which validates them) and the server (which serves them).
type (
	Prompt         = notify.PromptItem
	PromptArgument = notify.PromptArgument
	PromptMessage  = notify.PromptMessage
	Resource       = notify.ResourceItem
	Tool           = notify.ToolItem
)

// BuiltinTools are the tools a tools registry item may name by default:
// mcpush's event tools (package eventtools registers them under these
// names). A program that registers tools of its own lists them all in
// Options.Tools.
var BuiltinTools = []string{"events_recent", "events_wait", "session_info", "topics_list"}

var (
	registryFields = []string{"type", "registry", "op", "items"}
	promptFields   = []string{"name", "title", "description", "arguments", "messages"}
	argumentFields = []string{"name", "description", "required"}
	messageFields  = []string{"role", "text"}
	resourceFields = []string{"uri", "name", "description", "mimeType", "text", "blob"}
	toolFields     = []string{"name", "enabled", "description", "access"}
)

// parseRegistry parses {"type":"registry","registry":...,"op":...,"items":[...]};
// a tools item may name one of tools.
func parseRegistry(members []member, tools []string) (*Message, error) {
	var (
		kind, op *string
		items    json.RawMessage
		err      error
	)
	for _, m := range members {
		switch m.name {
		case "type":
		case "registry":
			if kind, err = optString(m.value, "registry"); err != nil {
				return nil, err
			}
		case "op":
			if op, err = optString(m.value, "op"); err != nil {
				return nil, err
			}
		case "items":
			items = m.value
		default:
			return nil, unknownField("", m.name, registryFields)
		}
	}
	switch {
	case kind == nil:
		return nil, invalidf("registry", "required")
	case !notify.ValidRegistry(*kind):
		return nil, invalidf("registry", `unknown registry %s (want "tools", "resources", "prompts" or "events")`, quote(*kind))
	case op == nil:
		return nil, invalidf("op", "required")
	}
	switch *op {
	case notify.OpPut, notify.OpDelete, notify.OpReplace:
	default:
		return nil, invalidf("op", `unknown op %s (want "put", "delete" or "replace")`, quote(*op))
	}
	if items == nil || isNull(items) {
		return nil, invalidf("items", "required (an empty array clears the registry with op replace)")
	}
	elems, err := decodeArray(items, "items")
	if err != nil {
		return nil, err
	}
	if len(elems) == 0 && *op != notify.OpReplace {
		return nil, invalidf("items", "empty: op %s needs at least one item", *op)
	}

	var parse func(members []member, path, op string) (key string, item any, err error)
	switch *kind {
	case notify.RegistryPrompts:
		parse = parsePrompt
	case notify.RegistryResources:
		parse = parseResource
	case notify.RegistryEvents:
		parse = parseEventItem
	default:
		parse = func(members []member, path, op string) (string, any, error) {
			return parseTool(members, path, tools)
		}
	}
	out := make(map[string]json.RawMessage, len(elems))
	first := make(map[string]int, len(elems))
	size := 2 // {}
	for i, e := range elems {
		path := index("items", i)
		ms, err := decodeObject(e, path)
		if err != nil {
			return nil, err
		}
		key, item, err := parse(ms, path, *op)
		if err != nil {
			return nil, err
		}
		if j, dup := first[key]; dup {
			return nil, invalidf(path, "duplicate key %s (also items[%d])", quote(key), j)
		}
		first[key] = i
		b, err := marshal(item)
		if err != nil {
			return nil, invalidf(path, "%v", err)
		}
		out[key] = b
		kb, _ := marshal(key)
		size += len(kb) + 1 + len(b) + 1 // "key":item,
		if size > notify.MaxItemBytes {
			return nil, tooLarge("items", fmt.Sprintf("the encoding of items[0] to items[%d]", i), size)
		}
	}
	return &Message{Type: TypeRegistry, Registry: *kind, Op: *op, Items: out}, nil
}

// requireName decodes a required, non-empty name at path.
func requireName(s *string, path string) (string, error) {
	if s == nil {
		return "", invalidf(path, "required")
	}
	if *s == "" {
		return "", invalidf(path, "must not be empty")
	}
	return *s, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// parsePrompt validates a prompts item and returns its name and canonical form.
func parsePrompt(members []member, path, _ string) (string, any, error) {
	var (
		p    Prompt
		name *string
		s    *string
		err  error
	)
	for _, m := range members {
		mp := join(path, m.name)
		switch m.name {
		case "name":
			name, err = optString(m.value, mp)
		case "title":
			s, err = optString(m.value, mp)
			p.Title = deref(s)
		case "description":
			s, err = optString(m.value, mp)
			p.Description = deref(s)
		case "arguments":
			p.Arguments, err = parseArguments(m.value, mp)
		case "messages":
			p.Messages, err = parsePromptMessages(m.value, mp)
		default:
			err = unknownField(path, m.name, promptFields)
		}
		if err != nil {
			return "", nil, err
		}
	}
	if p.Name, err = requireName(name, join(path, "name")); err != nil {
		return "", nil, err
	}
	if len(p.Name) > notify.MaxNameBytes {
		// prompts/get would refuse the name: nobody could get the prompt.
		return "", nil, invalidf(join(path, "name"), "is %d bytes, more than the %d prompts/get accepts", len(p.Name), notify.MaxNameBytes)
	}
	return p.Name, &p, nil
}

// parseArguments validates the arguments of a prompt: null or an array of
// arguments with distinct names.
func parseArguments(raw json.RawMessage, path string) ([]PromptArgument, error) {
	if isNull(raw) {
		return nil, nil
	}
	elems, err := decodeArray(raw, path)
	if err != nil {
		return nil, err
	}
	var (
		args  []PromptArgument
		first = make(map[string]int, len(elems))
	)
	for i, e := range elems {
		a, err := parseArgument(e, index(path, i))
		if err != nil {
			return nil, err
		}
		if j, dup := first[a.Name]; dup {
			return nil, invalidf(index(path, i)+".name", "duplicate argument %s (also arguments[%d])", quote(a.Name), j)
		}
		first[a.Name] = i
		args = append(args, a)
	}
	return args, nil
}

// parsePromptMessages validates the messages of a prompt: null or an array.
func parsePromptMessages(raw json.RawMessage, path string) ([]PromptMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	elems, err := decodeArray(raw, path)
	if err != nil {
		return nil, err
	}
	var msgs []PromptMessage
	for i, e := range elems {
		msg, err := parsePromptMessage(e, index(path, i))
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

func parseArgument(raw json.RawMessage, path string) (PromptArgument, error) {
	var a PromptArgument
	members, err := decodeObject(raw, path)
	if err != nil {
		return a, err
	}
	var name *string
	for _, m := range members {
		mp := join(path, m.name)
		switch m.name {
		case "name":
			name, err = optString(m.value, mp)
		case "description":
			var s *string
			s, err = optString(m.value, mp)
			a.Description = deref(s)
		case "required":
			var b *bool
			b, err = optBool(m.value, mp)
			a.Required = b != nil && *b
		default:
			err = unknownField(path, m.name, argumentFields)
		}
		if err != nil {
			return a, err
		}
	}
	a.Name, err = requireName(name, join(path, "name"))
	return a, err
}

func parsePromptMessage(raw json.RawMessage, path string) (PromptMessage, error) {
	var msg PromptMessage
	members, err := decodeObject(raw, path)
	if err != nil {
		return msg, err
	}
	for _, m := range members {
		mp := join(path, m.name)
		var s *string
		switch m.name {
		case "role":
			if s, err = optString(m.value, mp); err == nil {
				switch msg.Role = deref(s); msg.Role {
				case "", "user", "assistant":
				default:
					err = invalidf(mp, `unknown role %s (want "user" or "assistant")`, quote(msg.Role))
				}
			}
		case "text":
			s, err = optString(m.value, mp)
			msg.Text = deref(s)
		default:
			err = unknownField(path, m.name, messageFields)
		}
		if err != nil {
			return msg, err
		}
	}
	return msg, nil
}

// parseResource validates a resources item and returns its URI and canonical form.
func parseResource(members []member, path, op string) (string, any, error) {
	var (
		r         Resource
		uri, name *string
		err       error
		s         *string
	)
	for _, m := range members {
		mp := join(path, m.name)
		switch m.name {
		case "uri":
			uri, err = optString(m.value, mp)
		case "name":
			name, err = optString(m.value, mp)
		case "description":
			s, err = optString(m.value, mp)
			r.Description = deref(s)
		case "mimeType":
			if s, err = optString(m.value, mp); err == nil && s != nil {
				r.MIMEType = *s
				err = checkMIMEType(*s, mp)
			}
		case "text":
			r.Text, err = optString(m.value, mp)
		case "blob":
			if s, err = optString(m.value, mp); err == nil && s != nil {
				var b []byte
				if b, err = base64.StdEncoding.Strict().DecodeString(*s); err != nil {
					err = invalidf(mp, "not standard base64 (RFC 4648, with padding): %v", err)
				} else {
					canon := base64.StdEncoding.EncodeToString(b)
					r.Blob = &canon
				}
			}
		default:
			err = unknownField(path, m.name, resourceFields)
		}
		if err != nil {
			return "", nil, err
		}
	}
	if r.URI, err = requireName(uri, join(path, "uri")); err != nil {
		return "", nil, err
	}
	if err := checkResourceURI(r.URI, join(path, "uri")); err != nil {
		return "", nil, err
	}
	if op != notify.OpDelete {
		if r.Name, err = requireName(name, join(path, "name")); err != nil {
			return "", nil, err
		}
	} else {
		r.Name = deref(name)
	}
	if r.Text != nil && r.Blob != nil {
		return "", nil, invalidf(path, "has both text and blob (a resource has one or the other)")
	}
	return r.URI, &r, nil
}

// dangerousSchemes are the URI schemes a resource may not have: a client
// that shows a resource's URI as a link would run or render it.
var dangerousSchemes = []string{"javascript", "vbscript", "data", "blob"}

// checkResourceURI refuses a resource URI that is not absolute, or whose
// scheme is reserved (events:, mcpush-*) or dangerous.
func checkResourceURI(uri, path string) error {
	u, err := url.Parse(uri)
	if err != nil {
		return invalidf(path, "%s is not a URI: %v", quote(uri), errors.Unwrap(err))
	}
	if !u.IsAbs() {
		return invalidf(path, "%s is not an absolute URI (want a scheme, as in file:///a.txt or https://example.com/a)", quote(uri))
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme == "events":
		return invalidf(path, "%s: the events: scheme is reserved for topic logs (events://{topic})", quote(uri))
	case strings.HasPrefix(scheme, notify.ReservedSchemePrefix):
		return invalidf(path, "%s: schemes beginning %s are reserved for the server's own subscriptions", quote(uri), notify.ReservedSchemePrefix)
	case slices.Contains(dangerousSchemes, scheme):
		return invalidf(path, "%s: the %s: scheme runs code or carries content where a client may follow a link", quote(uri), scheme)
	}
	return nil
}

func checkMIMEType(v, path string) error {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return invalidf(path, "%s is not a media type: %v", quote(v), err)
	}
	if typ, sub, ok := strings.Cut(mt, "/"); !ok || typ == "" || sub == "" {
		return invalidf(path, "%s is not a media type (want type/subtype, as in text/plain)", quote(v))
	}
	return nil
}

// parseTool validates a tools item naming one of tools and returns its
// name and canonical form.
func parseTool(members []member, path string, tools []string) (string, any, error) {
	var (
		t    Tool
		name *string
		err  error
	)
	for _, m := range members {
		mp := join(path, m.name)
		switch m.name {
		case "name":
			name, err = optString(m.value, mp)
		case "enabled":
			t.Enabled, err = optBool(m.value, mp)
		case "description":
			var s *string
			s, err = optString(m.value, mp)
			t.Description = deref(s)
		case "access":
			t.Access, err = parseAccess(m.value, mp)
		default:
			err = unknownField(path, m.name, toolFields)
		}
		if err != nil {
			return "", nil, err
		}
	}
	if t.Name, err = requireName(name, join(path, "name")); err != nil {
		return "", nil, err
	}
	if !slices.Contains(tools, t.Name) {
		return "", nil, invalidf(join(path, "name"), "unknown tool %s (a registry item may only change these tools: %s)", quote(t.Name), strings.Join(tools, ", "))
	}
	return t.Name, &t, nil
}

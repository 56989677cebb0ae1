package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/mcpush/mcpush/pkg/notify"
)

// The handlers of tools/*, resources/* and prompts/*, which dispatch
// (dispatch.go) calls: listing from the registries (static or dynamic),
// running a tool, reading a resource, getting a prompt.

func (s *Server) listTools(ctx context.Context, raw json.RawMessage) (*ListToolsResult, error) {
	p, err := decodeParams[listParams](raw)
	if err != nil {
		return nil, err
	}
	overlay := s.toolOverlay(ctx)
	s.mu.RLock()
	tools := map[string]*Tool{}
	for name, t := range s.tools {
		if et := effectiveTool(t.tool, overlay[name]); et != nil && s.permitsTool(ctx, ActionToolsList, name, overlay, t) {
			tools[name] = et
		}
	}
	s.mu.RUnlock()
	list, next, err := page(sortedKeys(tools), func(k string) *Tool { return tools[k] }, p.Cursor, s.opts.PageSize)
	if err != nil {
		return nil, err
	}
	return &ListToolsResult{Tools: list, NextCursor: next}, nil
}

func (s *Server) callTool(ctx context.Context, ss *ServerSession, raw json.RawMessage) (*CallToolResult, error) {
	p, err := decodeParams[*CallToolParams](raw)
	if err != nil {
		return nil, err
	}
	if p == nil || p.Name == "" {
		return nil, Errorf(CodeInvalidParams, "invalid params: tools/call needs a tool name")
	}
	if err := checkName("tools/call", p.Name); err != nil {
		return nil, err
	}
	s.mu.RLock()
	t := s.tools[p.Name]
	s.mu.RUnlock()
	overlay := s.toolOverlay(ctx)
	if t == nil || !s.permitsTool(ctx, ActionToolsCall, p.Name, overlay, t) {
		// A forbidden tool is answered as an unknown one.
		return nil, Errorf(CodeInvalidParams, "unknown tool %q", p.Name)
	}
	if effectiveTool(t.tool, overlay[p.Name]) == nil {
		return nil, Errorf(CodeInvalidParams, "tool %q is disabled", p.Name)
	}
	req := &CallToolRequest{Session: ss, Params: p}
	if c := callFrom(ctx); c != nil {
		req.InputResponses, req.State = c.inputResponses, c.state
	}
	res, err := t.handler(ctx, req)
	if err != nil {
		var rpcErr *Error
		var ir *InputRequired
		if errors.As(err, &rpcErr) || errors.As(err, &ir) || ctx.Err() != nil || isInternal(err) {
			return nil, err
		}
		return errorResult(err.Error()), nil
	}
	if res.Content == nil {
		res.Content = []Content{}
	}
	return res, nil
}

func (s *Server) listResources(ctx context.Context, raw json.RawMessage) (*ListResourcesResult, error) {
	p, err := decodeParams[listParams](raw)
	if err != nil {
		return nil, err
	}
	all := map[string]*Resource{}
	for uri, r := range s.dynamicResources(ctx) {
		all[uri] = itemResource(r)
	}
	s.mu.RLock()
	for uri, r := range s.resources { // code wins over the registry
		all[uri] = r.resource
	}
	listers := s.listers
	s.mu.RUnlock()
	for _, l := range listers {
		rs, err := l(ctx)
		if err != nil {
			s.log.WarnContext(ctx, "listing resources", "err", err)
			continue
		}
		for _, r := range rs {
			if r != nil && all[r.URI] == nil {
				all[r.URI] = r
			}
		}
	}
	rs, next, err := page(sortedKeys(all), func(k string) *Resource { return all[k] }, p.Cursor, s.opts.PageSize)
	if err != nil {
		return nil, err
	}
	return &ListResourcesResult{Resources: rs, NextCursor: next}, nil
}

func (s *Server) listTemplates(raw json.RawMessage) (*ListResourceTemplatesResult, error) {
	p, err := decodeParams[listParams](raw)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	ts, next, err := page(sortedKeys(s.templates), func(k string) *ResourceTemplate { return s.templates[k].template }, p.Cursor, s.opts.PageSize)
	if err != nil {
		return nil, err
	}
	return &ListResourceTemplatesResult{ResourceTemplates: ts, NextCursor: next}, nil
}

func (s *Server) readResource(ctx context.Context, ss *ServerSession, raw json.RawMessage) (*ReadResourceResult, error) {
	p, err := decodeParams[*ReadResourceParams](raw)
	if err != nil {
		return nil, err
	}
	if p == nil || p.URI == "" {
		return nil, Errorf(CodeInvalidParams, "invalid params: resources/read needs a uri")
	}
	// Code first, then the dynamic registry, then templates.
	s.mu.RLock()
	var h ResourceHandler
	if r := s.resources[p.URI]; r != nil {
		h = r.handler
	}
	s.mu.RUnlock()
	if h == nil {
		if r := s.dynamicResources(ctx)[p.URI]; r != nil {
			return readItem(r), nil
		}
		s.mu.RLock()
		for _, k := range sortedKeys(s.templates) {
			if t := s.templates[k]; t.match(p.URI) {
				h = t.handler
				break
			}
		}
		s.mu.RUnlock()
	}
	if h == nil {
		return nil, resourceNotFound(p.URI)
	}
	req := &ServerRequest[*ReadResourceParams]{Session: ss, Params: p}
	if c := callFrom(ctx); c != nil {
		req.InputResponses, req.State = c.inputResponses, c.state
	}
	res, err := h(ctx, req)
	if err != nil {
		return nil, err
	}
	if res.Contents == nil {
		res.Contents = []*ResourceContents{}
	}
	return res, nil
}

// resourceNotFound is the error for a resources/read of an unknown URI.
func resourceNotFound(uri string) *Error {
	uri = clipText(uri, MaxErrorMessageBytes/2)
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return &Error{Code: CodeResourceNotFound, Message: "Resource not found: " + uri, Data: data}
}

// ResourceNotFound returns the protocol error a ResourceHandler returns
// for a URI it does not know.
func ResourceNotFound(uri string) error { return resourceNotFound(uri) }

func (s *Server) listPrompts(ctx context.Context, raw json.RawMessage) (*ListPromptsResult, error) {
	p, err := decodeParams[listParams](raw)
	if err != nil {
		return nil, err
	}
	all := map[string]*Prompt{}
	for name, dp := range s.dynamicPrompts(ctx) {
		all[name] = itemPrompt(dp)
	}
	s.mu.RLock()
	for name, sp := range s.prompts { // code wins over the registry
		all[name] = sp.prompt
	}
	s.mu.RUnlock()
	ps, next, err := page(sortedKeys(all), func(k string) *Prompt { return all[k] }, p.Cursor, s.opts.PageSize)
	if err != nil {
		return nil, err
	}
	return &ListPromptsResult{Prompts: ps, NextCursor: next}, nil
}

func (s *Server) getPrompt(ctx context.Context, ss *ServerSession, raw json.RawMessage) (*GetPromptResult, error) {
	p, err := decodeParams[*GetPromptParams](raw)
	if err != nil {
		return nil, err
	}
	if p == nil || p.Name == "" {
		return nil, Errorf(CodeInvalidParams, "invalid params: prompts/get needs a name")
	}
	if err := checkName("prompts/get", p.Name); err != nil {
		return nil, err
	}
	s.mu.RLock()
	sp := s.prompts[p.Name]
	s.mu.RUnlock()
	var dp *notify.PromptItem
	var prompt *Prompt
	switch {
	case sp != nil:
		prompt = sp.prompt
	default:
		if dp = s.dynamicPrompts(ctx)[p.Name]; dp == nil {
			return nil, Errorf(CodeInvalidParams, "unknown prompt %q", p.Name)
		}
		prompt = itemPrompt(dp)
	}
	var missing []string
	for _, a := range prompt.Arguments {
		if _, ok := p.Arguments[a.Name]; a.Required && !ok {
			missing = append(missing, a.Name)
		}
	}
	if len(missing) > 0 {
		return nil, Errorf(CodeInvalidParams, "prompt %q: missing required arguments: %s", p.Name, strings.Join(missing, ", "))
	}
	if err := s.checkPromptArguments(p.Arguments); err != nil {
		return nil, err
	}
	if dp != nil {
		return renderItem(dp, p.Arguments, s.opts.Limits.MaxPromptBytes)
	}
	req := &ServerRequest[*GetPromptParams]{Session: ss, Params: p}
	if c := callFrom(ctx); c != nil {
		req.InputResponses, req.State = c.inputResponses, c.state
	}
	res, err := sp.handler(ctx, req)
	if err != nil {
		return nil, err
	}
	if res.Messages == nil {
		res.Messages = []*PromptMessage{}
	}
	return res, nil
}

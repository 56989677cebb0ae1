package conformance

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// The fixtures of the 2026-07-28 suite: multi round-trip requests
// (input_required results for elicitation, sampling and roots, with signed
// requestState), the diagnostic tools of the server-stateless scenario,
// and the tools that change the tool and prompt lists through the store
// (so that a listen stream on any process sees the change). In a 2025-era
// session the input_required tools answer with a tool error: that era
// asks the client with requests on the stream instead (test_elicitation,
// test_sampling).

func nameSchema(prop string) map[string]any {
	return map[string]any{
		"type":       "object",
		"properties": map[string]any{prop: map[string]any{"type": "string"}},
		"required":   []string{prop},
	}
}

func elicitRequest(message string, schema any) *mcp.InputRequest {
	return &mcp.InputRequest{Method: "elicitation/create", Params: &mcp.ElicitParams{Message: message, RequestedSchema: schema}}
}

func samplingRequest(prompt string, maxTokens int) *mcp.InputRequest {
	return &mcp.InputRequest{Method: "sampling/createMessage", Params: &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: prompt}}},
		MaxTokens: maxTokens,
	}}
}

func rootsRequest() *mcp.InputRequest {
	return &mcp.InputRequest{Method: "roots/list", Params: struct{}{}}
}

// need returns the input requests whose keys have no response yet, or nil
// when every one is answered.
func need(responses map[string]json.RawMessage, reqs map[string]*mcp.InputRequest) map[string]*mcp.InputRequest {
	out := map[string]*mcp.InputRequest{}
	for k, r := range reqs {
		if _, ok := responses[k]; !ok {
			out[k] = r
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// elicited returns content[field] of an accepted elicitation response.
func elicited(raw json.RawMessage, field string) string {
	var r mcp.ElicitResult
	if json.Unmarshal(raw, &r) != nil || r.Action != "accept" {
		return ""
	}
	s, _ := r.Content[field].(string)
	return s
}

// sampled returns the text of a sampling response.
func sampled(raw json.RawMessage) string {
	var r struct {
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(raw, &r)
	return r.Content.Text
}

// rootURIs returns the root URIs of a roots/list response.
func rootURIs(raw json.RawMessage) []string {
	var r mcp.ListRootsResult
	_ = json.Unmarshal(raw, &r)
	var out []string
	for _, root := range r.Roots {
		out = append(out, root.URI)
	}
	return out
}

// only2026 is the tool error of an input_required fixture called in
// a 2025-era session.
func only2026(req *mcp.CallToolRequest) *mcp.CallToolResult {
	if req.Session.Era() == mcp.Era2026 {
		return nil
	}
	r := text(req.Params.Name + " needs protocol version " + mcp.ProtocolVersion2026 + " (multi round-trip requests)")
	r.IsError = true
	return r
}

// mrtrTool is a tool that asks for reqs (with state, when set) until every
// key is answered, then completes with done.
func mrtrTool(reqs map[string]*mcp.InputRequest, state []byte, done func(req *mcp.CallToolRequest) *mcp.CallToolResult) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r := only2026(req); r != nil {
			return r, nil
		}
		if state != nil && req.State == nil {
			// State-bound tools start over without their state.
			return nil, &mcp.InputRequired{Requests: reqs, State: state}
		}
		if missing := need(req.InputResponses, reqs); missing != nil {
			return nil, &mcp.InputRequired{Requests: missing, State: state}
		}
		return done(req), nil
	}
}

func register2026(s *mcp.Server, store notify.Store) {
	add := func(name, desc string, h mcp.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: noArguments()}, h)
	}
	userName := map[string]*mcp.InputRequest{"user_name": elicitRequest("What is your name?", nameSchema("name"))}
	add("test_input_required_result_elicitation", "Asks for the user's name with an input_required result",
		mrtrTool(userName, nil, func(req *mcp.CallToolRequest) *mcp.CallToolResult {
			return text("Hello, " + elicited(req.InputResponses["user_name"], "name") + "!")
		}))
	add("test_input_required_result_sampling", "Asks the client's LLM a question with an input_required result",
		mrtrTool(map[string]*mcp.InputRequest{"capital_question": samplingRequest("What is the capital of France?", 100)}, nil,
			func(req *mcp.CallToolRequest) *mcp.CallToolResult {
				return text("The LLM answered: " + sampled(req.InputResponses["capital_question"]))
			}))
	add("test_input_required_result_list_roots", "Asks for the client's roots with an input_required result",
		mrtrTool(map[string]*mcp.InputRequest{"client_roots": rootsRequest()}, nil,
			func(req *mcp.CallToolRequest) *mcp.CallToolResult {
				return text("Client roots: " + strings.Join(rootURIs(req.InputResponses["client_roots"]), ", "))
			}))
	confirm := map[string]*mcp.InputRequest{"confirm": elicitRequest("Please confirm", map[string]any{
		"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}, "required": []string{"ok"},
	})}
	add("test_input_required_result_request_state", "Round-trips a signed requestState",
		mrtrTool(confirm, []byte("confirm-pending"), func(req *mcp.CallToolRequest) *mcp.CallToolResult {
			if string(req.State) != "confirm-pending" {
				return text("unexpected state")
			}
			return text("state-ok: the signed requestState came back intact")
		}))
	add("test_input_required_result_tampered_state", "Rejects a tampered requestState",
		mrtrTool(confirm, []byte("confirm-pending"), func(*mcp.CallToolRequest) *mcp.CallToolResult {
			return text("state-ok")
		}))
	multi := map[string]*mcp.InputRequest{
		"user_name":    elicitRequest("What is your name?", nameSchema("name")),
		"greeting":     samplingRequest("Generate a greeting", 50),
		"client_roots": rootsRequest(),
	}
	add("test_input_required_result_multiple_inputs", "Asks for an elicitation, a sampling and the roots at once",
		mrtrTool(multi, []byte("multi"), func(req *mcp.CallToolRequest) *mcp.CallToolResult {
			return text(fmt.Sprintf("name=%s greeting=%s roots=%s", elicited(req.InputResponses["user_name"], "name"),
				sampled(req.InputResponses["greeting"]), strings.Join(rootURIs(req.InputResponses["client_roots"]), ",")))
		}))
	add("test_input_required_result_multi_round", "Asks twice, carrying the first answer in requestState", multiRound)
	add("test_input_required_result_capabilities", "Asks only for what the client declared", capabilityCheck)
	add("test_streaming_elicitation", "Asks for input with an input_required result, never with a request on the stream",
		mrtrTool(userName, nil, func(req *mcp.CallToolRequest) *mcp.CallToolResult {
			return text("Hello, " + elicited(req.InputResponses["user_name"], "name") + "!")
		}))
	add("test_missing_capability", "Needs the client's sampling capability", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Session.ClientCapabilities().Sampling == nil {
			return nil, mcp.MissingClientCapability("sampling")
		}
		return text("the client declared sampling"), nil
	})
	add("test_logging_tool", "Logs three messages (sent only at the request's logLevel)", toolWithLogging)
	add("test_trigger_tool_change", "Changes the tool list (through the store)", triggerChange(store, notify.RegistryTools))
	add("test_trigger_prompt_change", "Changes the prompt list (through the store)", triggerChange(store, notify.RegistryPrompts))

	s.AddPrompt(&mcp.Prompt{
		Name:        "test_input_required_result_prompt",
		Description: "A prompt that asks for context with an input_required result",
	}, func(_ context.Context, req *mcp.ServerRequest[*mcp.GetPromptParams]) (*mcp.GetPromptResult, error) {
		reqs := map[string]*mcp.InputRequest{"user_context": elicitRequest("What context should the prompt use?", nameSchema("context"))}
		if req.Session.Era() != mcp.Era2026 {
			return nil, mcp.Errorf(mcp.CodeInvalidParams, "test_input_required_result_prompt needs protocol version %s", mcp.ProtocolVersion2026)
		}
		if missing := need(req.InputResponses, reqs); missing != nil {
			return nil, &mcp.InputRequired{Requests: missing}
		}
		return messages(&mcp.TextContent{Text: "Use this context: " + elicited(req.InputResponses["user_context"], "context")}), nil
	})
}

// multiRound asks for a name, then (with the name in its signed state)
// for a colour, then completes.
func multiRound(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if r := only2026(req); r != nil {
		return r, nil
	}
	step1 := map[string]*mcp.InputRequest{"step1": elicitRequest("Step 1: What is your name?", nameSchema("name"))}
	step2 := map[string]*mcp.InputRequest{"step2": elicitRequest("Step 2: What is your favorite color?", nameSchema("color"))}
	state := string(req.State)
	switch {
	case strings.HasPrefix(state, "round2:"):
		if need(req.InputResponses, step2) != nil {
			return nil, &mcp.InputRequired{Requests: step2, State: req.State}
		}
		return text(fmt.Sprintf("%s likes %s", strings.TrimPrefix(state, "round2:"), elicited(req.InputResponses["step2"], "color"))), nil
	case state == "round1" && need(req.InputResponses, step1) == nil:
		return nil, &mcp.InputRequired{Requests: step2, State: []byte("round2:" + elicited(req.InputResponses["step1"], "name"))}
	}
	return nil, &mcp.InputRequired{Requests: step1, State: []byte("round1")}
}

// capabilityCheck asks only for input the client declared a capability for.
func capabilityCheck(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if r := only2026(req); r != nil {
		return r, nil
	}
	caps := req.Session.ClientCapabilities()
	reqs := map[string]*mcp.InputRequest{}
	if caps.Elicitation != nil {
		reqs["user_name"] = elicitRequest("What is your name?", nameSchema("name"))
	}
	if caps.Sampling != nil {
		reqs["greeting"] = samplingRequest("Generate a greeting", 50)
	}
	if caps.Roots != nil {
		reqs["client_roots"] = rootsRequest()
	}
	if len(reqs) == 0 {
		return text("the client declared none of elicitation, sampling, roots: nothing to ask"), nil
	}
	if missing := need(req.InputResponses, reqs); missing != nil {
		return nil, &mcp.InputRequired{Requests: missing}
	}
	return text(fmt.Sprintf("received %d answers", len(reqs))), nil
}

// triggerChange returns a tool that changes a registry in the store, as an
// SNS registry message would: every process (and every listen stream or
// 2025 session) sees the new hash. The changed item is a marker that no
// list shows (a tool overlay for a tool that does not exist) or one
// dynamic prompt, test_dynamic_prompt.
func triggerChange(store notify.Store, kind string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		nonce := newNonce()
		var item any
		key := "test_dynamic_marker"
		switch kind {
		case notify.RegistryTools:
			item = notify.ToolItem{Name: key, Description: "change " + nonce}
		default:
			key = "test_dynamic_prompt"
			item = notify.PromptItem{Name: key, Description: "A prompt the conformance fixtures change (" + nonce + ")",
				Messages: []notify.PromptMessage{{Role: "user", Text: "dynamic prompt " + nonce}}}
		}
		raw, err := json.Marshal(item)
		if err != nil {
			return nil, err
		}
		if _, _, err := store.ApplyRegistry(ctx, kind, notify.OpPut, map[string]json.RawMessage{key: raw}, "conformance-"+nonce); err != nil {
			return nil, err
		}
		return text(kind + " list changed"), nil
	}
}

func newNonce() string { return rand.Text() }

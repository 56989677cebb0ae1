package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
)

// Multi round-trip requests (MRTR), a feature of the 2026 era, as the
// server serves them (the client's side is in client_2026.go; the
// signing of requestState in requeststate.go). A handler that needs input
// from the client (an elicitation, a sampling, the roots) returns an
// *InputRequired error; the client answers with an input_required result's
// inputRequests fulfilled, retrying the same request with inputResponses
// and the echoed requestState, and the handler runs again with
// ServerRequest.InputResponses and ServerRequest.State set. The retry may
// reach any process: everything the handler needs is in the retry itself,
// and the requestState is signed with a key every process shares (see
// ServerOptions.StateKeys), so no process keeps anything in between.

// InputRequest is one request the client must fulfil before a retry: a
// sampling/createMessage, roots/list or elicitation/create request.
type InputRequest struct {
	Method string `json:"method"`
	Params any    `json:"params"`
}

// InputRequired is the error a tools/call, prompts/get or resources/read
// handler returns, in the 2026 era, to answer with an input_required
// result. State is application state returned on the retry (in
// ServerRequest.State) exactly as given: it is signed, bound to the
// request's method, name and principal, and expires after
// ServerOptions.StateTTL.
type InputRequired struct {
	Requests map[string]*InputRequest
	State    []byte

	// answers are the answers of earlier rounds that Elicit,
	// CreateMessage and ListRoots collected; they travel in the signed
	// state.
	answers map[string]json.RawMessage
}

// Error implements error; it names the keys of the input requests.
func (e *InputRequired) Error() string {
	keys := make([]string, 0, len(e.Requests))
	for k := range e.Requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return "mcp: input required: " + strings.Join(keys, ", ")
}

// inputRequiredResult is the wire form of InputRequired.
type inputRequiredResult struct {
	ResultType    string                   `json:"resultType"`
	InputRequests map[string]*InputRequest `json:"inputRequests,omitempty"`
	RequestState  string                   `json:"requestState,omitempty"`
}

// mrtrParams are the members of a retried request's params.
type mrtrParams struct {
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   *string         `json:"requestState,omitempty"`
}

// inputMethods maps the methods an input request may use to the client
// capability each needs.
var inputMethods = map[string]string{
	"elicitation/create":     "elicitation",
	"sampling/createMessage": "sampling",
	"roots/list":             "roots",
}

// mrtrMethods are the methods whose results may be input_required.
var mrtrMethods = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// readRetry decodes and verifies the multi round-trip members of a
// request's params. Any failure is an invalid-params error. With a
// requestState it keeps only the inputResponses to the input requests
// that the state's round asked for: answers nobody asked for are ignored.
// (Without one, a handler may take answers given before it asked, but ask
// copies into the next state only those it used.)
func (s *Server) readRetry(ss *ServerSession, m *Message) (responses map[string]json.RawMessage, state []byte, answers map[string]json.RawMessage, err *Error) {
	if strings.HasPrefix(m.Method, "tasks/") {
		return nil, nil, nil, nil // tasks/update's inputResponses answer a task's requests (tasks_engine.go)
	}
	var p mrtrParams
	if len(m.Params) > 0 {
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, nil, nil, Errorf(CodeInvalidParams, "invalid params: inputResponses must be an object and requestState a string: %v", err)
		}
	}
	if len(p.InputResponses) > 0 && string(p.InputResponses) != "null" {
		if err := json.Unmarshal(p.InputResponses, &responses); err != nil {
			return nil, nil, nil, Errorf(CodeInvalidParams, "invalid params: inputResponses must be an object mapping input request keys to responses")
		}
		for k, v := range responses {
			if len(v) == 0 || v[0] != '{' {
				return nil, nil, nil, Errorf(CodeInvalidParams, "invalid params: inputResponses[%q] must be an object (the result of the input request)", k)
			}
		}
		if !mrtrMethods[m.Method] {
			return nil, nil, nil, Errorf(CodeInvalidParams, "invalid params: %s takes no inputResponses", m.Method)
		}
	}
	var body *stateBody
	if p.RequestState != nil {
		if !mrtrMethods[m.Method] {
			return nil, nil, nil, Errorf(CodeInvalidParams, "invalid params: %s takes no requestState", m.Method)
		}
		var err error
		body, err = s.states.verify(*p.RequestState)
		if err == nil && (body.Method != m.Method || body.Name != requestName(m.Method, m.Params) || body.Principal != principalTag(ss.Principal())) {
			err = ErrStateMismatch
		}
		if err != nil {
			return nil, nil, nil, Errorf(CodeInvalidParams, "invalid params: requestState rejected: %v", err)
		}
		state, answers = body.Data, body.Answers
		if state == nil {
			state = []byte{}
		}
	}
	asked := map[string]bool{}
	if body != nil {
		for _, k := range body.Asked {
			asked[k] = true
		}
		for k := range responses {
			if !asked[k] {
				delete(responses, k)
			}
		}
	}
	return responses, state, answers, nil
}

// inputRequired turns a handler's *InputRequired into the wire result:
// every input request needs a capability the client declared, and the
// state is signed.
func (s *Server) inputRequired(ctx context.Context, ss *ServerSession, m *Message, ir *InputRequired) (any, error) {
	if !mrtrMethods[m.Method] {
		return nil, fmt.Errorf("%s handler returned input_required, which only tools/call, prompts/get and resources/read may", m.Method)
	}
	if len(ir.Requests) == 0 && ir.State == nil {
		return nil, fmt.Errorf("%s handler returned input_required with neither requests nor state", m.Method)
	}
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(ss.state.ClientCapabilities, &caps)
	missing := map[string]struct{}{}
	for key, r := range ir.Requests {
		capName, ok := inputMethods[r.Method]
		if !ok {
			return nil, fmt.Errorf("input request %q: method %q is not one of elicitation/create, sampling/createMessage, roots/list", key, r.Method)
		}
		if _, ok := caps[capName]; !ok {
			missing[capName] = struct{}{}
		}
	}
	if len(missing) > 0 {
		names := make([]string, 0, len(missing))
		for n := range missing {
			names = append(names, n)
		}
		return nil, MissingClientCapability(names...)
	}
	asked := make([]string, 0, len(ir.Requests))
	for key := range ir.Requests {
		asked = append(asked, key)
	}
	sort.Strings(asked)
	token := s.states.sign(stateBody{Method: m.Method, Name: requestName(m.Method, m.Params), Principal: principalTag(ss.Principal()), Data: ir.State, Answers: ir.answers, Asked: asked})
	if len(token) > maxStateBytes {
		// The retry would be refused as malformed: fail now, saying why,
		// rather than send a state that can never be used. When the
		// client's answers alone make it too large, the client is told.
		if len(ir.answers) > 0 && len(s.states.sign(stateBody{Method: m.Method, Name: requestName(m.Method, m.Params), Principal: principalTag(ss.Principal()), Data: ir.State, Asked: asked})) <= maxStateBytes {
			return nil, Errorf(CodeInvalidParams, "invalid params: the inputResponses are too large to carry to the next round: requestState would be %d bytes, over %d", len(token), maxStateBytes)
		}
		return nil, fmt.Errorf("%s: requestState would be %d bytes, over the %d a retry may send back (the handler's state and the earlier answers it carries are too large)", m.Method, len(token), maxStateBytes)
	}
	return &inputRequiredResult{ResultType: resultInputRequired, InputRequests: ir.Requests, RequestState: token}, nil
}

// MissingClientCapability returns the 2026-era error for a request that
// needs client capabilities the client did not declare in its _meta.
func MissingClientCapability(capabilities ...string) *Error {
	req := map[string]struct{}{}
	for _, c := range capabilities {
		req[c] = struct{}{}
	}
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": req})
	sort.Strings(capabilities)
	return &Error{Code: CodeMissingRequiredClientCapability, Message: "Missing required client capability: " + strings.Join(capabilities, ", "), Data: data}
}

// ask serves a server-to-client request (Elicit, CreateMessage, ListRoots)
// made while handling a 2026-era request, where there is no channel for
// one: the n-th ask of a handler run is keyed "<method>#n". When the
// client has answered that key (in this retry, or in an earlier round,
// carried in the signed state) the answer is decoded into result;
// otherwise ask returns an *InputRequired that the handler returns as its
// error, and the client's retry runs the handler again from the start.
func (c *call) ask(method string, params, result any) error {
	if !mrtrMethods[c.method] {
		return fmt.Errorf("%s: %w", method, Err2026Request)
	}
	c.asks++
	key := fmt.Sprintf("%s#%d", method, c.asks)
	raw, ok := c.inputResponses[key]
	if ok {
		if c.used == nil {
			c.used = map[string]json.RawMessage{}
		}
		c.used[key] = raw
	} else {
		raw, ok = c.answers[key]
	}
	if !ok {
		// The next round's state carries the answers this run used, and
		// no other inputResponses: only what a handler asked for.
		answers := maps.Clone(c.answers)
		if answers == nil {
			answers = map[string]json.RawMessage{}
		}
		maps.Copy(answers, c.used)
		return &InputRequired{Requests: map[string]*InputRequest{key: {Method: method, Params: params}}, State: c.state, answers: answers}
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return Errorf(CodeInvalidParams, "invalid params: inputResponses[%q]: %v", key, err)
	}
	return nil
}

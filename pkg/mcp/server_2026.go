package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/mcpush/mcpush/pkg/notify"
)

// DiscoverResult is the result of server/discover.
type DiscoverResult struct {
	SupportedVersions []string            `json:"supportedVersions"`
	Capabilities      *ServerCapabilities `json:"capabilities"`
	Instructions      string              `json:"instructions,omitempty"`
	Meta              Meta                `json:"_meta,omitempty"`
}

func (s *Server) discover() *DiscoverResult {
	caps := s.capabilities()
	if s.tasks != nil {
		if caps.Extensions == nil {
			caps.Extensions = map[string]any{}
		}
		caps.Extensions[TasksExtension] = struct{}{}
	}
	return &DiscoverResult{
		SupportedVersions: AllProtocolVersions(),
		Capabilities:      caps,
		Instructions:      s.opts.Instructions,
		Meta:              Meta{metaServerInfo: s.impl},
	}
}

// wants2026 decides a request's era before its body is read: a
// request with an Mcp-Session-Id, or whose MCP-Protocol-Version header
// names a 2025-era version, belongs to the session path; so does one with
// neither header (an initialize, or a 2025 client's error). Any other
// version header, known or not, is the 2026 path's to answer.
func wants2026(r *http.Request) bool {
	if r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	v := r.Header.Get("Mcp-Protocol-Version")
	return v != "" && eraOf(v) != Era2025
}

// metaVersion2026 returns the protocol version in m's params._meta,
// which only 2026-era requests carry, and whether there is one.
func metaVersion2026(m *Message) (string, bool) {
	var p struct {
		Meta struct {
			ProtocolVersion *string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	}
	if len(m.Params) == 0 || json.Unmarshal(m.Params, &p) != nil || p.Meta.ProtocolVersion == nil {
		return "", false
	}
	return *p.Meta.ProtocolVersion, true
}

// requestMeta2026 is the _meta a 2026-era request carries.
type requestMeta2026 struct {
	ProtocolVersion    *string         `json:"io.modelcontextprotocol/protocolVersion"`
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	ClientInfo         json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
	LogLevel           LoggingLevel    `json:"io.modelcontextprotocol/logLevel"`
}

// check2026 validates a 2026-era request's headers against its
// body and returns the request's view of a session, or the refusal to
// answer.
func (h *StreamableHandler) check2026(r *http.Request, principal string, m *Message) (*ServerSession, *refusal) {
	header := r.Header.Get("Mcp-Protocol-Version")
	if header == "" {
		return nil, refuse(errHeaderMismatch, "Header mismatch: the MCP-Protocol-Version header is required")
	}
	var p struct {
		Meta *requestMeta2026 `json:"_meta"`
	}
	if len(m.Params) > 0 {
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, refuse(errInvalidMeta, "Invalid params: "+err.Error())
		}
	}
	var missing []string
	if p.Meta == nil || p.Meta.ProtocolVersion == nil {
		missing = append(missing, metaProtocolVersion)
	}
	if p.Meta == nil || len(p.Meta.ClientCapabilities) == 0 || p.Meta.ClientCapabilities[0] != '{' {
		missing = append(missing, metaClientCapabilities)
	}
	if len(missing) > 0 {
		return nil, refuse(errInvalidMeta, "Invalid params: _meta needs "+strings.Join(missing, " and "))
	}
	v := *p.Meta.ProtocolVersion
	if v != header {
		return nil, refuse(errHeaderMismatch, "Header mismatch: MCP-Protocol-Version "+header+" differs from _meta protocolVersion "+v)
	}
	if eraOf(v) != Era2026 {
		data, _ := json.Marshal(map[string]any{"supported": AllProtocolVersions(), "requested": v})
		return nil, &refusal{kind: errUnsupportedVersion, msg: "Unsupported protocol version " + v + " (supported: " + strings.Join(AllProtocolVersions(), ", ") + "; 2025-era versions start with initialize)", data: data}
	}
	if got := r.Header.Get("Mcp-Method"); got != m.Method {
		if got == "" {
			return nil, refuse(errHeaderMismatch, "Header mismatch: the Mcp-Method header is required")
		}
		return nil, refuse(errHeaderMismatch, "Header mismatch: Mcp-Method "+got+" differs from the body's method "+m.Method)
	}
	if namedMethods[m.Method] != "" || eventsNamedMethods[m.Method] {
		name := requestName(m.Method, m.Params)
		got, present := r.Header["Mcp-Name"]
		switch {
		case !present && eventsNamedMethods[m.Method]:
			// Optional for the Events methods: checked when sent.
		case !present:
			return nil, refuse(errHeaderMismatch, "Header mismatch: "+m.Method+" needs the Mcp-Name header")
		case len(got) != 1 || decodeHeaderValue(got[0]) != name:
			member := namedMethods[m.Method]
			if member == "" {
				member = "name"
			}
			return nil, refuse(errHeaderMismatch, "Header mismatch: Mcp-Name differs from the body's "+member+" "+clipText(name, 64))
		}
	}
	if m.Method == "tools/call" {
		if bad := h.srv.checkParamHeaders(r, m.Params); bad != "" {
			return nil, refuse(errHeaderMismatch, "Header mismatch: "+bad)
		}
	}
	if n, limit := len(p.Meta.ClientCapabilities)+len(p.Meta.ClientInfo), h.srv.opts.Limits.MaxClientInfoBytes; n > limit {
		return nil, refuse(errInvalidMeta, fmt.Sprintf("Invalid params: _meta clientCapabilities and clientInfo are %d bytes, limit %d", n, limit))
	}
	if p.Meta.LogLevel != "" && levelRank(p.Meta.LogLevel) < 0 {
		return nil, refuse(errInvalidMeta, "Invalid params: unknown logLevel "+string(p.Meta.LogLevel)+" (want one of debug, info, notice, warning, error, critical, alert, emergency)")
	}
	return &ServerSession{
		srv:     h.srv,
		era2026: true,
		quota:   quotaPrincipal(r, principal),
		state: &notify.Session{
			Principal:          principal,
			ProtocolVersion:    v,
			ClientInfo:         p.Meta.ClientInfo,
			ClientCapabilities: p.Meta.ClientCapabilities,
			LogLevel:           string(p.Meta.LogLevel),
		},
	}, nil
}

// decodeHeaderValue decodes a header value that a client base64-encoded
// because it is not plain ASCII ("=?base64?...?=").
func decodeHeaderValue(v string) string {
	if strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?=") {
		if b, err := base64.StdEncoding.DecodeString(v[len("=?base64?") : len(v)-2]); err == nil {
			return string(b)
		}
	}
	return v
}

// namedMethods are the methods whose requests carry the Mcp-Name header,
// and the params member it mirrors.
var namedMethods = map[string]string{
	"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
	"tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
}

// eventsNamedMethods are the Events extension's methods that name an
// event type (params.name). Their Mcp-Name header, when present, must be
// that name (SEP-3415 leaves the header undefined for them and the
// TypeScript SDK does not send it, so it is not required); this
// package's client sends it.
var eventsNamedMethods = map[string]bool{
	"events/poll": true, "events/stream": true, "events/subscribe": true, "events/unsubscribe": true,
}

// requestName is what a request acts on: the tool or prompt name, or the
// resource URI (the Mcp-Name header's value, and what a requestState is
// bound to).
func requestName(method string, params json.RawMessage) string {
	var p struct {
		Name   string `json:"name"`
		URI    string `json:"uri"`
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(params, &p)
	switch namedMethods[method] {
	case "uri":
		return p.URI
	case "taskId":
		return p.TaskID
	}
	return p.Name
}

// serve2026 serves a POST of the 2026 era: one JSON-RPC message,
// no session. A request is answered with its response (JSON, or an SSE
// stream when it sends progress or logs first); a notification with 202.
func (h *StreamableHandler) serve2026(w http.ResponseWriter, r *http.Request, principal string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, Era2026, nil, refuse(errMethodNotAllowed, "Method Not Allowed: protocol version "+r.Header.Get("Mcp-Protocol-Version")+" has no "+r.Method+" (there is no session; use subscriptions/listen for notifications)"))
		return
	}
	body, ok := h.readPOST(w, r, Era2026)
	if !ok {
		return
	}
	msgs, batch, rpcErr := DecodeMessages(body)
	if rpcErr != nil {
		writeError(w, Era2026, nil, reject(rpcErr))
		return
	}
	if batch {
		writeError(w, Era2026, nil, refuse(errBadRequest, "Bad Request: JSON-RPC batches are not supported in protocol version "+r.Header.Get("Mcp-Protocol-Version")))
		return
	}
	m := msgs[0]
	if !m.IsRequest() {
		// Notifications (notifications/cancelled of a listen stream) and
		// stray responses: nothing to answer.
		if m.IsNotification() && m.Method == "notifications/cancelled" {
			h.srv.cancelListen(r.Context(), quotaPrincipal(r, principal), m)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	ss, bad := h.check2026(r, principal, m)
	if bad != nil {
		writeError(w, Era2026, m.ID, bad)
		return
	}
	if m.Method == "subscriptions/listen" {
		h.serveListen(w, r, ss, m)
		return
	}
	if m.Method == "events/stream" {
		// A held stream, like a listen: not counted with the requests in
		// flight (SEP-3415), but with the principal's listen streams.
		h.serveEventStream(w, r, ss, m)
		return
	}
	// A 2026 request has no session: only the process's total bounds it.
	if l := h.srv.opts.Limits; !h.inflight.acquire("", l.MaxInFlight, l.MaxInFlight) {
		writeError(w, Era2026, nil, tooMany("too many requests in flight on this server; retry later"))
		return
	}
	defer h.inflight.release("")
	out := &out2026{sse: newSSEWriter(w), w: w}
	resp := h.srv.runRequest(r.Context(), ss, m, out)
	out.finish(resp)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// out2026 is the response of one 2026-era request: JSON until the
// first related message, then an SSE stream. Nothing is logged: a broken
// stream is not resumed; the client retries the request. Safe for
// concurrent use.
type out2026 struct {
	sse *sseWriter
	w   http.ResponseWriter

	mu    sync.Mutex
	isSSE bool
	done  bool
}

func (o *out2026) send(_ context.Context, msg []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return nil
	}
	if !o.isSSE {
		o.isSSE = true
		o.sse.start()
	}
	return o.sse.event("", msg)
}

// detach does nothing: a 2026-era stream cannot be resumed, so it is
// never closed early.
func (o *out2026) detach() {}

// finish writes the response; nil (a cancelled request) writes nothing
// more.
func (o *out2026) finish(resp *response) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done = true
	switch {
	case o.isSSE && resp != nil:
		o.sse.event("", resp.encode(Era2026))
	case o.isSSE:
	case resp == nil:
		o.w.WriteHeader(http.StatusAccepted)
	default:
		resp.write(o.w, Era2026)
	}
}

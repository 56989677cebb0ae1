package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Checks of client input against the server's Limits. Each runs before
// anything is stored and answers CodeInvalidParams naming the limit.

// checkClientInfo bounds what an initialize asks the store to keep: the
// capabilities (which must be an object) and the client info.
func (s *Server) checkClientInfo(raw json.RawMessage, caps json.RawMessage) error {
	caps = bytes.TrimSpace(caps)
	if len(caps) > 0 && !bytes.Equal(caps, []byte("null")) && caps[0] != '{' {
		return Errorf(CodeInvalidParams, "invalid params: initialize capabilities must be an object")
	}
	var p struct {
		ClientInfo json.RawMessage `json:"clientInfo"`
	}
	json.Unmarshal(raw, &p)
	if n, limit := len(caps)+len(p.ClientInfo), s.opts.Limits.MaxClientInfoBytes; n > limit {
		return Errorf(CodeInvalidParams, "invalid params: initialize capabilities and clientInfo are %d bytes, limit %d", n, limit)
	}
	return nil
}

// checkSubscribe bounds a subscription URI, and the subscriptions of a
// session as it was loaded for this request (processes that subscribe
// the same session at the same instant may each add one more).
func (s *Server) checkSubscribe(ss *ServerSession, method, uri string) error {
	l := s.opts.Limits
	if reservedURI(uri) {
		return Errorf(CodeInvalidParams, "invalid params: %q is not a resource (the %s URI scheme prefix is reserved)", clipText(uri, 64), reservedURIPrefix)
	}
	if len(uri) > l.MaxSubscriptionURIBytes {
		return Errorf(CodeInvalidParams, "invalid params: %s uri is %d bytes, limit %d", method, len(uri), l.MaxSubscriptionURIBytes)
	}
	subs := ss.state.Subscriptions
	if method == "resources/subscribe" && len(subs) >= l.MaxSubscriptions && !slices.Contains(subs, uri) {
		return Errorf(CodeInvalidParams, "invalid params: the session has %d subscriptions, limit %d; unsubscribe first", len(subs), l.MaxSubscriptions)
	}
	return nil
}

// reservedURIPrefix begins the URI schemes of the server's own
// subscriptions in the store (the mcpush-listen:task: URIs of the tasks
// listen streams name): no client subscribes to one, or it would receive
// another stream's task notifications.
const reservedURIPrefix = notify.ReservedSchemePrefix

// reservedURI reports whether uri is in the reserved namespace (scheme
// names are case-insensitive).
func reservedURI(uri string) bool {
	return len(uri) >= len(reservedURIPrefix) && strings.EqualFold(uri[:len(reservedURIPrefix)], reservedURIPrefix)
}

// MaxNameBytes bounds the tool name of tools/call and the prompt name of
// prompts/get (CodeInvalidParams beyond it); ingest refuses a registry
// prompt with a longer name.
const MaxNameBytes = notify.MaxNameBytes

// checkName bounds a tool or prompt name.
func checkName(method, name string) error {
	if len(name) > MaxNameBytes {
		return Errorf(CodeInvalidParams, "invalid params: %s name is %d bytes, limit %d", method, len(name), MaxNameBytes)
	}
	return nil
}

// checkPromptArguments bounds each argument of prompts/get.
func (s *Server) checkPromptArguments(args map[string]string) error {
	limit := s.opts.Limits.MaxPromptArgumentBytes
	for name, v := range args {
		if len(name)+len(v) > limit {
			return Errorf(CodeInvalidParams, "invalid params: prompt argument %q is %d bytes, limit %d", clipText(name, 64), len(name)+len(v), limit)
		}
	}
	return nil
}

// singleHeaders are the MCP headers a request carries at most once: with
// two, the server and a gateway or a proxy in front of it could each read
// another one.
var singleHeaders = []string{"Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name"}

// checkRepeatedHeaders refuses a request that repeats one of
// singleHeaders (CodeHeaderMismatch, HTTP 400), in either era.
func checkRepeatedHeaders(h http.Header) *refusal {
	for _, name := range singleHeaders {
		if n := len(h.Values(name)); n > 1 {
			return refuse(errHeaderMismatch, "Header mismatch: "+itoa(int64(n))+" "+name+" headers; send it once")
		}
	}
	return nil
}

package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Access rules: who may use an event type or a tool. An events or tools
// registry item may carry "access":
//
//	{"scopes":["incidents:read"],
//	 "claims":{"cognito:groups":["oncall","sre"]},
//	 "bind":{"team":"team"}}
//
// A caller is permitted when every scope is among its token's scopes
// ("scope", space-separated, or the "scp" array), and for each claim its
// token's value (a string, or any element of an array of strings) is one
// of the listed values. Bind maps a subscription argument to a claim: the
// argument is forced to the caller's value of the claim (a string), so a
// subscriber only receives events whose data carry its own value; a
// caller without that claim (or with a non-string value) is not
// permitted. An item without access is open to every caller, as before.
// The rules are evaluated by the MCP server at every request and by the
// webhook delivery from the claims a subscription recorded
// (WebhookSubscription.Permitted), so this file imports nothing of the
// server.

// Bounds of an access rule (docs/limits.md): a registry message with a
// rule over them is refused whole.
const (
	MaxAccessScopes      = 16  // scopes of one rule
	MaxAccessClaims      = 16  // claims of one rule
	MaxAccessClaimValues = 64  // values listed for one claim
	MaxAccessBinds       = 8   // bound arguments of one rule
	MaxAccessString      = 256 // bytes of a scope, a claim name or value, an argument name
)

// Access is an access rule (the "access" member of an events or tools
// registry item). The zero rule is never stored (ParseAccess refuses
// it); a nil *Access permits everyone.
type Access struct {
	Scopes []string            `json:"scopes,omitempty"`
	Claims map[string][]string `json:"claims,omitempty"`
	Bind   map[string]string   `json:"bind,omitempty"`
}

// Claims are the claims of a caller's credentials as decoded JSON: a
// bearer token's payload, or for an IAM caller {"arn": "<caller ARN>"}.
// Only strings and arrays of strings are compared; other values match
// nothing.
type Claims map[string]any

// ParseAccess decodes and checks an access rule: a JSON object with only
// scopes (an array of distinct non-empty strings), claims (an object
// whose members are non-empty arrays of distinct strings) and bind (an
// object of argument name to claim name), at least one of them not
// empty, within the Max* bounds. Errors wrap ErrBadItem and say what is
// wrong and where.
func ParseAccess(raw json.RawMessage) (*Access, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("%w: access: want a JSON object with scopes, claims or bind", ErrBadItem)
	}
	if !utf8.Valid(raw) {
		return nil, fmt.Errorf("%w: access: invalid UTF-8", ErrBadItem)
	}
	top, err := accessMembers(raw, "access")
	if err != nil {
		return nil, err
	}
	a := &Access{}
	for name, v := range top {
		var err error
		switch name {
		case "scopes":
			a.Scopes, err = accessStrings(v, "access.scopes", MaxAccessScopes)
		case "claims":
			a.Claims, err = accessClaims(v)
		case "bind":
			a.Bind, err = accessBind(v)
		default:
			err = fmt.Errorf("%w: access: unknown member %q (want scopes, claims or bind)", ErrBadItem, clipName(name))
		}
		if err != nil {
			return nil, err
		}
	}
	// Empty members are absent ones: one rule, one encoding.
	if len(a.Scopes) == 0 {
		a.Scopes = nil
	}
	if len(a.Claims) == 0 {
		a.Claims = nil
	}
	if len(a.Bind) == 0 {
		a.Bind = nil
	}
	if err := a.Check(); err != nil {
		return nil, err
	}
	return a, nil
}

// Check validates a decoded rule: what ParseAccess checks after
// decoding (a stored item is checked again when it is read).
func (a *Access) Check() error {
	if a == nil {
		return nil
	}
	switch {
	case len(a.Scopes) == 0 && len(a.Claims) == 0 && len(a.Bind) == 0:
		return fmt.Errorf("%w: access: empty: name at least one of scopes, claims, bind (or leave access out: open to every caller)", ErrBadItem)
	case len(a.Scopes) > MaxAccessScopes:
		return fmt.Errorf("%w: access.scopes: %d, more than %d", ErrBadItem, len(a.Scopes), MaxAccessScopes)
	case len(a.Claims) > MaxAccessClaims:
		return fmt.Errorf("%w: access.claims: %d claims, more than %d", ErrBadItem, len(a.Claims), MaxAccessClaims)
	case len(a.Bind) > MaxAccessBinds:
		return fmt.Errorf("%w: access.bind: %d arguments, more than %d", ErrBadItem, len(a.Bind), MaxAccessBinds)
	}
	if err := checkStrings(a.Scopes, "access.scopes", MaxAccessScopes); err != nil {
		return err
	}
	for c, vs := range a.Claims {
		if err := checkString(c, "access.claims member name"); err != nil {
			return err
		}
		if len(vs) == 0 {
			return fmt.Errorf("%w: access.claims.%s: empty: list at least one value (no caller could match)", ErrBadItem, clipName(c))
		}
		if err := checkStrings(vs, "access.claims."+clipName(c), MaxAccessClaimValues); err != nil {
			return err
		}
	}
	for arg, c := range a.Bind {
		if err := checkString(arg, "access.bind argument name"); err != nil {
			return err
		}
		if err := checkString(c, "access.bind."+clipName(arg)); err != nil {
			return err
		}
	}
	return nil
}

func accessStrings(raw json.RawMessage, path string, max int) ([]string, error) {
	var out []string
	if err := json.Unmarshal(raw, &out); err != nil || out == nil {
		return nil, fmt.Errorf("%w: %s: want an array of strings", ErrBadItem, path)
	}
	if err := checkStrings(out, path, max); err != nil {
		return nil, err
	}
	return out, nil
}

func accessClaims(raw json.RawMessage) (map[string][]string, error) {
	m, err := accessMembers(raw, "access.claims")
	if err != nil {
		return nil, fmt.Errorf("%w (want an object of claim name to an array of values)", err)
	}
	if len(m) > MaxAccessClaims {
		return nil, fmt.Errorf("%w: access.claims: %d claims, more than %d", ErrBadItem, len(m), MaxAccessClaims)
	}
	out := make(map[string][]string, len(m))
	for c, v := range m {
		vs, err := accessStrings(v, "access.claims."+clipName(c), MaxAccessClaimValues)
		if err != nil {
			return nil, err
		}
		out[c] = vs
	}
	return out, nil
}

func accessBind(raw json.RawMessage) (map[string]string, error) {
	m, err := accessMembers(raw, "access.bind")
	if err != nil {
		return nil, fmt.Errorf("%w (want an object of argument name to claim name)", err)
	}
	out := make(map[string]string, len(m))
	for arg, v := range m {
		var c string
		if json.Unmarshal(v, &c) != nil {
			return nil, fmt.Errorf("%w: access.bind.%s: want a claim name (a string)", ErrBadItem, clipName(arg))
		}
		out[arg] = c
	}
	return out, nil
}

// accessMembers decodes a JSON object's members, refusing anything but
// an object and a member named twice (which encoding/json would resolve
// silently to the last one).
func accessMembers(raw json.RawMessage, path string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: %s: not a JSON object", ErrBadItem, path)
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadItem, path, err)
		}
		name, _ := tok.(string)
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: %s.%s: member appears twice", ErrBadItem, path, clipName(name))
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: %s.%s: %v", ErrBadItem, path, clipName(name), err)
		}
		out[name] = v
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, fmt.Errorf("%w: %s: %v", ErrBadItem, path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: %s: data after the object", ErrBadItem, path)
	}
	return out, nil
}

func checkStrings(vs []string, path string, max int) error {
	if len(vs) > max {
		return fmt.Errorf("%w: %s: %d values, more than %d", ErrBadItem, path, len(vs), max)
	}
	for i, v := range vs {
		if err := checkString(v, fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
		if slices.Contains(vs[:i], v) {
			return fmt.Errorf("%w: %s[%d]: %q listed twice", ErrBadItem, path, i, clipName(v))
		}
	}
	return nil
}

func checkString(s, path string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s: empty", ErrBadItem, path)
	case len(s) > MaxAccessString:
		return fmt.Errorf("%w: %s: %d bytes, more than %d", ErrBadItem, path, len(s), MaxAccessString)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s: invalid UTF-8", ErrBadItem, path)
	}
	return nil
}

// clipName shortens a name quoted in an error to 64 bytes.
func clipName(s string) string {
	if len(s) <= 64 {
		return s
	}
	return strings.ToValidUTF8(s[:64], "") + "…"
}

// Scopes returns the scopes of c: the space-separated "scope" claim
// (RFC 9068) and the "scp" claim (an array, or a space-separated string).
func (c Claims) Scopes() []string {
	var out []string
	for _, name := range []string{"scope", "scp"} {
		switch v := c[name].(type) {
		case string:
			out = append(out, strings.Fields(v)...)
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					out = append(out, s)
				}
			}
		case []string:
			out = append(out, v...)
		}
	}
	return out
}

// values returns the string values of claim name: a string, or the
// strings of an array.
func (c Claims) values(name string) []string {
	switch v := c[name].(type) {
	case string:
		return []string{v}
	case []string:
		return v
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Permits reports whether a caller with claims c may use what the rule
// guards: every scope among c's, each listed claim's value (or one
// element of an array claim) among the listed values, and every bound
// claim a string. A nil rule permits every caller.
func (a *Access) Permits(c Claims) bool {
	if a == nil {
		return true
	}
	if len(a.Scopes) > 0 {
		have := c.Scopes()
		for _, s := range a.Scopes {
			if !slices.Contains(have, s) {
				return false
			}
		}
	}
	for name, allowed := range a.Claims {
		if !slices.ContainsFunc(c.values(name), func(v string) bool { return slices.Contains(allowed, v) }) {
			return false
		}
	}
	for _, claim := range a.Bind {
		if _, ok := c[claim].(string); !ok {
			return false
		}
	}
	return true
}

// Bound returns the arguments the rule binds for a caller with claims c:
// argument name to the JSON string of the claim's value. It assumes
// Permits(c); a nil rule binds nothing.
func (a *Access) Bound(c Claims) map[string]json.RawMessage {
	if a == nil || len(a.Bind) == 0 {
		return nil
	}
	out := make(map[string]json.RawMessage, len(a.Bind))
	for arg, claim := range a.Bind {
		s, _ := c[claim].(string)
		out[arg], _ = json.Marshal(s)
	}
	return out
}

// ClaimNames are the claims the rule reads: "scope" and "scp" when it
// names scopes, its claims and its bound claims, sorted. A subscription
// records these of its caller's claims (Record), never the token.
func (a *Access) ClaimNames() []string {
	if a == nil {
		return nil
	}
	var out []string
	if len(a.Scopes) > 0 {
		out = append(out, "scope", "scp")
	}
	for c := range a.Claims {
		out = append(out, c)
	}
	for _, c := range a.Bind {
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Record returns the claims of c the rule reads (ClaimNames), to be kept
// with a subscription granted under it; nil when there are none.
func (a *Access) Record(c Claims) Claims {
	var out Claims
	for _, name := range a.ClaimNames() {
		if v, ok := c[name]; ok {
			if out == nil {
				out = Claims{}
			}
			out[name] = v
		}
	}
	return out
}

// Admits reports whether a subscription with arguments args (a JSON
// object, or empty) and claims c may receive what the rule guards:
// Permits(c), and each bound argument present in args with the claim's
// value. It is the check of a subscription made earlier (a webhook at
// delivery, a held stream after a registry change): a rule that gained a
// bind since ends the subscriptions that did not carry it.
func (a *Access) Admits(c Claims, args json.RawMessage) bool {
	if a == nil {
		return true
	}
	if !a.Permits(c) {
		return false
	}
	if len(a.Bind) == 0 {
		return true
	}
	var m map[string]json.RawMessage
	if len(args) > 0 && json.Unmarshal(args, &m) != nil {
		return false
	}
	for arg, claim := range a.Bind {
		var got string
		if json.Unmarshal(m[arg], &got) != nil || got != c[claim] {
			return false
		}
	}
	return true
}

// Permitted reports whether the webhook subscription w may still receive
// events of type e, judged from the claims it recorded when it was
// granted (or last refreshed) and its arguments: e's access rule admits
// them (Access.Admits). The webhook delivery calls it before each
// delivery; when it is false the subscription is ended as for a deleted
// type: a signed {"type":"terminated"} envelope, best effort, and the
// record deleted. An e without access permits every subscription.
func (w *WebhookSubscription) Permitted(e *EventItem) bool {
	return e.Access.Admits(w.Claims, w.Arguments)
}

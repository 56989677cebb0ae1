package mcp

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Custom request headers (SEP-2243): a tool's input schema may mark a
// primitive parameter with "x-mcp-header": NAME; a 2026-era client then
// mirrors the argument into the header Mcp-Param-NAME, so that
// intermediaries can route on it, and the server checks that the header
// says what the body says: present exactly when the argument is (and not
// null), equal to its string form ("true"/"false" for booleans, the JSON
// number for numbers), Base64-decoded when sent as =?base64?...?= (which
// must then be valid, padded Base64).

const base64Prefix, base64Suffix = "=?base64?", "?="

// headerParams returns the parameters of a tool's input schema that carry
// x-mcp-header, by parameter name.
func headerParams(schema any) map[string]string {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil
	}
	var s struct {
		Properties map[string]struct {
			Header *string `json:"x-mcp-header"`
		} `json:"properties"`
	}
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	var out map[string]string
	for name, p := range s.Properties {
		if p.Header != nil && *p.Header != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = *p.Header
		}
	}
	return out
}

// checkParamHeaders checks the Mcp-Param-* headers of a tools/call against
// its arguments, and returns what is wrong ("" when nothing is).
func (s *Server) checkParamHeaders(r *http.Request, params json.RawMessage) string {
	var p struct {
		Name      string                     `json:"name"`
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "" // dispatch reports bad params
	}
	s.mu.RLock()
	t := s.tools[p.Name]
	s.mu.RUnlock()
	if t == nil {
		return ""
	}
	for param, header := range headerParams(t.tool.InputSchema) {
		key := "Mcp-Param-" + header
		values, sent := r.Header[http.CanonicalHeaderKey(key)]
		raw, given := p.Arguments[param]
		if given && string(raw) == "null" {
			given = false
		}
		switch {
		case !given && !sent:
			continue
		case !given:
			return key + " is sent but the argument " + param + " is not"
		case !sent:
			return key + " is required: the argument " + param + " is in the body"
		case len(values) != 1:
			return key + " is sent more than once"
		}
		got := strings.TrimSpace(values[0])
		if strings.HasPrefix(got, base64Prefix) && strings.HasSuffix(got, base64Suffix) && len(got) >= len(base64Prefix)+len(base64Suffix) {
			b, err := base64.StdEncoding.Strict().DecodeString(got[len(base64Prefix) : len(got)-len(base64Suffix)])
			if err != nil {
				return key + " is not valid Base64 inside =?base64?...?=: " + err.Error()
			}
			got = string(b)
		}
		want, ok := headerForm(raw)
		if !ok {
			return "the argument " + param + " (mirrored in " + key + ") must be a string, number or boolean"
		}
		if got != want {
			return key + " differs from the argument " + param
		}
	}
	return ""
}

// headerForm is the string an argument's header carries.
func headerForm(raw json.RawMessage) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		return strings.TrimSpace(string(raw)), true
	}
	return "", false
}

package oauth

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// WellKnownPath is the path of the protected resource metadata (RFC 9728
// §3); a resource with a path has it appended ("/mcp": WellKnownPath +
// "/mcp"). A server serves MetadataHandler at both.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// ResourceMetadata is the protected resource metadata (RFC 9728 §2).
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// Metadata returns the protected resource metadata for r's resource.
func (v *Validator) Metadata(r *http.Request) ResourceMetadata {
	return ResourceMetadata{
		Resource:               v.resource(r),
		AuthorizationServers:   []string{v.opts.Issuer},
		ScopesSupported:        v.opts.Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           v.opts.ResourceName,
	}
}

// MetadataHandler serves the protected resource metadata as JSON to GET
// (any origin may read it, as browser-based clients must, and a preflight
// may ask for the MCP-Protocol-Version header, which MCP clients send).
func (v *Validator) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodOptions:
			w.Header().Set("Access-Control-Allow-Methods", "GET")
			// MCP clients send their protocol version with discovery.
			w.Header().Set("Access-Control-Allow-Headers", "MCP-Protocol-Version")
			w.Header().Set("Access-Control-Max-Age", "3600")
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		b, _ := json.Marshal(v.Metadata(r))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		w.Write(b)
	})
}

// resource is the resource URL of requests to r's server: the configured
// one, or https://{Host}{ResourcePath}.
func (v *Validator) resource(r *http.Request) string {
	if v.opts.Resource != "" {
		return v.opts.Resource
	}
	return "https://" + strings.ToLower(r.Host) + v.opts.ResourcePath
}

// MetadataURL returns the URL of the protected resource metadata of
// resource, by path insertion: https://h/mcp has
// https://h/.well-known/oauth-protected-resource/mcp.
func MetadataURL(resource string) string { return metadataURL(resource) }

func metadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host + WellKnownPath + strings.TrimSuffix(u.EscapedPath(), "/")
}

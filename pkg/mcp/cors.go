package mcp

import (
	"net/http"
	"strings"
)

// CORS (the Fetch standard's cross-origin protocol) for the origins of
// StreamableOptions.AllowedOrigins: a page on such an origin may call the
// server directly with fetch. The origins that a LocalhostOnly server
// accepts without being listed get no CORS headers: their requests are
// served, but a browser does not let their pages read the answers or
// send a preflighted request (a JSON POST), so a page on localhost has to
// be listed to call the server. Other origins are refused with 403 before
// any of this (checkOrigin).
//
// No Access-Control-Allow-Credentials: bearer tokens travel in the
// Authorization header, which a page sets itself; mcpush uses no cookies.

// corsMethods are the methods a preflight allows.
const corsMethods = "GET, POST, DELETE, OPTIONS"

// corsHeaders are the request headers a preflight allows, besides the
// Mcp-Param-* headers of tool parameters marked x-mcp-header
// (customheaders.go), which are allowed as the preflight names them.
var corsHeaders = []string{
	"Content-Type", "Accept", "Authorization", "Mcp-Session-Id", "Mcp-Protocol-Version",
	"Last-Event-ID", "Mcp-Method", "Mcp-Name",
}

// corsExposed are the response headers a page may read besides the
// CORS-safelisted ones (Content-Type among them).
const corsExposed = "Mcp-Session-Id, WWW-Authenticate, Retry-After"

// corsMaxAge is how long (seconds) a browser may cache a preflight's
// answer; browsers cap it (Chromium at 2 hours).
const corsMaxAge = "3600"

// paramHeaderPrefix starts the custom headers of SEP-2243, lower-cased.
const paramHeaderPrefix = "mcp-param-"

// corsOrigin reports whether r comes from a listed origin, which gets CORS
// headers. Every response of a handler with AllowedOrigins says Vary:
// Origin, since whether it carries them depends on that header.
func (h *StreamableHandler) corsOrigin(w http.ResponseWriter, r *http.Request) (string, bool) {
	if len(h.opts.AllowedOrigins) == 0 {
		return "", false
	}
	w.Header().Add("Vary", "Origin")
	origins := r.Header.Values("Origin")
	if len(origins) != 1 || origins[0] == "" {
		return "", false
	}
	o := origins[0]
	if !contains(h.opts.AllowedOrigins, "*") && !contains(h.opts.AllowedOrigins, o) {
		return "", false
	}
	return o, true
}

// setCORS adds the CORS headers of an actual (not preflight) request from
// a listed origin: the origin itself (never "*", so that listing an
// origin is what lets it in) and the headers its page may read. It
// reports whether it added them.
func (h *StreamableHandler) setCORS(w http.ResponseWriter, r *http.Request) bool {
	origin, ok := h.corsOrigin(w, r)
	if !ok {
		return false
	}
	w.Header().Set("Access-Control-Allow-Origin", origin)
	w.Header().Set("Access-Control-Expose-Headers", corsExposed)
	return true
}

// servePreflight answers an OPTIONS request, which checkOrigin has let
// through: 204 with the allowed methods and headers when it is a
// preflight from a listed origin (cors: setCORS added its headers), a
// plain 204 with Allow otherwise (a browser then refuses the request it
// asked about). The answer depends on
// nothing but the request's headers, costs no store request and is not
// rate-limited.
func servePreflight(w http.ResponseWriter, r *http.Request, cors bool) {
	w.Header().Set("Allow", corsMethods)
	if cors && r.Header.Get("Access-Control-Request-Method") != "" {
		w.Header().Set("Access-Control-Allow-Methods", corsMethods)
		w.Header().Set("Access-Control-Allow-Headers", allowedRequestHeaders(r.Header.Values("Access-Control-Request-Headers")))
		w.Header().Set("Access-Control-Max-Age", corsMaxAge)
		w.Header().Del("Access-Control-Expose-Headers") // for actual responses only
	}
	w.WriteHeader(http.StatusNoContent)
}

// allowedRequestHeaders is the Access-Control-Allow-Headers value of a
// preflight: corsHeaders and those of the requested headers that are
// Mcp-Param-* headers (valid header names, each named once). A browser
// refuses the request when a header it asked about is missing. The
// answer grows only with what the preflight itself sent, whose size the
// HTTP server bounds.
func allowedRequestHeaders(requested []string) string {
	out := strings.Join(corsHeaders, ", ")
	seen := map[string]bool{}
	for _, list := range requested {
		for _, name := range strings.Split(list, ",") {
			name = strings.ToLower(strings.TrimSpace(name))
			if !strings.HasPrefix(name, paramHeaderPrefix) || len(name) == len(paramHeaderPrefix) || !isToken(name) || seen[name] {
				continue
			}
			seen[name] = true
			out += ", " + name
		}
	}
	return out
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2), the
// syntax of a header name.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return s != ""
}

// Package oauth makes an MCP server an OAuth 2.1 resource server, as the
// MCP authorization specification (2025-11-25 and 2026-07-28) asks.
//
// A Validator checks the bearer access tokens (JWTs, RFC 9068) that an
// authorization server issues for the server's resource URL: the
// signature against the authorization server's JWKS (asymmetric
// algorithms only: never "none", never an HMAC), the issuer exactly, the
// audience (RFC 8707: the resource URL, or a configured audience), the
// expiry (required) and not-before/issued-at with a small leeway, and the
// scopes every request needs. The token is read from the Authorization
// header only. Its principal, issuer#subject, is what pkg/mcp binds
// sessions, streams and quotas to: Validator implements mcp.Authenticator.
//
// The authorization server is found from its issuer URL (RFC 8414
// metadata with path insertion, falling back to OpenID Connect
// discovery) the first time a token is checked, and read again on a
// schedule (Options.MetadataRefresh) and when a token names an unknown
// key. Its keys are cached as long as the JWKS response's Cache-Control
// (or Expires) allows, and fetched again when a token names a key id the
// cache does not know, so that key rotation takes effect within seconds.
// One fetch is in flight per Validator at a time (single flight), bounded
// by Options.FetchTimeout and cancelled by no request; the next starts no
// sooner than Options.RefreshInterval after it ended, so a flood of
// tokens with made-up key ids costs at most one JWKS fetch per interval.
// Keys past their expiry keep serving while a refresh runs or fails, for
// up to Options.MaxStale (stale while revalidate); a request without a
// usable key waits for the fetch at most Options.KeyWait, then gets
// mcp.ErrAuthUnavailable (503 with Retry-After), not a 401, whose text
// names the kind of failure and no URL. Redirects are followed only to
// URLs the issuer could have itself (https, or http on a loopback host).
//
// MetadataHandler serves the Protected Resource Metadata (RFC 9728) that
// clients discover from the WWW-Authenticate challenge of a 401.
//
// Amazon Cognito's access tokens from the client-credentials grant carry
// no "aud" claim. Options.ClientIDs accepts audience-less tokens whose
// "client_id" is one of the listed app clients; with Options.Scopes set
// to a custom scope of the Cognito resource server that stands for this
// MCP server ("mcpush/mcp"), such a token is bound to this resource by
// its scope and its client. Cognito's resource indicators (the
// "resource" parameter of the authorization-code grant, Essentials and
// Plus tiers) put the resource URL in "aud", which the audience check
// accepts as for any other authorization server.
package oauth

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
// discovery) the first time a token is checked. Its keys are cached as
// long as the JWKS response's Cache-Control (or Expires) allows, and
// fetched again when a token names a key id the cache does not know, so
// that key rotation takes effect within seconds; such refetches happen at
// most once per Options.RefreshInterval, so a flood of tokens with made-up
// key ids costs at most one JWKS fetch per interval. A failure to fetch
// the metadata or the keys is mcp.ErrAuthUnavailable (503 with
// Retry-After), not a 401.
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

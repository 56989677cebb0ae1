// Package webhook is the delivery core of MCP Events webhooks (SEP-3415's
// webhook mode, ChatGPT's profile): Standard Webhooks secrets, signing and
// verification (with github.com/standard-webhooks/standard-webhooks, never
// hand-written HMAC), the callback-URL policy that stops SSRF, a Sender that
// POSTs one signed message under that policy, the verification handshake,
// the delivery bodies, a retry schedule, and a Receiver (an http.Handler)
// for the other end.
//
// It holds no state: subscriptions, their secrets, the outbox and when to
// retry belong to the caller. It imports nothing of mcpush, so the SNS
// ingest can use it without linking the MCP server.
//
// # Signing
//
// Every POST carries Content-Type application/json, webhook-id (the event's
// eventId, or msg_<type>_<random> for a control envelope),
// webhook-timestamp (Unix seconds, fresh on every attempt),
// webhook-signature ("v1,<base64 HMAC-SHA256>" per secret, space-separated
// while a rotated secret is still honoured) and X-MCP-Subscription-Id.
// Secrets are "whsec_" and the standard base64 of 24 to 64 bytes
// (ParseSecret); a Secret never prints its key.
//
// # SSRF
//
// Policy.CheckURL (subscribe time) accepts an absolute https URL of at most
// 2048 characters with a host, no userinfo and no fragment, and refuses an
// IP-literal host that is not globally routable, localhost, and numeric
// hosts that only inet_aton reads as IPv4 (127.1). The Sender checks again at
// every connection: it resolves the host with Policy.Resolver, keeps only
// the addresses Routable accepts (the IANA IPv4 and IPv6 special-purpose
// registries: loopback, 0/8, private, 100.64/10, link-local and
// 169.254.169.254, 192.0.0/24, documentation, benchmarking, multicast,
// 240/4, ::, ::1, fc00::/7, fe80::/10, ff00::/8, 100::/64, 2001::/23,
// 2001:db8::/32; IPv4-mapped, NAT64 and 6to4 addresses judged by their IPv4
// address), and dials that address, so DNS rebinding between subscribe and
// delivery is refused. The Host header and TLS SNI keep the URL's name.
// Redirects are not followed; there is a timeout (5 s) and a body bound
// (256 KiB). Origins listed in Policy.Allow (MCPUSH_WEBHOOK_ALLOW, such as
// http://127.0.0.1:9000, scheme, host and port matched exactly) are exempt
// from the https and address checks; nothing else is.
//
// # Verification
//
// Verify runs the challenge handshake. ReceiverDocument is SEP-3415's
// other self-serve way: the callback's origin publishes
// /.well-known/mcp-webhook-receiver.json listing the path prefixes that
// accept deliveries, fetched with a GET under the same checks as a
// delivery.
//
// # Outcomes
//
// Send and Verify return an Outcome: the status, a category for a failure
// (SEP-3415's connection_refused, timeout, tls_error, http_4xx, http_5xx,
// challenge_failed, or the internal http_3xx, blocked_address,
// body_too_large and invalid_message, which WireCategory maps to SEP
// values), and whether to retry (not after a 2xx, 410, 413, a blocked
// address, an oversized body, an invalid message or a failed challenge).
// Retry.Next gives the backoff schedule.
//
// # Receiving
//
// Receiver is the other end, for tests, local tools (mcpush events receive)
// and gateways: it verifies each delivery with the standard-webhooks
// library within a 5-minute window, answers verification envelopes, and
// deduplicates on (X-MCP-Subscription-Id, webhook-id).
package webhook

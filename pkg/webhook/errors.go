package webhook

import "errors"

// Sentinel errors. Callers test them with errors.Is; every error this
// package returns for refused input wraps one of them.
var (
	// ErrInvalidSecret: a value that is not a Standard Webhooks symmetric
	// secret ("whsec_" and the standard base64 of 24 to 64 bytes). An
	// events/subscribe server maps it to JSON-RPC -32602 (InvalidParams).
	ErrInvalidSecret = errors.New("webhook: invalid secret")
	// ErrInvalidURL: a callback URL refused by Policy.CheckURL (not https
	// and not an allowed origin, userinfo, a fragment, too long, no host,
	// or an address literal that is not globally routable). It maps to
	// JSON-RPC -32602 (InvalidParams).
	ErrInvalidURL = errors.New("webhook: invalid callback URL")
	// ErrInvalidAllow: a malformed MCPUSH_WEBHOOK_ALLOW value.
	ErrInvalidAllow = errors.New("webhook: invalid MCPUSH_WEBHOOK_ALLOW")
	// ErrBlockedAddress: the callback's host is, or resolves only to,
	// addresses that are not globally routable (IANA special-purpose
	// registries), and its origin is not allowed.
	ErrBlockedAddress = errors.New("webhook: callback address not globally routable")
	// ErrBodyTooLarge: a message body over Policy.MaxBody; it is not sent.
	ErrBodyTooLarge = errors.New("webhook: body too large")
	// ErrInvalidMessage: a Message that cannot be sent as is (no id, no
	// secret, a header value with control characters).
	ErrInvalidMessage = errors.New("webhook: invalid message")
	// ErrGone, returned by a Receiver's Handle, answers 410 Gone: the
	// sender does not retry the delivery.
	ErrGone = errors.New("webhook: delivery refused for good")
)

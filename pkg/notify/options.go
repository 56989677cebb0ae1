package notify

import (
	"fmt"
	"time"
)

// Defaults for StoreOptions.
const (
	DefaultEventTTL      = 24 * time.Hour
	DefaultTopicEventTTL = 7 * 24 * time.Hour
)

// StoreOptions are the options every Store implementation takes (each
// names them Options). The zero value (or a nil *StoreOptions) gives the
// defaults.
type StoreOptions struct {
	// Now returns the current time. It decides session expiry and the
	// expiry of stored records. Nil means time.Now.
	Now func() time.Time
	// EventTTL is how long stream-log events, mailbox messages and
	// idempotency keys (of Append and of ApplyRegistry) are kept.
	// Zero means DefaultEventTTL.
	EventTTL time.Duration
	// TopicEventTTL is how long topic events, with the message ids that
	// make AppendTopicEvent idempotent, are kept. Zero means
	// DefaultTopicEventTTL.
	TopicEventTTL time.Duration
}

// WithDefaults returns a copy of o (nil: the zero value) with every unset
// field set to its default.
func (o *StoreOptions) WithDefaults() StoreOptions {
	var out StoreOptions
	if o != nil {
		out = *o
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	if out.EventTTL <= 0 {
		out.EventTTL = DefaultEventTTL
	}
	if out.TopicEventTTL <= 0 {
		out.TopicEventTTL = DefaultTopicEventTTL
	}
	return out
}

// CheckSession validates the fields of sess that CreateSession and
// UpdateSession write, the same way for every implementation: an empty id
// or a zero ExpiresAt is ErrInvalid; client info and capabilities over
// MaxItemBytes together are ErrTooLarge.
func CheckSession(sess *Session) error {
	switch {
	case sess == nil:
		return fmt.Errorf("%w: nil session", ErrInvalid)
	case sess.ID == "":
		return fmt.Errorf("%w: empty session id", ErrInvalid)
	case sess.ExpiresAt.IsZero():
		return fmt.Errorf("%w: zero ExpiresAt", ErrInvalid)
	}
	if n := len(sess.ClientInfo) + len(sess.ClientCapabilities); n > MaxItemBytes {
		return fmt.Errorf("%w: client info and capabilities is %d bytes, limit %d", ErrTooLarge, n, MaxItemBytes)
	}
	return nil
}

// CheckTopicEvent validates the arguments of Store.AppendTopicEvent the
// same way for every implementation: an empty topic or message id is
// ErrInvalid, data over MaxItemBytes ErrTooLarge.
func CheckTopicEvent(topic, messageID string, data []byte) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w: empty topic", ErrInvalid)
	case messageID == "":
		return fmt.Errorf("%w: empty message id", ErrInvalid)
	case len(data) > MaxItemBytes:
		return fmt.Errorf("%w: topic event is %d bytes, limit %d", ErrTooLarge, len(data), MaxItemBytes)
	}
	return nil
}

// CheckMessage validates the arguments of Store.PutMessage (and, with nil
// data, GetMessage) the same way for every implementation: an empty
// session id or key is ErrInvalid, data over MaxItemBytes ErrTooLarge.
func CheckMessage(sessionID, key string, data []byte) error {
	switch {
	case sessionID == "":
		return fmt.Errorf("%w: empty session id", ErrInvalid)
	case key == "":
		return fmt.Errorf("%w: empty message key", ErrInvalid)
	case len(data) > MaxItemBytes:
		return fmt.Errorf("%w: message is %d bytes, limit %d", ErrTooLarge, len(data), MaxItemBytes)
	}
	return nil
}

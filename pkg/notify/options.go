package notify

import (
	"encoding/json"
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
// or a zero ExpiresAt is ErrInvalid; client info, capabilities and the
// listen state's strings over MaxItemBytes together are ErrTooLarge.
func CheckSession(sess *Session) error {
	switch {
	case sess == nil:
		return fmt.Errorf("%w: nil session", ErrInvalid)
	case sess.ID == "":
		return fmt.Errorf("%w: empty session id", ErrInvalid)
	case sess.ExpiresAt.IsZero():
		return fmt.Errorf("%w: zero ExpiresAt", ErrInvalid)
	}
	if n := len(sess.ClientInfo) + len(sess.ClientCapabilities) + sess.Listen.size(); n > MaxItemBytes {
		return fmt.Errorf("%w: client info, capabilities and listen state are %d bytes, limit %d", ErrTooLarge, n, MaxItemBytes)
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

// CheckRead validates the arguments of Store.ReadEvents: an empty session
// or stream id, or a limit below 1, is ErrInvalid.
func CheckRead(sessionID, streamID string, limit int) error {
	switch {
	case sessionID == "":
		return fmt.Errorf("%w: empty session id", ErrInvalid)
	case streamID == "":
		return fmt.Errorf("%w: empty stream id", ErrInvalid)
	case limit < 1:
		return fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	}
	return nil
}

// CheckTopicRead validates the arguments of Store.ReadTopicEvents: an
// empty topic or a limit below 1 is ErrInvalid.
func CheckTopicRead(topic string, limit int) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w: empty topic", ErrInvalid)
	case limit < 1:
		return fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	}
	return nil
}

// CheckRegistryChange validates the arguments of Store.ApplyRegistry the
// same way for every implementation: an unknown kind or op, an empty
// message id or item key, or (for put and replace) an item that is not
// valid JSON is ErrInvalid.
func CheckRegistryChange(kind, op string, items map[string]json.RawMessage, messageID string) error {
	if !ValidRegistry(kind) {
		return fmt.Errorf("%w: registry kind %q", ErrInvalid, kind)
	}
	switch op {
	case OpPut, OpReplace, OpDelete:
	default:
		return fmt.Errorf("%w: registry op %q", ErrInvalid, op)
	}
	if messageID == "" {
		return fmt.Errorf("%w: empty message id", ErrInvalid)
	}
	for k, v := range items {
		if k == "" {
			return fmt.Errorf("%w: empty registry item key", ErrInvalid)
		}
		if op != OpDelete && !json.Valid(v) {
			return fmt.Errorf("%w: item %q is not valid JSON", ErrInvalid, k)
		}
	}
	return nil
}

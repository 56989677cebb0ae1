package notify

import "context"

// TopicHeads reads the head of one topic's log without listing every
// topic: what an events/poll that starts from now, or that read nothing
// new, needs. Both stores implement it; it is a capability beside Store
// that mcp.Store requires. Safe for concurrent use by many processes.
type TopicHeads interface {
	// TopicHead returns the Seq of the last event ever appended to
	// topic (Topic.LastSeq), 0 when it has none: one read. An empty
	// topic is ErrInvalid.
	TopicHead(ctx context.Context, topic string) (int64, error)
}

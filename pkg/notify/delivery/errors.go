package delivery

import "errors"

// Sentinel errors.
var (
	// ErrInvalidTask: a queue message that is not a task (bad JSON, an
	// unknown kind, a field over its bound). Not retried: the message
	// goes to the queue's dead-letter queue.
	ErrInvalidTask = errors.New("delivery: invalid task")
	// ErrOptions: New or NewPool without what they need.
	ErrOptions = errors.New("delivery: missing options")
)

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
	// ErrBusy: an operator's change (Admin) refused because a process
	// holds the subscription's delivery lease; retry after it ends (the
	// error says when).
	ErrBusy = errors.New("delivery: subscription being delivered")
	// ErrAdminInput: an operator's request (Admin) with a bad argument
	// (an empty topic or id, a cursor of another subscription, a time
	// in the future); nothing changed.
	ErrAdminInput = errors.New("delivery: invalid admin request")
)

// errScanBound stops a walk of Admin at MaxAdminScan records (List and
// Counts answer partial).
var errScanBound = errors.New("delivery: admin scan bound")

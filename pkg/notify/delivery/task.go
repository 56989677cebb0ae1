package delivery

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Kind says what a Task does.
type Kind string

// Task kinds.
const (
	// KindFanOut: read a page of a topic's subscriptions and enqueue a
	// KindSubscription task for each that is behind Task.Seq.
	KindFanOut Kind = "fanout"
	// KindSubscription: deliver to one subscription what follows its
	// watermark.
	KindSubscription Kind = "subscription"
	// KindRecheck: the events registry changed: enqueue a checking
	// fan-out (Task.Check) of every topic, so that subscriptions whose
	// type is gone or whose recorded claims its access rule no longer
	// admits are ended now, not at their next event.
	KindRecheck Kind = "recheck"
)

// Bounds of a task's fields (a queue message is input like any other).
const (
	maxTaskBytes = 8 << 10
	maxIDBytes   = 128
	maxAfter     = 2048
	// MaxDelay is the longest delay a Task may carry: SQS's DelaySeconds
	// bound (15 min).
	MaxDelay = 15 * time.Minute
)

// Task is one unit of delivery work: a queue message. Tasks are
// idempotent: running one twice, or one that another process already ran,
// is harmless, because the subscription records decide what is sent.
type Task struct {
	Kind  Kind   `json:"k"`
	Topic string `json:"t,omitempty"`
	// Seq is the topic head the task was made for: a fan-out looks for
	// subscriptions behind it; a subscription task with nothing pending
	// below it does nothing.
	Seq int64 `json:"s,omitempty"`
	// After is a fan-out's page cursor ("" for the first page).
	After string `json:"a,omitempty"`
	// ID is a subscription task's subscription.
	ID string `json:"i,omitempty"`
	// Defer counts how often the task was put back because its
	// destination was busy (it lengthens the next delay).
	Defer int `json:"d,omitempty"`
	// Retry marks a subscription task made for a retry that is due at
	// its delay: arriving early (another process's clock, a queue's
	// rounding), it waits again rather than being dropped.
	Retry bool `json:"r,omitempty"`
	// Check: a fan-out makes a task for every subscription, and a
	// subscription task checks the subscription against the events
	// registry (read afresh) even when nothing is due.
	Check bool `json:"c,omitempty"`

	// Delay: not before this long after Enqueue (at most MaxDelay).
	Delay time.Duration `json:"-"`

	// Hints an in-process queue keeps (a queue message drops them): the
	// subscription record as the fan-out read it, the event just
	// appended.
	sub   *notify.WebhookSubscription
	event *notify.TopicEvent
}

// FanOut returns the task that delivers ev, just appended to its topic,
// to the topic's subscriptions: what an ingest enqueues.
func FanOut(ev *notify.TopicEvent) Task {
	return Task{Kind: KindFanOut, Topic: ev.Topic, Seq: ev.Seq, event: ev}
}

// Recheck returns the task that checks every subscription against the
// events registry: what an ingest enqueues after a change to it.
func Recheck() Task { return Task{Kind: KindRecheck} }

// key identifies the work of t for coalescing: two tasks with one key do
// the same work.
func (t *Task) key() string {
	switch t.Kind {
	case KindSubscription:
		return "s\x00" + t.Topic + "\x00" + t.ID
	case KindRecheck:
		return "r"
	}
	return "f\x00" + t.Topic + "\x00" + t.After
}

// check validates t.
func (t *Task) check() error {
	switch {
	case t.Kind == KindRecheck:
		return nil
	case t.Kind != KindFanOut && t.Kind != KindSubscription:
		return fmt.Errorf("%w: kind %q", ErrInvalidTask, t.Kind)
	case t.Topic == "" || len(t.Topic) > notify.MaxEventNameLen:
		return fmt.Errorf("%w: topic of %d bytes (1 to %d)", ErrInvalidTask, len(t.Topic), notify.MaxEventNameLen)
	case t.Kind == KindSubscription && (t.ID == "" || len(t.ID) > maxIDBytes):
		return fmt.Errorf("%w: subscription id of %d bytes (1 to %d)", ErrInvalidTask, len(t.ID), maxIDBytes)
	case len(t.After) > maxAfter:
		return fmt.Errorf("%w: page cursor over %d bytes", ErrInvalidTask, maxAfter)
	case t.Seq < 0 || t.Defer < 0:
		return fmt.Errorf("%w: negative seq or defer count", ErrInvalidTask)
	}
	return nil
}

// MarshalTask encodes t as a queue message body.
func MarshalTask(t Task) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	return json.Marshal(t)
}

// ParseTask decodes a queue message body; errors wrap ErrInvalidTask.
func ParseTask(b []byte) (Task, error) {
	var t Task
	if len(b) > maxTaskBytes {
		return t, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidTask, len(b), maxTaskBytes)
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return Task{}, fmt.Errorf("%w: %v", ErrInvalidTask, err)
	}
	if err := t.check(); err != nil {
		return Task{}, err
	}
	return t, nil
}

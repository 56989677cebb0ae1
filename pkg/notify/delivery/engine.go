package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// Queue takes tasks to run later, on any process: [SQSQueue], [Pool]. It
// may lose or repeat a task (the store repairs both). Enqueue is safe for
// concurrent use.
type Queue interface {
	Enqueue(ctx context.Context, tasks ...Task) error
}

// Store is what delivery uses of the store; both stores implement it.
// Its webhook methods are a part of [notify.WebhookStore], which
// documents them.
type Store interface {
	TopicWebhooks(ctx context.Context, topic, after string, limit int) ([]*notify.WebhookSubscription, string, error)
	UpdateWebhook(ctx context.Context, w *notify.WebhookSubscription) error
	GetWebhook(ctx context.Context, topic, id string) (*notify.WebhookSubscription, error)
	DeleteWebhook(ctx context.Context, w *notify.WebhookSubscription) error
	ReadTopicEvents(ctx context.Context, topic string, after int64, limit int) ([]notify.TopicEvent, error)
	Topics(ctx context.Context) ([]notify.Topic, error)
	RegistryHashes(ctx context.Context) (map[string]string, error)
}

// Defaults of Options.
const (
	DefaultSuspendAfter = time.Hour
	// DefaultSweepAge: Sweep looks at topics with an event this recent
	// (longer than the longest TTL grant, so that a subscription
	// reactivated by a refresh finds its pending events swept).
	DefaultSweepAge = 25 * time.Hour
	// DefaultPerOrigin bounds the attempts in flight to one callback
	// origin from one process.
	DefaultPerOrigin = 8
	// DefaultMaxBatch bounds the attempts of one subscription task; the
	// rest is put back on the queue, behind other subscriptions' work.
	DefaultMaxBatch = 100
	// leaseMargin is what a claim keeps beyond an attempt's timeout,
	// for clock skew between processes and the store write after it.
	leaseMargin = 5 * time.Second
	// maxUnsaved bounds the attempts a claim makes between two writes
	// of its watermark: what a crash can repeat.
	maxUnsaved = 16
	// readBatch is the events read from a topic's log at once.
	readBatch = 25
)

// Options configure an Engine. Store, Queue, Sender, Sealer and CursorKey
// are required.
type Options struct {
	Store Store
	// Queue takes the tasks the engine makes: next pages, subscription
	// tasks, delayed retries.
	Queue  Queue
	Sender *webhook.Sender
	// Sealer opens the subscriptions' secrets (notify.WebhookSealLabel,
	// under the state keys).
	Sealer *notify.Sealer
	// CursorKey signs the cursor of each payload (the first state key).
	CursorKey []byte
	// EventTypes returns the events registry's items by name (the
	// subscriptions' event types); nil reads nothing and ends nothing.
	EventTypes func(ctx context.Context) (map[string]*notify.EventItem, error)
	// TypesTTL is how long one read of EventTypes serves: a type removed
	// ends its subscriptions at most this long after. Default 1 s;
	// negative: every task reads.
	TypesTTL time.Duration
	// Retry is the schedule of failed attempts (zero: webhook.DefaultDelays).
	Retry webhook.Retry
	// SuspendAfter: a subscription whose deliveries have failed for this
	// long, with none accepted since, is suspended. Default
	// DefaultSuspendAfter.
	SuspendAfter time.Duration
	// Lease is how long a claim holds a subscription. Default: the
	// Sender's timeout and 10 s. At least the timeout and 5 s.
	Lease time.Duration
	// SweepAge: Sweep looks at topics with an event this recent.
	// Default DefaultSweepAge.
	SweepAge time.Duration
	// PerOrigin bounds the attempts in flight per callback origin in
	// this process. Default DefaultPerOrigin.
	PerOrigin int
	// MaxBatch bounds the attempts of one subscription task. Default
	// DefaultMaxBatch.
	MaxBatch int
	// EventsErrors is MCPUSH_EVENTS_ERRORS, the numbering of the codes
	// of the terminated envelopes ("chatgpt" or SEP-3415's, the
	// default).
	EventsErrors string
	// Page is how many subscriptions one fan-out task reads (1 to
	// notify.MaxWebhookPage, the default).
	Page   int
	Now    func() time.Time
	Logger *slog.Logger
}

// Engine runs delivery tasks. Safe for concurrent use.
type Engine struct {
	o       Options
	timeout time.Duration // the Sender's
	origins *origins
	// park: tasks for a busy origin wait in this process (the queue is
	// a Pool, which lives as long as the engine).
	park  bool
	cache typeCache
}

// New returns an Engine under o.
func New(o Options) (*Engine, error) {
	if o.Store == nil || o.Queue == nil || o.Sender == nil || o.Sealer == nil || len(o.CursorKey) == 0 {
		return nil, fmt.Errorf("%w: an engine needs a store, a queue, a sender, a sealer and a cursor key", ErrOptions)
	}
	timeout := o.Sender.Policy().Timeout
	if timeout <= 0 {
		timeout = webhook.DefaultTimeout
	}
	if o.SuspendAfter <= 0 {
		o.SuspendAfter = DefaultSuspendAfter
	}
	if o.Lease <= 0 {
		o.Lease = timeout + 10*time.Second
	}
	o.Lease = max(o.Lease, timeout+leaseMargin)
	if o.SweepAge <= 0 {
		o.SweepAge = DefaultSweepAge
	}
	if o.TypesTTL == 0 {
		o.TypesTTL = time.Second
	}
	if o.PerOrigin <= 0 {
		o.PerOrigin = DefaultPerOrigin
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Page <= 0 || o.Page > notify.MaxWebhookPage {
		o.Page = notify.MaxWebhookPage
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	_, park := o.Queue.(*Pool)
	return &Engine{o: o, timeout: timeout, origins: newOrigins(o.PerOrigin), park: park}, nil
}

// Counts count what tasks did. The fields are updated atomically.
type Counts struct {
	Subscriptions int64 `json:"subscriptions"`      // looked at by fan-outs
	Enqueued      int64 `json:"enqueued"`           // subscription tasks made by fan-outs
	Claimed       int64 `json:"claimed"`            // claims taken
	Delivered     int64 `json:"delivered"`          // events accepted (2xx)
	Abandoned     int64 `json:"abandoned"`          // events given up
	Failed        int64 `json:"failed"`             // attempts to retry later
	Refused       int64 `json:"refused,omitempty"`  // attempts refused by this process's webhook policy
	Deferred      int64 `json:"deferred,omitempty"` // tasks put back: their origin was busy
	Gaps          int64 `json:"gaps,omitempty"`     // gap envelopes accepted
}

func (c *Counts) add(o *Counts) {
	atomic.AddInt64(&c.Subscriptions, o.Subscriptions)
	atomic.AddInt64(&c.Enqueued, o.Enqueued)
	atomic.AddInt64(&c.Claimed, o.Claimed)
	atomic.AddInt64(&c.Delivered, o.Delivered)
	atomic.AddInt64(&c.Abandoned, o.Abandoned)
	atomic.AddInt64(&c.Failed, o.Failed)
	atomic.AddInt64(&c.Refused, o.Refused)
	atomic.AddInt64(&c.Deferred, o.Deferred)
	atomic.AddInt64(&c.Gaps, o.Gaps)
}

// Snapshot returns a copy of c read atomically, field by field.
func (c *Counts) Snapshot() Counts {
	return Counts{
		Subscriptions: atomic.LoadInt64(&c.Subscriptions), Enqueued: atomic.LoadInt64(&c.Enqueued),
		Claimed: atomic.LoadInt64(&c.Claimed), Delivered: atomic.LoadInt64(&c.Delivered),
		Abandoned: atomic.LoadInt64(&c.Abandoned), Failed: atomic.LoadInt64(&c.Failed),
		Refused: atomic.LoadInt64(&c.Refused), Deferred: atomic.LoadInt64(&c.Deferred), Gaps: atomic.LoadInt64(&c.Gaps),
	}
}

// Handle runs one task. An error is the store's or the queue's: the task
// may be run again (a queue redelivers it; the sweep repairs otherwise).
// ErrInvalidTask is not worth a retry.
func (e *Engine) Handle(ctx context.Context, t Task) (Counts, error) {
	var c Counts
	if err := t.check(); err != nil {
		return c, err
	}
	switch t.Kind {
	case KindFanOut:
		err := e.fanOut(ctx, t, &c)
		return c, err
	case KindRecheck:
		_, err := e.enqueueTopics(ctx, true)
		return c, err
	}
	err := e.deliver(ctx, t, &c)
	return c, err
}

// Sweep enqueues a fan-out of every topic with an event within SweepAge:
// the repair of tasks a queue lost, of retries whose task was lost, of
// events a crash left behind a watermark. One read of the topics; the
// fan-outs run on the queue's workers, in parallel across topics.
func (e *Engine) Sweep(ctx context.Context) (topics int, err error) {
	return e.enqueueTopics(ctx, false)
}

// enqueueTopics enqueues a fan-out of every topic with an event within
// SweepAge; with check, of every topic, checking every subscription.
func (e *Engine) enqueueTopics(ctx context.Context, check bool) (int, error) {
	all, err := e.o.Store.Topics(ctx)
	if err != nil {
		return 0, err
	}
	since := e.o.Now().Add(-e.o.SweepAge)
	var tasks []Task
	for _, t := range all {
		if t.UpdatedAt.Before(since) && !check {
			continue
		}
		tasks = append(tasks, Task{Kind: KindFanOut, Topic: t.Name, Seq: t.LastSeq, Check: check})
	}
	return len(tasks), e.o.Queue.Enqueue(ctx, tasks...)
}

// fanOut reads one page of t.Topic's subscriptions, enqueues the next
// page, and enqueues a subscription task for each subscription behind
// t.Seq or with a retry due.
func (e *Engine) fanOut(ctx context.Context, t Task, c *Counts) error {
	page, next, err := e.o.Store.TopicWebhooks(ctx, t.Topic, t.After, e.o.Page)
	if err != nil {
		return err
	}
	if t.event == nil && t.Seq > 0 && len(page) > 1 {
		// The event at the head, read once for every subscription
		// task (most are one behind): a task made from a topic head
		// (the watcher, the sweep) has none.
		if evs, err := e.o.Store.ReadTopicEvents(ctx, t.Topic, t.Seq-1, 1); err == nil && len(evs) == 1 && evs[0].Seq == t.Seq {
			t.event = &evs[0]
		}
	}
	var tasks []Task
	if next != "" {
		tasks = append(tasks, Task{Kind: KindFanOut, Topic: t.Topic, Seq: t.Seq, After: next, Check: t.Check, event: t.event})
	}
	now := e.o.Now()
	var active, suspended int
	defer func() {
		if t.After == "" && next == "" {
			// The whole topic in one page: its subscriptions counted.
			// (A sweep of many topics records the last one's; the
			// gauge is a sample, not a sum.)
			metrics.WebhookSubscriptions(ctx, active, suspended)
		}
	}()
	for _, w := range page {
		c.Subscriptions++
		if w.Status.Suspended {
			suspended++
		} else {
			active++
		}
		if !t.Check && !due(w, t.Seq, now) {
			continue
		}
		c.Enqueued++
		tasks = append(tasks, Task{Kind: KindSubscription, Topic: t.Topic, ID: w.ID, Seq: t.Seq, Check: t.Check, sub: w, event: t.event})
	}
	return e.o.Queue.Enqueue(ctx, tasks...)
}

// due reports whether w may have something to deliver up to head (0: the
// head is not known), ignoring a lease (the subscription task waits for
// it).
func due(w *notify.WebhookSubscription, head int64, now time.Time) bool {
	switch {
	case w.Status.Suspended:
		return false
	case w.Retry.Seq != 0 || w.Retry.Gap != 0:
		return !w.Retry.NextAt.After(now)
	case head > 0 && w.Watermark >= head:
		return false
	}
	return true
}

// RegistryEventTypes returns an EventTypes for Options: the items of st's
// events registry (one read per call), those that decode.
func RegistryEventTypes(st interface {
	GetRegistry(ctx context.Context, kind string) (*notify.Registry, error)
}) func(ctx context.Context) (map[string]*notify.EventItem, error) {
	return func(ctx context.Context) (map[string]*notify.EventItem, error) {
		reg, err := st.GetRegistry(ctx, notify.RegistryEvents)
		if err != nil {
			return nil, err
		}
		out := make(map[string]*notify.EventItem, len(reg.Items))
		for name, raw := range reg.Items {
			if e, err := notify.DecodeEventItem(raw); err == nil && e.Name == name {
				out[name] = e
			}
		}
		return out, nil
	}
}

// isConflict reports a lost conditional write.
func isConflict(err error) bool { return errors.Is(err, notify.ErrConflict) }

package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/eventcursor"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// Webhook delivery (the Events extension's events/subscribe): after an
// event is appended to its topic's log, the ingest POSTs it to the
// webhook subscriptions of the topic whose arguments it matches.
//
// The topic's log is the outbox. Each subscription's record holds a
// watermark, the Seq up to which every event is delivered (a 2xx) or
// abandoned (410, 413, a blocked address, or its retries exhausted), and
// the retry state of the event after it. A delivery first claims the
// subscription: an update at its current version that sets a lease
// (LeaseUntil). Of the processes racing to deliver to one subscription
// (two ingests, an ingest and the sweeper) exactly one wins the claim and
// the others leave it alone, so each event reaches each subscription once
// per attempt; the winner delivers what lies after the watermark, in
// order, and writes the new watermark and status as it releases the
// lease. A crash between the append and the POST, or during the POST,
// leaves the watermark behind the log's head (and at worst a lease that
// lapses): the sweeper (Sweep: a scheduled invocation in Lambda, a
// ticker locally) delivers from there. So nothing is lost, and an event
// is delivered twice only when a process dies after the receiver's 2xx
// and before its release (the receiver deduplicates on webhook-id, the
// eventId).
//
// A failed attempt is retried with webhook.Retry's backoff (5 attempts
// within 15 minutes by default); while an event waits for its retry, the
// subscription's later events wait behind it. After 1 h of failures with
// no accepted delivery the subscription is suspended (deliveryStatus
// active: false) until a refresh (events/subscribe) reactivates it; a
// suspended subscription without expiry is ended instead: a signed
// terminated envelope is POSTed (best effort) and the record deleted.

// WebhookStore is what webhook delivery uses of the store; both stores
// implement it.
type WebhookStore interface {
	TopicWebhooks(ctx context.Context, topic, after string, limit int) ([]*notify.WebhookSubscription, string, error)
	UpdateWebhook(ctx context.Context, w *notify.WebhookSubscription) error
	GetWebhook(ctx context.Context, topic, id string) (*notify.WebhookSubscription, error)
	DeleteWebhook(ctx context.Context, w *notify.WebhookSubscription) error
	ReadTopicEvents(ctx context.Context, topic string, after int64, limit int) ([]notify.TopicEvent, error)
	Topics(ctx context.Context) ([]notify.Topic, error)
}

// Defaults of WebhookOptions.
const (
	DefaultWebhookConcurrency = 128
	DefaultSuspendAfter       = time.Hour
	// DefaultSweepAge: Sweep looks at topics with an event this recent
	// (longer than the longest TTL grant, so that a subscription
	// reactivated by a refresh finds its pending events swept).
	DefaultSweepAge = 25 * time.Hour
	// maxDeliverBatch bounds the events one claim delivers.
	maxDeliverBatch = 100
	// webhookPage is the page of a topic's subscriptions read at once.
	webhookPage = 1000
)

// WebhookOptions configure a Webhooks deliverer. Sender, Sealer and
// StateKeys are required.
type WebhookOptions struct {
	Store  WebhookStore
	Sender *webhook.Sender
	// Sealer opens the subscriptions' secrets (notify.WebhookSealLabel,
	// under the state keys).
	Sealer *notify.Sealer
	// CursorKey signs the cursor of each payload (the first state key).
	CursorKey []byte
	// EventTypes returns the events registry's items by name (the
	// subscriptions' event types); nil reads nothing and ends nothing.
	EventTypes func(ctx context.Context) (map[string]*notify.EventItem, error)
	// Retry is the backoff of failed attempts.
	Retry webhook.Retry
	// Concurrency bounds the subscriptions delivered to at once.
	// Default DefaultWebhookConcurrency.
	Concurrency int
	// SuspendAfter: a subscription whose deliveries have failed for this
	// long, with none accepted since, is suspended. Default
	// DefaultSuspendAfter.
	SuspendAfter time.Duration
	// Lease is how long a claim holds a subscription. Default: twice
	// the Sender's timeout and 10 s.
	Lease time.Duration
	// SweepAge: Sweep looks at topics with an event this recent.
	// Default DefaultSweepAge.
	SweepAge time.Duration
	Now      func() time.Time
	Logger   *slog.Logger
}

// Webhooks delivers topic events to webhook subscriptions. Safe for
// concurrent use.
type Webhooks struct {
	o WebhookOptions
}

// NewWebhooks returns a deliverer under o.
func NewWebhooks(o WebhookOptions) (*Webhooks, error) {
	if o.Store == nil || o.Sender == nil || o.Sealer == nil || len(o.CursorKey) == 0 {
		return nil, errors.New("ingest: webhook delivery needs a store, a sender, a sealer and a cursor key")
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultWebhookConcurrency
	}
	if o.SuspendAfter <= 0 {
		o.SuspendAfter = DefaultSuspendAfter
	}
	if o.Lease <= 0 {
		t := o.Sender.Policy().Timeout
		if t <= 0 {
			t = webhook.DefaultTimeout
		}
		o.Lease = 2*t + 10*time.Second
	}
	if o.SweepAge <= 0 {
		o.SweepAge = DefaultSweepAge
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Webhooks{o: o}, nil
}

// DeliveryCounts count what one Deliver or Sweep did.
type DeliveryCounts struct {
	Subscriptions int64 `json:"subscriptions"` // looked at
	Claimed       int64 `json:"claimed"`       // claimed and delivered to
	Delivered     int64 `json:"delivered"`     // events accepted (2xx)
	Abandoned     int64 `json:"abandoned"`     // events given up
	Failed        int64 `json:"failed"`        // attempts to retry later
}

func (c *DeliveryCounts) add(o *DeliveryCounts) {
	atomic.AddInt64(&c.Claimed, o.Claimed)
	atomic.AddInt64(&c.Delivered, o.Delivered)
	atomic.AddInt64(&c.Abandoned, o.Abandoned)
	atomic.AddInt64(&c.Failed, o.Failed)
}

// Deliver delivers ev (just appended to its topic) to the topic's
// webhook subscriptions: the subscriptions are read a page (1,000) at a
// time, and each is delivered to by one of Concurrency workers. It
// returns when every claim is released or ctx ends.
func (wh *Webhooks) Deliver(ctx context.Context, ev *notify.TopicEvent) (DeliveryCounts, error) {
	return wh.deliverTopic(ctx, ev.Topic, ev)
}

// Sweep delivers what is pending, in every topic with an event within
// SweepAge: events a crash left behind a watermark, retries that are due,
// and events a claim race left to it. One read of the topics, then one
// paged read of each such topic's subscriptions.
func (wh *Webhooks) Sweep(ctx context.Context) (DeliveryCounts, error) {
	var total DeliveryCounts
	topics, err := wh.o.Store.Topics(ctx)
	if err != nil {
		return total, err
	}
	since := wh.o.Now().Add(-wh.o.SweepAge)
	var errs []error
	for _, t := range topics {
		if t.UpdatedAt.Before(since) {
			continue
		}
		c, err := wh.deliverTopic(ctx, t.Name, &notify.TopicEvent{Topic: t.Name, Seq: t.LastSeq})
		total.Subscriptions += c.Subscriptions
		total.add(&c)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// deliverTopic delivers to the subscriptions of topic that are behind
// head.Seq (head has data when it is the event just appended).
func (wh *Webhooks) deliverTopic(ctx context.Context, topic string, head *notify.TopicEvent) (DeliveryCounts, error) {
	var (
		counts DeliveryCounts
		wg     sync.WaitGroup
		sem    = make(chan struct{}, wh.o.Concurrency)
		types  map[string]*notify.EventItem
		loaded bool // types read: once, and only for a topic with a due subscription
	)
	after := ""
	var err error
	for {
		var page []*notify.WebhookSubscription
		page, after, err = wh.o.Store.TopicWebhooks(ctx, topic, after, webhookPage)
		if err != nil {
			break
		}
		for _, w := range page {
			counts.Subscriptions++
			if !wh.due(w, head.Seq) {
				continue
			}
			if !loaded && wh.o.EventTypes != nil {
				if types, err = wh.o.EventTypes(ctx); err != nil {
					wg.Wait()
					return counts, err
				}
			}
			loaded = true
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				wg.Wait()
				return counts, ctx.Err()
			}
			wg.Go(func() {
				defer func() { <-sem }()
				var e *notify.EventItem
				if types != nil {
					e = types[w.Name]
				}
				c := wh.deliver(ctx, w, head, e, types != nil)
				counts.add(&c)
			})
		}
		if after == "" {
			break
		}
	}
	wg.Wait()
	return counts, err
}

// due reports whether w may have something to deliver up to head, and
// no other process holds it.
func (wh *Webhooks) due(w *notify.WebhookSubscription, head int64) bool {
	now := wh.o.Now()
	switch {
	case w.Status.Suspended, w.LeaseUntil.After(now), w.Watermark >= head && w.Retry.Seq == 0:
		return false
	case w.Retry.Seq != 0 && w.Retry.NextAt.After(now):
		return false
	}
	return true
}

// deliver claims w and delivers what follows its watermark (hint, the
// event just appended, when it is the next one: no read of the log).
// typeKnown says e was looked up: a nil e then means the event type is
// gone, and the subscription ends.
func (wh *Webhooks) deliver(ctx context.Context, w *notify.WebhookSubscription, hint *notify.TopicEvent, e *notify.EventItem, typeKnown bool) (c DeliveryCounts) {
	log := wh.o.Logger.With("subscription", w.ID, "topic", w.Topic)
	now := wh.o.Now()
	w.LeaseUntil = now.Add(wh.o.Lease)
	if err := wh.o.Store.UpdateWebhook(ctx, w); err != nil {
		if !errors.Is(err, notify.ErrConflict) && !errors.Is(err, notify.ErrNotFound) {
			log.WarnContext(ctx, "webhook claim failed", "err", err)
		}
		return c // another process has it, or it is gone
	}
	c.Claimed = 1
	sec, err := w.OpenSecrets(wh.o.Sealer)
	if err != nil {
		log.ErrorContext(ctx, "webhook secrets do not open (were the state keys changed without keeping the old one?)", "err", err)
		wh.release(ctx, w, log)
		return c
	}
	secrets, err := parseSecrets(sec, now)
	if err != nil {
		log.ErrorContext(ctx, "webhook secrets", "err", err)
		wh.release(ctx, w, log)
		return c
	}
	if typeKnown && (e == nil || e.Topic != w.Topic || !e.Supports(notify.DeliveryWebhook)) {
		wh.terminate(ctx, w, secrets, "the event type was removed or no longer offers webhook delivery", log)
		return c
	}
	var filters map[string]json.RawMessage
	if len(w.Arguments) > 0 {
		if err := json.Unmarshal(w.Arguments, &filters); err != nil {
			log.ErrorContext(ctx, "webhook arguments", "err", err)
		}
	}
	deadline := now.Add(wh.o.Lease / 2)
	sent := 0
	for sent < maxDeliverBatch && wh.o.Now().Before(deadline) && ctx.Err() == nil {
		var evs []notify.TopicEvent
		if hint != nil && hint.Data != nil && hint.Seq == w.Watermark+1 {
			evs = []notify.TopicEvent{*hint}
		} else {
			evs, err = wh.o.Store.ReadTopicEvents(ctx, w.Topic, w.Watermark, 25)
			if err != nil {
				log.WarnContext(ctx, "webhook: reading the topic log", "err", err)
				break
			}
		}
		if len(evs) == 0 {
			break
		}
		if evs[0].Seq > w.Watermark+1 {
			// What followed the watermark left the log (its TTL): say so.
			wh.gap(ctx, w, secrets, evs[0].Seq-1, log)
			w.Watermark = evs[0].Seq - 1
		}
		hint = nil // from now on, the log
		stop := false
		for i := range evs {
			ev := &evs[i]
			if !eventcursor.Matches(filters, ev.Data) {
				w.Watermark = ev.Seq
				continue
			}
			sent++
			if !wh.attempt(ctx, w, ev, secrets, &c, log) {
				stop = true
				break
			}
		}
		if stop || len(evs) < 25 {
			break
		}
	}
	if w.Status.Suspended && w.ExpiresAt.IsZero() {
		wh.terminate(ctx, w, secrets, "delivery failed for over "+wh.o.SuspendAfter.String(), log)
		return c
	}
	wh.release(ctx, w, log)
	return c
}

// attempt POSTs ev to w once and records the outcome in w; false when
// the event waits for a retry (the later ones wait behind it).
func (wh *Webhooks) attempt(ctx context.Context, w *notify.WebhookSubscription, ev *notify.TopicEvent, secrets []webhook.Secret, c *DeliveryCounts, log *slog.Logger) bool {
	id := eventcursor.EventID(w.Name, ev.MessageID)
	cursor := eventcursor.Sign(wh.o.CursorKey, eventcursor.Cursor{Name: w.Name, Topic: w.Topic, Seq: ev.Seq})
	body, err := webhook.EventBody(id, w.Name, ev.ReceivedAt, eventcursor.ObjectData(ev.Data), cursor)
	out := webhook.Outcome{Category: webhook.CategoryInvalidMessage, Err: err}
	if err == nil {
		out = wh.o.Sender.Send(ctx, webhook.Message{ID: id, SubscriptionID: w.ID, URL: w.URL, Body: body, Secrets: secrets})
	}
	now := wh.o.Now()
	if out.OK() {
		c.Delivered++
		w.Watermark, w.Retry = ev.Seq, notify.WebhookRetry{}
		w.Status = notify.WebhookStatus{LastDeliveryAt: now}
		return true
	}
	log.InfoContext(ctx, "webhook delivery failed", "eventId", id, "status", out.Status, "category", out.Category, "retry", out.Retry, "err", out.Err)
	if !out.Retry {
		// 410 (the receiver refuses this event for good), 413 or a body
		// over 256 KiB, a blocked address: the event is abandoned; a 410
		// leaves the subscription's status alone (SEP-3415).
		if out.Status != 410 {
			w.Status.LastError = out.Category
		}
		c.Abandoned++
		w.Watermark = ev.Seq
		w.Retry = notify.WebhookRetry{Abandoned: w.Retry.Abandoned + 1}
		return true
	}
	w.Status.LastError = out.Category
	if w.Status.FailedSince.IsZero() {
		w.Status.FailedSince = now
	}
	if now.Sub(w.Status.FailedSince) >= wh.o.SuspendAfter {
		w.Status.Suspended = true
	}
	if w.Retry.Seq != ev.Seq {
		w.Retry = notify.WebhookRetry{Seq: ev.Seq, FirstAt: now, Abandoned: w.Retry.Abandoned}
	}
	w.Retry.Attempts++
	if w.Status.Suspended {
		// Pending while suspended: retried, its window afresh, after a
		// refresh reactivates the subscription.
		w.Retry.NextAt = now
		c.Failed++
		return false
	}
	if next, again := wh.o.Retry.Next(w.Retry.Attempts, w.Retry.FirstAt, now); again {
		w.Retry.NextAt = next
		c.Failed++
		return false
	}
	c.Abandoned++
	w.Watermark = ev.Seq
	w.Retry = notify.WebhookRetry{Abandoned: w.Retry.Abandoned + 1}
	return true
}

// release writes w's delivery state and drops the lease. When w changed
// meanwhile (a refresh), the delivery state is merged into the fresh
// record.
func (wh *Webhooks) release(ctx context.Context, w *notify.WebhookSubscription, log *slog.Logger) {
	w.LeaseUntil = time.Time{}
	mine := *w
	for range 5 {
		err := wh.o.Store.UpdateWebhook(ctx, w)
		if err == nil || errors.Is(err, notify.ErrNotFound) {
			return
		}
		if !errors.Is(err, notify.ErrConflict) {
			log.WarnContext(ctx, "webhook release failed (the lease lapses)", "err", err)
			return
		}
		fresh, err := wh.o.Store.GetWebhook(ctx, w.Topic, w.ID)
		if err != nil {
			return
		}
		// A refresh changes secrets, expiry and suspension; delivery
		// changes the rest.
		suspended := mine.Status.Suspended && fresh.Status.Suspended == mine.Status.Suspended && !fresh.UpdatedAt.After(mine.UpdatedAt)
		fresh.Watermark = max(fresh.Watermark, mine.Watermark)
		fresh.Retry, fresh.Status, fresh.LeaseUntil = mine.Retry, mine.Status, time.Time{}
		fresh.Status.Suspended = suspended
		w = fresh
	}
}

// terminate ends w: a signed terminated envelope, best effort, and the
// record deleted.
func (wh *Webhooks) terminate(ctx context.Context, w *notify.WebhookSubscription, secrets []webhook.Secret, reason string, log *slog.Logger) {
	body, err := webhook.TerminatedBody(-32023, "NotFound", map[string]string{"reason": reason})
	if err == nil {
		out := wh.o.Sender.Send(ctx, webhook.Message{ID: webhook.ControlID(webhook.ControlTerminated), SubscriptionID: w.ID, URL: w.URL, Body: body, Secrets: secrets})
		log.InfoContext(ctx, "webhook subscription terminated", "reason", reason, "envelopeStatus", out.Status, "category", out.Category)
	}
	if err := wh.o.Store.DeleteWebhook(ctx, w); err != nil && !errors.Is(err, notify.ErrNotFound) {
		log.WarnContext(ctx, "deleting a terminated webhook subscription", "err", err)
	}
}

// gap POSTs a signed gap envelope (best effort): delivery resumes after
// seq, the events between the watermark and it are lost.
func (wh *Webhooks) gap(ctx context.Context, w *notify.WebhookSubscription, secrets []webhook.Secret, seq int64, log *slog.Logger) {
	body, err := webhook.GapBody(eventcursor.Sign(wh.o.CursorKey, eventcursor.Cursor{Name: w.Name, Topic: w.Topic, Seq: seq}))
	if err != nil {
		return
	}
	out := wh.o.Sender.Send(ctx, webhook.Message{ID: webhook.ControlID(webhook.ControlGap), SubscriptionID: w.ID, URL: w.URL, Body: body, Secrets: secrets})
	log.InfoContext(ctx, "webhook gap", "from", w.Watermark, "to", seq, "status", out.Status, "category", out.Category)
}

// parseSecrets returns the secrets that sign now: the current one, and
// the previous one within its grace window.
func parseSecrets(sec notify.WebhookSecrets, now time.Time) ([]webhook.Secret, error) {
	cur, err := webhook.ParseSecret(sec.Current)
	if err != nil {
		return nil, fmt.Errorf("current secret: %w", err)
	}
	out := []webhook.Secret{cur}
	if sec.Previous != "" && sec.PreviousUntil.After(now) {
		if prev, err := webhook.ParseSecret(sec.Previous); err == nil {
			out = append(out, prev)
		}
	}
	return out, nil
}

// RegistryEventTypes returns an EventTypes for WebhookOptions: the items
// of st's events registry (one read per call), those that decode.
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

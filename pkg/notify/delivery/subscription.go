package delivery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/eventcursor"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// claim is one subscription task's hold on a subscription.
type claim struct {
	e       *Engine
	w       *notify.WebhookSubscription
	log     *slog.Logger
	secrets []webhook.Secret
	unsaved int  // attempts since the record was last written
	stopped bool // the task ran out of time (ctx, its deadline) with work left
}

// deliver runs a subscription task: claim, deliver in order, release.
func (e *Engine) deliver(ctx context.Context, t Task, c *Counts) error {
	w := t.sub
	if w != nil && w.LeaseUntil.After(e.o.Now()) {
		// The hint (a fan-out's page) shows a lease, which the task that
		// held it may have released since, having delivered the event
		// before this one: read the record rather than wait for the
		// lease to end.
		w = nil
	}
	if w == nil {
		var err error
		if w, err = e.o.Store.GetWebhook(ctx, t.Topic, t.ID); err != nil {
			if errors.Is(err, notify.ErrNotFound) {
				return nil // unsubscribed or expired
			}
			return err
		}
	}
	now := e.o.Now()
	if t.Check && e.o.EventTypes != nil {
		// A check (the events registry changed): the type, and the
		// claims the subscription recorded, against the registry as it
		// is now.
		types, err := e.types(ctx, true)
		if err != nil {
			return err
		}
		if reason := ended(w, types); reason != "" {
			cl := &claim{e: e, w: w, log: e.o.Logger.With("subscription", w.ID, "topic", w.Topic)}
			if ok, busyUntil, err := cl.take(ctx, 0); !ok {
				if !busyUntil.IsZero() {
					// Another process delivers to it: check again
					// when its lease ends.
					t.sub = nil
					return e.again(ctx, t, busyUntil.Sub(e.o.Now())+100*time.Millisecond)
				}
				return err
			}
			cl.openSecrets(ctx)
			cl.terminate(ctx, reason)
			return nil
		}
	}
	if !due(w, t.Seq, now) {
		if t.Retry && !w.Status.Suspended && (w.Retry.Seq != 0 || w.Retry.Gap != 0) && w.Retry.NextAt.After(now) {
			return e.again(ctx, t, w.Retry.NextAt.Sub(now))
		}
		return nil
	}
	if w.LeaseUntil.After(now) {
		// Another process delivers to it. It may have read the log
		// before this task's event was appended: look again when its
		// lease ends.
		return e.again(ctx, t, w.LeaseUntil.Sub(now)+100*time.Millisecond)
	}
	// The destination first: a busy origin parks the task (a Pool) or
	// puts it back (SQS) before it claims anything (no store write).
	slot, parked := e.origins.acquire(w.URL, &t, e.park)
	if slot == nil {
		c.Deferred++
		if parked {
			return nil
		}
		t.Defer++
		return e.again(ctx, t, deferDelay(t.Defer))
	}
	defer func() {
		if wake := slot.release(); len(wake) > 0 {
			e.o.Queue.Enqueue(context.WithoutCancel(ctx), wake...)
		}
	}()

	cl := &claim{e: e, w: w, log: e.o.Logger.With("subscription", w.ID, "topic", w.Topic)}
	if ok, busyUntil, err := cl.take(ctx, t.Seq); !ok {
		if !busyUntil.IsZero() {
			// Another process took it (its task may have read the
			// log before this event): look again when its lease ends.
			t.sub, t.Defer = nil, 0
			return e.again(ctx, t, busyUntil.Sub(e.o.Now())+100*time.Millisecond)
		}
		return err
	}
	c.Claimed++
	more, err := cl.run(ctx, t, slot, c)
	if err != nil {
		cl.log.WarnContext(ctx, "webhook delivery stopped", "err", err)
	}
	if cl.w == nil {
		return nil // ended (terminated) or claim lost
	}
	cl.release(ctx)
	if cl.w == nil {
		return nil // ended by its release (suspended without expiry)
	}
	t.sub, t.event, t.Defer, t.Retry = nil, nil, 0, false
	switch {
	case err != nil:
		return e.again(ctx, t, time.Second)
	case more || cl.stopped:
		return e.again(ctx, t, 0)
	case (cl.w.Retry.Seq != 0 || cl.w.Retry.Gap != 0) && !cl.w.Status.Suspended:
		t.Retry = true
		return e.again(ctx, t, max(0, cl.w.Retry.NextAt.Sub(e.o.Now())))
	}
	return nil // done, or suspended until a refresh reactivates it
}

// again enqueues t after delay.
func (e *Engine) again(ctx context.Context, t Task, delay time.Duration) error {
	t.Delay = min(delay, MaxDelay)
	return e.o.Queue.Enqueue(ctx, t)
}

// deferDelay is the delay of a task put back for the n-th time because
// its origin was busy: 200 ms, doubled each time, at most 10 s.
func deferDelay(n int) time.Duration {
	d := 200 * time.Millisecond
	for i := 1; i < n && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, 10*time.Second)
}

// take claims the subscription: a conditional write of its lease. On a
// conflict (a stale hint, or another process's write) the record is read
// again and claimed once more if it is free. False when it is gone or
// another process has it: then busyUntil is that process's lease end when
// it might not have seen seq (0: the head the task was made for is not
// known).
func (cl *claim) take(ctx context.Context, seq int64) (ok bool, busyUntil time.Time, err error) {
	e := cl.e
	for try := 0; ; try++ {
		lease := e.o.Now().Add(e.o.Lease)
		before := cl.w.LeaseUntil
		cl.w.LeaseUntil = lease
		err := e.o.Store.UpdateWebhook(ctx, cl.w)
		switch {
		case err == nil:
			return true, time.Time{}, nil
		case errors.Is(err, notify.ErrNotFound):
			return false, time.Time{}, nil
		case !isConflict(err):
			cl.w.LeaseUntil = before
			return false, time.Time{}, err
		case try == 1:
			return false, time.Time{}, nil
		}
		fresh, err := e.o.Store.GetWebhook(ctx, cl.w.Topic, cl.w.ID)
		if err != nil {
			if errors.Is(err, notify.ErrNotFound) {
				return false, time.Time{}, nil
			}
			return false, time.Time{}, err
		}
		cl.w = fresh
		now := e.o.Now()
		switch {
		case !due(fresh, seq, now):
			return false, time.Time{}, nil
		case fresh.LeaseUntil.After(now):
			return false, fresh.LeaseUntil, nil
		}
	}
}

// run delivers what follows the watermark, in order; more reports that
// the batch bound stopped it with events left.
func (cl *claim) run(ctx context.Context, t Task, slot *slot, c *Counts) (more bool, err error) {
	e, w := cl.e, cl.w
	if !cl.openSecrets(ctx) {
		return false, nil
	}
	if e.o.EventTypes != nil {
		types, err := e.types(ctx, false)
		if err != nil {
			return false, err
		}
		if reason := ended(w, types); reason != "" {
			cl.terminate(ctx, reason)
			return false, nil
		}
	}
	var filters map[string]json.RawMessage
	if len(w.Arguments) > 0 {
		if err := json.Unmarshal(w.Arguments, &filters); err != nil {
			cl.log.ErrorContext(ctx, "webhook arguments", "err", err)
		}
	}
	hint := t.event
	sent := 0
	for {
		if ctx.Err() != nil || draining(ctx) {
			cl.stopped = true
			return false, nil
		}
		if w.Retry.Gap != 0 {
			if !cl.check(ctx) {
				return false, nil
			}
			w = cl.w // a renewal may have merged into a fresh record
			if !cl.sendGap(ctx, slot, c) {
				return false, nil
			}
		}
		var evs []notify.TopicEvent
		if hint != nil && hint.Data != nil && hint.Seq == w.Watermark+1 {
			evs = []notify.TopicEvent{*hint}
		} else if evs, err = e.o.Store.ReadTopicEvents(ctx, w.Topic, w.Watermark, readBatch); err != nil {
			return false, fmt.Errorf("reading the topic log: %w", err)
		}
		hint = nil // from now on, the log
		if len(evs) == 0 {
			return false, nil
		}
		if evs[0].Seq > w.Watermark+1 {
			// What followed the watermark left the log (its TTL).
			w.Retry.Gap = evs[0].Seq - 1
			w.Watermark = evs[0].Seq - 1
			continue
		}
		for i := range evs {
			ev := &evs[i]
			if !eventcursor.Matches(filters, ev.Data) {
				w.Watermark = ev.Seq
				continue
			}
			if sent >= e.o.MaxBatch {
				return true, nil
			}
			if !cl.check(ctx) {
				return false, nil
			}
			w = cl.w // a renewal may have merged into a fresh record
			sent++
			if !cl.attempt(ctx, ev, slot, c) || w.Retry.Gap != 0 {
				if w.Retry.Gap != 0 && w.Retry.Seq == 0 {
					break // the gap envelope goes first
				}
				return false, nil
			}
		}
		if len(evs) < readBatch && w.Retry.Gap == 0 {
			// The end of the log. An event appended after this read
			// finds the claim held; its task looks again at the
			// lease's end (or, in a Pool, as soon as this task ends).
			return false, nil
		}
	}
}

// openSecrets opens the subscription's signing secrets; false (logged)
// when they do not open.
func (cl *claim) openSecrets(ctx context.Context) bool {
	sec, err := cl.w.OpenSecrets(cl.e.o.Sealer)
	if err == nil {
		cl.secrets, err = parseSecrets(sec, cl.e.o.Now())
	}
	if err != nil {
		cl.log.ErrorContext(ctx, "webhook secrets do not open (were the state keys changed without keeping the old one?)", "err", err)
		return false
	}
	return true
}

// Reasons a subscription is ended (ended, terminate).
const (
	reasonTypeGone  = "the event type was removed or no longer offers webhook delivery"
	reasonForbidden = "the subscriber no longer qualifies for the event type's access rule"
)

// ended says why w may no longer be delivered to under the events
// registry types ("" when it may): its type removed, moved to another
// topic or without webhook delivery, or its recorded claims and
// arguments no longer admitted by the type's access rule.
func ended(w *notify.WebhookSubscription, types map[string]*notify.EventItem) string {
	it := types[w.Name]
	switch {
	case it == nil || it.Topic != w.Topic || !it.Supports(notify.DeliveryWebhook):
		return reasonTypeGone
	case !w.Permitted(it):
		return reasonForbidden
	}
	return ""
}

// check keeps the claim ahead of the next attempt: false when it cannot
// (the claim was lost, or the invocation ends before an attempt could).
func (cl *claim) check(ctx context.Context) bool {
	e := cl.e
	now := e.o.Now()
	if d, ok := ctx.Deadline(); (ok && d.Sub(now) < e.timeout+time.Second) || ctx.Err() != nil || draining(ctx) {
		cl.stopped = true
		return false
	}
	if cl.w.LeaseUntil.Sub(now) >= e.timeout+leaseMargin && cl.unsaved < maxUnsaved {
		return true
	}
	return cl.renew(ctx)
}

// renew extends the lease and records the delivery state so far. A
// refresh that changed the record meanwhile keeps the claim (its lease is
// still this claim's): the state is merged into the fresh record.
func (cl *claim) renew(ctx context.Context) bool {
	e := cl.e
	ours := cl.w.LeaseUntil
	cl.w.LeaseUntil = e.o.Now().Add(e.o.Lease)
	for range 3 {
		err := e.o.Store.UpdateWebhook(ctx, cl.w)
		if err == nil {
			cl.unsaved = 0
			return true
		}
		if !isConflict(err) {
			if !errors.Is(err, notify.ErrNotFound) {
				cl.log.WarnContext(ctx, "webhook claim renewal failed (the lease lapses)", "err", err)
			}
			cl.w = nil
			return false
		}
		fresh, err := e.o.Store.GetWebhook(ctx, cl.w.Topic, cl.w.ID)
		if err != nil || !fresh.LeaseUntil.Equal(ours) {
			cl.log.WarnContext(ctx, "webhook claim lost", "err", err)
			cl.w = nil
			return false
		}
		cl.w = merge(fresh, cl.w)
		cl.w.LeaseUntil = e.o.Now().Add(e.o.Lease)
	}
	cl.w = nil
	return false
}

// attempt POSTs ev once and records the outcome; false when the event
// waits for a retry (the later ones wait behind it).
func (cl *claim) attempt(ctx context.Context, ev *notify.TopicEvent, slot *slot, c *Counts) bool {
	e, w := cl.e, cl.w
	id := eventcursor.EventID(w.Name, ev.MessageID)
	cursor := eventcursor.Sign(e.o.CursorKey, eventcursor.Cursor{Name: w.Name, Topic: w.Topic, Seq: ev.Seq})
	body, err := webhook.EventBody(id, w.Name, ev.ReceivedAt, eventcursor.ObjectData(ev.Data), cursor)
	out := webhook.Outcome{Category: webhook.CategoryInvalidMessage, Err: err}
	start := time.Now()
	if err == nil {
		out = e.o.Sender.Send(ctx, webhook.Message{ID: id, SubscriptionID: w.ID, URL: w.URL, Body: body, Secrets: cl.secrets})
	}
	cl.unsaved++
	slot.done(out.OK())
	now := e.o.Now()
	if ctx.Err() == nil || out.OK() {
		cl.record(ev.Seq, out, now, time.Since(start))
	}
	if ctx.Err() == nil || out.OK() {
		metrics.Delivery(ctx, metrics.ModeWebhook, out.Category)
	}
	if out.OK() {
		metrics.DeliveryLatency(ctx, metrics.ModeWebhook, now.Sub(ev.ReceivedAt))
		c.Delivered++
		w.Watermark = ev.Seq
		w.Retry = notify.WebhookRetry{Gap: w.Retry.Gap}
		w.Status = notify.WebhookStatus{LastDeliveryAt: now}
		return true
	}
	if ctx.Err() != nil {
		return false // interrupted (shutdown, deadline): not the receiver's failure
	}
	refused := policyRefusal(out)
	if refused {
		c.Refused++
		cl.log.ErrorContext(ctx, "webhook delivery refused by this process's webhook policy: the callback's origin is not https or resolves to an address that is not globally routable; if it is a local receiver, set "+webhook.AllowEnv+" on every process that delivers (the server and sns-ingest)",
			"eventId", id, "category", out.Category, "err", out.Err)
	} else {
		cl.log.InfoContext(ctx, "webhook delivery failed", "eventId", id, "status", out.Status, "category", out.Category, "retry", out.Retry, "err", out.Err)
	}
	if !out.Retry && !refused {
		// 410 (the receiver refuses this event for good: no gap), 413
		// or a body over 256 KiB (a gap is owed).
		if out.Status != 410 {
			w.Status.LastError = out.Category
			w.Retry.Gap = ev.Seq
		}
		c.Abandoned++
		w.Watermark = ev.Seq
		w.Retry = notify.WebhookRetry{Abandoned: w.Retry.Abandoned + 1, Gap: w.Retry.Gap}
		return true
	}
	if cl.failed(ev.Seq, out.Category, now, c) {
		w.Watermark = ev.Seq
		return true
	}
	return false
}

// record keeps an attempt in the record's history (the operator's view;
// written with the delivery state at the next renewal or release).
func (cl *claim) record(seq int64, out webhook.Outcome, at time.Time, latency time.Duration) {
	cl.w.RecordAttempt(notify.WebhookAttempt{At: at, Seq: seq, Status: out.Status, Category: cmp.Or(out.Category, AttemptOK), Latency: latency})
}

// failed records a failed attempt at seq (an event, or the gap envelope
// owed before it); false while it waits for a retry, true when it was
// abandoned (the caller moves the watermark).
func (cl *claim) failed(seq int64, category string, now time.Time, c *Counts) bool {
	e, w := cl.e, cl.w
	w.Status.LastError = category
	if w.Status.FailedSince.IsZero() {
		w.Status.FailedSince = now
	}
	if now.Sub(w.Status.FailedSince) >= e.o.SuspendAfter {
		w.Status.Suspended = true
	}
	if w.Retry.Seq != seq {
		w.Retry = notify.WebhookRetry{Seq: seq, FirstAt: now, Abandoned: w.Retry.Abandoned, Gap: w.Retry.Gap}
	}
	w.Retry.Attempts++
	if w.Status.Suspended {
		// Pending while suspended: retried, its window afresh, after a
		// refresh reactivates the subscription.
		w.Retry.NextAt = now
		c.Failed++
		return false
	}
	if next, again := e.o.Retry.Next(w.Retry.Attempts, w.Retry.FirstAt, now); again {
		w.Retry.NextAt = next
		c.Failed++
		return false
	}
	c.Abandoned++
	metrics.Delivery(context.Background(), metrics.ModeWebhook, "expired")
	w.Retry = notify.WebhookRetry{Abandoned: w.Retry.Abandoned + 1, Gap: max(w.Retry.Gap, seq)}
	return true
}

// sendGap POSTs the gap envelope owed (a cursor at Retry.Gap); false when
// it waits for a retry.
func (cl *claim) sendGap(ctx context.Context, slot *slot, c *Counts) bool {
	e, w := cl.e, cl.w
	body, err := webhook.GapBody(eventcursor.Sign(e.o.CursorKey, eventcursor.Cursor{Name: w.Name, Topic: w.Topic, Seq: w.Retry.Gap}))
	if err != nil {
		w.Retry.Gap = 0
		return true
	}
	start := time.Now()
	out := e.o.Sender.Send(ctx, webhook.Message{ID: webhook.ControlID(webhook.ControlGap), SubscriptionID: w.ID, URL: w.URL, Body: body, Secrets: cl.secrets})
	cl.unsaved++
	slot.done(out.OK())
	if ctx.Err() == nil || out.OK() {
		cl.record(w.Watermark+1, out, e.o.Now(), time.Since(start))
	}
	cl.log.InfoContext(ctx, "webhook gap", "to", w.Retry.Gap, "status", out.Status, "category", out.Category)
	if out.OK() || (!out.Retry && !policyRefusal(out)) {
		if out.OK() {
			c.Gaps++
		}
		w.Retry.Gap = 0
		if w.Retry.Seq == 0 {
			w.Retry = notify.WebhookRetry{Abandoned: w.Retry.Abandoned}
		}
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	// Retried on the schedule of the event after it (its Seq marks the
	// gap's own attempts: the watermark's successor).
	if cl.failed(w.Watermark+1, out.Category, e.o.Now(), c) {
		// Given up: the gap too (it would report an older loss).
		w.Retry.Gap = 0
	}
	return w.Retry.Seq == 0
}

// release writes the delivery state and drops the lease. When the record
// changed meanwhile (a refresh), the state is merged into the fresh one.
func (cl *claim) release(ctx context.Context) {
	e, w := cl.e, cl.w
	// A release is due even when ctx ended (a shutdown): without it the
	// lease only lapses.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if w.Status.Suspended && w.ExpiresAt.IsZero() {
		cl.terminate(ctx, "delivery failed for over "+e.o.SuspendAfter.String())
		return
	}
	w.LeaseUntil = time.Time{}
	defer func() { cl.w = w }()
	for range 5 {
		err := e.o.Store.UpdateWebhook(ctx, w)
		if err == nil || errors.Is(err, notify.ErrNotFound) {
			return
		}
		if !isConflict(err) {
			cl.log.WarnContext(ctx, "webhook release failed (the lease lapses)", "err", err)
			return
		}
		fresh, err := e.o.Store.GetWebhook(ctx, w.Topic, w.ID)
		if err != nil {
			return
		}
		w = merge(fresh, w)
		w.LeaseUntil = time.Time{}
	}
}

// merge returns fresh (a record a refresh rewrote: secrets, expiry,
// suspension) with the delivery state of mine.
func merge(fresh, mine *notify.WebhookSubscription) *notify.WebhookSubscription {
	suspended := mine.Status.Suspended && fresh.Status.Suspended == mine.Status.Suspended && !fresh.UpdatedAt.After(mine.UpdatedAt)
	fresh.Watermark = max(fresh.Watermark, mine.Watermark)
	fresh.Retry, fresh.Status, fresh.Attempts = mine.Retry, mine.Status, mine.Attempts
	fresh.Status.Suspended = suspended
	fresh.LeaseUntil = mine.LeaseUntil
	return fresh
}

// terminate ends the subscription: a signed terminated envelope, best
// effort, and the record deleted.
func (cl *claim) terminate(ctx context.Context, reason string) {
	e, w := cl.e, cl.w
	code, name := webhook.NotFoundCode(e.o.EventsErrors), "NotFound"
	if reason == reasonForbidden {
		code, name = webhook.ForbiddenCode(e.o.EventsErrors), "Forbidden"
	}
	body, err := webhook.TerminatedBody(code, name, map[string]string{"reason": reason})
	if err == nil && cl.secrets != nil {
		out := e.o.Sender.Send(ctx, webhook.Message{ID: webhook.ControlID(webhook.ControlTerminated), SubscriptionID: w.ID, URL: w.URL, Body: body, Secrets: cl.secrets})
		cl.log.InfoContext(ctx, "webhook subscription terminated", "reason", reason, "envelopeStatus", out.Status, "category", out.Category)
	}
	if err := e.o.Store.DeleteWebhook(ctx, w); err != nil && !errors.Is(err, notify.ErrNotFound) {
		cl.log.WarnContext(ctx, "deleting a terminated webhook subscription", "err", err)
	}
	cl.w = nil
}

// policyRefusal reports an attempt this process refused to make: the
// callback's origin or address is refused by its webhook.Policy (a
// configuration the operator can change), not by the receiver.
func policyRefusal(out webhook.Outcome) bool {
	return errors.Is(out.Err, webhook.ErrInvalidURL) || errors.Is(out.Err, webhook.ErrBlockedAddress)
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

// typeCache is an engine's reuse of one read of the events registry.
type typeCache struct {
	mu    sync.Mutex
	at    time.Time
	types map[string]*notify.EventItem
}

// types returns the events registry's items, read at most once per
// TypesTTL unless fresh.
func (e *Engine) types(ctx context.Context, fresh bool) (map[string]*notify.EventItem, error) {
	e.cache.mu.Lock()
	defer e.cache.mu.Unlock()
	now := e.o.Now()
	if !fresh && e.cache.types != nil && now.Sub(e.cache.at) < e.o.TypesTTL {
		return e.cache.types, nil
	}
	types, err := e.o.EventTypes(ctx)
	if err != nil {
		return nil, err
	}
	e.cache.types, e.cache.at = types, now
	return types, nil
}

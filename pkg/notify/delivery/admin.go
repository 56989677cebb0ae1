package delivery

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/eventcursor"
)

// The operator's view of webhook subscriptions (docs/operations.md): list
// them by event type or principal with their state and last attempts,
// count them per type, suspend, resume, delete, and replay one from a
// cursor or a time. The MCP server's admin tools and `mcpush admin` are
// built on it.
//
// Nothing it returns holds a secret: a View has no signing secrets and no
// recorded claims, and its URL has no user information and no query
// (a callback URL may carry a token there).
//
// Every change is a conditional write (UpdateWebhook at the version
// read), retried on a conflict. A change is refused with ErrBusy while a
// process holds the subscription's delivery lease (a claim writes the
// record again at its release and would undo it): the error says when the
// lease ends (at most Options.Lease, 60 s by default).

// Bounds of the operator's view.
const (
	// MaxAdminList bounds the subscriptions one List returns.
	MaxAdminList = 1000
	// MaxAdminScan bounds the records one List or Counts reads: a walk
	// of every topic (List by principal, Counts) stops there and says
	// it is partial.
	MaxAdminScan = 100_000
	// MaxReplayScan bounds the events Replay reads to find the first
	// at or after a time.
	MaxReplayScan = 100_000
	adminRetries  = 4
	replayBatch   = 100
)

// Admin is the operator's view of a store's webhook subscriptions.
type Admin struct {
	Store Store
	// EventTypes returns the events registry's types (RegistryEventTypes):
	// List by type finds the type's topic there.
	EventTypes func(ctx context.Context) (map[string]*notify.EventItem, error)
	// CursorKeys verify a Replay cursor (the state keys).
	CursorKeys [][]byte
	// Queue, when set, gets a subscription task after Resume and Replay
	// so that delivery starts at once; without one it starts at the
	// topic's next event or sweep.
	Queue Queue
	// Now is the clock (time.Now).
	Now func() time.Time
}

// View is what the operator's view shows of a subscription: never its
// secrets.
type View struct {
	Topic     string    `json:"topic"`
	ID        string    `json:"id"`
	Principal string    `json:"principal"`
	Type      string    `json:"type"`
	URL       string    `json:"url"` // without user information or query
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	Verified  bool      `json:"verified"`
	// State is "active", "retrying" (an event or a gap envelope waits
	// for a retry) or "suspended".
	State          string    `json:"state"`
	Delivering     bool      `json:"delivering,omitempty"` // a process holds its lease
	Watermark      int64     `json:"watermark"`
	RetrySeq       int64     `json:"retrySeq,omitempty"`
	RetryAttempts  int       `json:"retryAttempts,omitempty"`
	NextAttemptAt  time.Time `json:"nextAttemptAt,omitzero"`
	Abandoned      int       `json:"abandoned,omitempty"`
	GapOwed        int64     `json:"gapOwed,omitempty"`
	LastDeliveryAt time.Time `json:"lastDeliveryAt,omitzero"`
	LastError      string    `json:"lastError,omitempty"`
	FailedSince    time.Time `json:"failedSince,omitzero"`
	Attempts       []Attempt `json:"attempts"`
}

// Attempt is a View's delivery attempt.
type Attempt struct {
	At        time.Time `json:"at"`
	Seq       int64     `json:"seq"`
	Status    int       `json:"status"`
	Category  string    `json:"category"`
	LatencyMS float64   `json:"latencyMs"`
}

// AttemptOK is the category of an accepted delivery attempt (the engine
// records it for webhook.Outcome's empty category).
const AttemptOK = "ok"

// States of a View.
const (
	StateActive    = "active"
	StateRetrying  = "retrying"
	StateSuspended = "suspended"
)

// NewView returns the operator's view of w at now.
func NewView(w *notify.WebhookSubscription, now time.Time) View {
	v := View{Topic: w.Topic, ID: w.ID, Principal: w.Principal, Type: w.Name, URL: redactURL(w.URL),
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, ExpiresAt: w.ExpiresAt, Verified: w.Verified,
		State: StateActive, Delivering: w.LeaseUntil.After(now), Watermark: w.Watermark,
		RetrySeq: w.Retry.Seq, RetryAttempts: w.Retry.Attempts, NextAttemptAt: w.Retry.NextAt, Abandoned: w.Retry.Abandoned, GapOwed: w.Retry.Gap,
		LastDeliveryAt: w.Status.LastDeliveryAt, LastError: w.Status.LastError, FailedSince: w.Status.FailedSince,
		Attempts: []Attempt{}}
	switch {
	case w.Status.Suspended:
		v.State = StateSuspended
	case w.Retry.Seq != 0 || w.Retry.Gap != 0:
		v.State = StateRetrying
	}
	for _, a := range w.Attempts {
		v.Attempts = append(v.Attempts, Attempt{At: a.At, Seq: a.Seq, Status: a.Status, Category: a.Category,
			LatencyMS: float64(a.Latency.Microseconds()) / 1000})
	}
	return v
}

// redactURL drops what of a callback URL may be a secret: user
// information, the query and the fragment.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	redacted := u.User != nil || u.RawQuery != "" || u.Fragment != ""
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	if redacted {
		return u.String() + "?(redacted)"
	}
	return u.String()
}

// Filter selects the subscriptions of List: of an event type, of a
// principal, or both ("" matches all).
type Filter struct {
	Type      string
	Principal string
	// Limit bounds the result (1 to MaxAdminList; 0: MaxAdminList).
	Limit int
}

// ListResult is what List returns.
type ListResult struct {
	Subscriptions []View `json:"subscriptions"`
	// Partial: the limit or the scan bound (MaxAdminScan) stopped the
	// walk with records left.
	Partial bool `json:"partial,omitempty"`
	Scanned int  `json:"scanned"`
}

// List returns the live subscriptions that match f, ordered by topic and
// id. By type it reads that type's topic only (one paged read); otherwise
// it reads every topic's subscriptions (one read of the topics with an
// event and one of the events registry, then one paged read per topic: a
// cost that grows with all subscriptions, bounded by MaxAdminScan).
func (a *Admin) List(ctx context.Context, f Filter) (*ListResult, error) {
	if f.Limit == 0 {
		f.Limit = MaxAdminList
	}
	if f.Limit < 1 || f.Limit > MaxAdminList || len(f.Type) > notify.MaxEventNameLen || len(f.Principal) > notify.MaxURIBytes {
		return nil, fmt.Errorf("%w: limit %d (want 1 to %d), type or principal too long", ErrAdminInput, f.Limit, MaxAdminList)
	}
	res := &ListResult{Subscriptions: []View{}}
	now := a.now()
	err := a.walk(ctx, f.Type, func(w *notify.WebhookSubscription) bool {
		res.Scanned++
		if (f.Type != "" && w.Name != f.Type) || (f.Principal != "" && w.Principal != f.Principal) {
			return true
		}
		if len(res.Subscriptions) == f.Limit {
			res.Partial = true
			return false
		}
		res.Subscriptions = append(res.Subscriptions, NewView(w, now))
		return true
	})
	if errors.Is(err, errScanBound) {
		res.Partial, err = true, nil
	}
	return res, err
}

// TypeCounts are the subscriptions of one event type by state.
type TypeCounts struct {
	Total      int `json:"total"`
	Active     int `json:"active"`
	Retrying   int `json:"retrying"`
	Suspended  int `json:"suspended"`
	Delivering int `json:"delivering"`
}

// CountsResult is what Counts returns.
type CountsResult struct {
	Types   map[string]TypeCounts `json:"types"`
	Partial bool                  `json:"partial,omitempty"` // MaxAdminScan stopped the walk
	Scanned int                   `json:"scanned"`
}

// Counts counts the live subscriptions per event type and state: a walk
// of every topic's subscriptions (bounded by MaxAdminScan).
func (a *Admin) Counts(ctx context.Context) (*CountsResult, error) {
	res := &CountsResult{Types: map[string]TypeCounts{}}
	now := a.now()
	err := a.walk(ctx, "", func(w *notify.WebhookSubscription) bool {
		res.Scanned++
		c := res.Types[w.Name]
		c.Total++
		switch NewView(w, now).State {
		case StateSuspended:
			c.Suspended++
		case StateRetrying:
			c.Retrying++
		default:
			c.Active++
		}
		if w.LeaseUntil.After(now) {
			c.Delivering++
		}
		res.Types[w.Name] = c
		return true
	})
	if errors.Is(err, errScanBound) {
		res.Partial, err = true, nil
	}
	return res, err
}

// walk calls fn with every live subscription of the topic of event type
// typ (of every topic when typ is ""), until fn returns false; it
// returns errScanBound after MaxAdminScan records.
func (a *Admin) walk(ctx context.Context, typ string, fn func(*notify.WebhookSubscription) bool) error {
	var topics []string
	if typ != "" {
		if a.EventTypes == nil {
			return fmt.Errorf("%w: listing by type needs the events registry", ErrOptions)
		}
		types, err := a.EventTypes(ctx)
		if err != nil {
			return err
		}
		it := types[typ]
		if it == nil {
			return nil // no such type: no subscriptions
		}
		topics = []string{it.Topic}
	} else {
		// The topics of the log, and those of the registry's types (a
		// topic without an event yet has no log entry, but may have
		// subscriptions).
		all, err := a.Store.Topics(ctx)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, t := range all {
			seen[t.Name] = true
		}
		if a.EventTypes != nil {
			types, err := a.EventTypes(ctx)
			if err != nil {
				return err
			}
			for _, it := range types {
				seen[it.Topic] = it.Topic != ""
			}
		}
		for t, ok := range seen {
			if ok {
				topics = append(topics, t)
			}
		}
		sort.Strings(topics)
	}
	scanned := 0
	for _, topic := range topics {
		after := ""
		for {
			page, next, err := a.Store.TopicWebhooks(ctx, topic, after, min(notify.MaxWebhookPage, MaxAdminScan-scanned))
			if err != nil {
				return err
			}
			for _, w := range page {
				if !fn(w) {
					return nil
				}
			}
			scanned += len(page)
			if next == "" {
				break
			}
			if scanned >= MaxAdminScan {
				return errScanBound
			}
			after = next
		}
	}
	return nil
}

// Get returns the view of one subscription.
func (a *Admin) Get(ctx context.Context, topic, id string) (*View, error) {
	if err := checkRef(topic, id); err != nil {
		return nil, err
	}
	w, err := a.Store.GetWebhook(ctx, topic, id)
	if err != nil {
		return nil, err
	}
	v := NewView(w, a.now())
	return &v, nil
}

// Suspend stops delivery to a subscription until Resume (or the
// subscriber's next refresh, which reactivates a suspended
// subscription). Its pending events stay pending.
func (a *Admin) Suspend(ctx context.Context, topic, id string) (*View, error) {
	return a.change(ctx, topic, id, func(w *notify.WebhookSubscription, now time.Time) bool {
		if w.Status.Suspended {
			return false
		}
		w.Status.Suspended = true
		return true
	})
}

// Resume reactivates a subscription: no longer suspended, its failure
// window afresh, a pending retry due now.
func (a *Admin) Resume(ctx context.Context, topic, id string) (*View, error) {
	v, err := a.change(ctx, topic, id, func(w *notify.WebhookSubscription, now time.Time) bool {
		w.Status.Suspended = false
		w.Status.FailedSince = time.Time{}
		if w.Retry.Seq != 0 || w.Retry.Gap != 0 {
			w.Retry.NextAt = now
			w.Retry.FirstAt = now // a new retry window
		}
		return true
	})
	if err == nil {
		a.kick(ctx, topic, id)
	}
	return v, err
}

// Delete deletes a subscription (no terminated envelope is sent: the
// operator removes it, the receiver learns at its next refresh).
func (a *Admin) Delete(ctx context.Context, topic, id string) error {
	if err := checkRef(topic, id); err != nil {
		return err
	}
	for try := 0; ; try++ {
		w, err := a.Store.GetWebhook(ctx, topic, id)
		if err != nil {
			return err
		}
		if until := w.LeaseUntil; until.After(a.now()) {
			return busy(until)
		}
		err = a.Store.DeleteWebhook(ctx, w)
		if err == nil || !isConflict(err) || try == adminRetries-1 {
			return err
		}
	}
}

// ReplayFrom is where Replay starts: after a cursor (an event's cursor,
// as webhook deliveries carry) or at the first event received at or after
// a time. Exactly one is set.
type ReplayFrom struct {
	Cursor string
	Since  time.Time
}

// Replay moves a subscription's watermark back so that the events after
// the cursor, or from the time on, are delivered again (in order, as any
// others), and clears its retry state. It never moves the watermark
// forward (that would skip events): a point after it changes nothing. A
// suspended subscription stays suspended.
func (a *Admin) Replay(ctx context.Context, topic, id string, from ReplayFrom) (*View, error) {
	if err := checkRef(topic, id); err != nil {
		return nil, err
	}
	if (from.Cursor == "") == from.Since.IsZero() {
		return nil, fmt.Errorf("%w: replay needs a cursor or a time, not both", ErrAdminInput)
	}
	if !from.Since.IsZero() && from.Since.After(a.now()) {
		return nil, fmt.Errorf("%w: replay from %s, in the future", ErrAdminInput, from.Since.Format(time.RFC3339))
	}
	w, err := a.Store.GetWebhook(ctx, topic, id)
	if err != nil {
		return nil, err
	}
	var target int64
	if from.Cursor != "" {
		c, err := eventcursor.Verify(a.CursorKeys, from.Cursor, w.Name)
		if err != nil || c.Topic != w.Topic {
			return nil, fmt.Errorf("%w: the cursor is not one of this subscription's event type and topic (%v)", ErrAdminInput, err)
		}
		target = c.Seq
	} else if target, err = a.seqBefore(ctx, topic, from.Since); err != nil {
		return nil, err
	}
	v, err := a.change(ctx, topic, id, func(w *notify.WebhookSubscription, now time.Time) bool {
		if target >= w.Watermark {
			return false
		}
		w.Watermark = target
		gap := w.Retry.Gap
		if gap > target {
			gap = 0 // the events it reported are replayed
		}
		w.Retry = notify.WebhookRetry{Gap: gap, NextAt: now}
		return true
	})
	if err == nil {
		a.kick(ctx, topic, id)
	}
	return v, err
}

// seqBefore returns the Seq before the first event of topic received at
// or after since (the log's last Seq when there is none), reading at
// most MaxReplayScan events.
func (a *Admin) seqBefore(ctx context.Context, topic string, since time.Time) (int64, error) {
	var after int64
	for read := 0; read < MaxReplayScan; {
		evs, err := a.Store.ReadTopicEvents(ctx, topic, after, replayBatch)
		if err != nil {
			return 0, err
		}
		for _, ev := range evs {
			if !ev.ReceivedAt.Before(since) {
				return ev.Seq - 1, nil
			}
			after = ev.Seq
		}
		if len(evs) < replayBatch {
			return after, nil
		}
		read += len(evs)
	}
	return 0, fmt.Errorf("%w: no event at or after %s within the first %d of the log: replay from a cursor", ErrAdminInput, since.Format(time.RFC3339), MaxReplayScan)
}

// change applies fn to a subscription's record (fn reports whether it
// changed it) with a conditional write, retried on a conflict; refused
// with ErrBusy while a process holds its lease.
func (a *Admin) change(ctx context.Context, topic, id string, fn func(*notify.WebhookSubscription, time.Time) bool) (*View, error) {
	if err := checkRef(topic, id); err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		w, err := a.Store.GetWebhook(ctx, topic, id)
		if err != nil {
			return nil, err
		}
		now := a.now()
		if w.LeaseUntil.After(now) {
			return nil, busy(w.LeaseUntil)
		}
		if fn(w, now) {
			w.UpdatedAt = now
			err = a.Store.UpdateWebhook(ctx, w)
		}
		switch {
		case err == nil:
			v := NewView(w, now)
			return &v, nil
		case !isConflict(err) || try == adminRetries-1:
			return nil, err
		}
	}
}

// kick enqueues a subscription task (when Admin has a queue).
func (a *Admin) kick(ctx context.Context, topic, id string) {
	if a.Queue != nil {
		_ = a.Queue.Enqueue(ctx, Task{Kind: KindSubscription, Topic: topic, ID: id})
	}
}

func (a *Admin) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func busy(until time.Time) error {
	return fmt.Errorf("%w: a process holds its delivery lease until %s; try again then", ErrBusy, until.UTC().Format(time.RFC3339))
}

func checkRef(topic, id string) error {
	if topic == "" || id == "" || len(topic) > notify.MaxEventNameLen || len(id) > maxIDBytes {
		return fmt.Errorf("%w: a subscription is named by its topic (1 to %d bytes) and id (1 to %d bytes)", ErrAdminInput, notify.MaxEventNameLen, maxIDBytes)
	}
	return nil
}

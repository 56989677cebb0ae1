package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Webhook subscriptions of the Events extension (events/subscribe): the
// durable record of one subscription, which every process of a
// deployment reads. Both stores keep them: [WebhookStore], a capability
// beside [Store] (not part of it) that mcp.Store embeds whole; webhook
// delivery declares the few of its methods it uses (delivery.Store).
//
// A record is keyed by (Topic, ID): every subscription of a topic is
// found with one paged read (a DynamoDB Query of one partition, an SQLite
// index range), never one read per subscription. Secrets is opaque to the
// store: its writer seals it (the MCP server encrypts the signing secrets
// with a key derived from the state key before they reach a store).

// WebhookStore keeps webhook subscriptions ([WebhookSubscription]) and
// the MCP server's record of verified callbacks, shared by every process
// of a deployment. Both stores implement it. Safe for concurrent use by
// many processes.
//
// A record is validated by [CheckWebhook] ([ErrInvalid], [ErrTooLarge]).
// One whose ExpiresAt has passed is gone: no method returns, updates or
// deletes it, and its (Topic, ID) may be created again.
type WebhookStore interface {
	// CreateWebhook stores a new subscription with Version 1: [ErrExists]
	// when (w.Topic, w.ID) holds a live one, [ErrLimit] when w.Principal
	// already has max live ones.
	CreateWebhook(ctx context.Context, w *WebhookSubscription, max int) error
	// CountWebhooks returns the number of principal's live subscriptions,
	// at most limit: the bound CreateWebhook enforces, read without a
	// write (the MCP server checks it before a verification POST).
	CountWebhooks(ctx context.Context, principal string, limit int) (int, error)
	// GetWebhook returns the live subscription (topic, id); [ErrNotFound]
	// when there is none.
	GetWebhook(ctx context.Context, topic, id string) (*WebhookSubscription, error)
	// UpdateWebhook writes w if the stored Version still equals w.Version,
	// and then increments w.Version: [ErrConflict] when it changed,
	// [ErrNotFound] when the subscription is gone.
	UpdateWebhook(ctx context.Context, w *WebhookSubscription) error
	// DeleteWebhook deletes the live subscription (w.Topic, w.ID);
	// [ErrNotFound] when there is none.
	DeleteWebhook(ctx context.Context, w *WebhookSubscription) error
	// TopicWebhooks returns up to limit live subscriptions of topic
	// after the page token after ("" from the first), and the token of
	// the next page ("" after the last); a page may hold fewer than limit
	// while more follow. [CheckWebhookPage] bounds topic and limit.
	TopicWebhooks(ctx context.Context, topic, after string, limit int) ([]*WebhookSubscription, string, error)
	// PutWebhookVerified records that the callback of key (opaque to the
	// store; [CheckVerifiedKey]) passed verification, until until; a later
	// call replaces it.
	PutWebhookVerified(ctx context.Context, key string, until time.Time) error
	// WebhookVerified reports whether key's verification is recorded and
	// has not expired.
	WebhookVerified(ctx context.Context, key string) (bool, error)
}

// MaxWebhooksPerPrincipal is the default bound of a principal's live
// webhook subscriptions (CreateWebhook's max).
const MaxWebhooksPerPrincipal = 100

// MaxWebhookPage bounds the records one TopicWebhooks call returns.
const MaxWebhookPage = 1000

// MaxVerifiedKeyBytes bounds the key of PutWebhookVerified and
// WebhookVerified (the MCP server's is a fixed-size hash of the
// principal, the callback URL and the secret).
const MaxVerifiedKeyBytes = 128

// CheckVerifiedKey validates the key of PutWebhookVerified and
// WebhookVerified the same way for every store.
func CheckVerifiedKey(key string) error {
	if key == "" || len(key) > MaxVerifiedKeyBytes {
		return fmt.Errorf("%w: webhook verification key of %d bytes (want 1 to %d)", ErrInvalid, len(key), MaxVerifiedKeyBytes)
	}
	return nil
}

// WebhookSubscription is the durable record of one webhook subscription.
type WebhookSubscription struct {
	Topic     string // the topic whose log it delivers
	ID        string // "sub_" and hex: deterministic over the subscription key
	Principal string // who subscribed; never empty
	Name      string // the event type
	URL       string // the callback URL
	// Arguments are the subscription's arguments as canonical JSON (an
	// object), nil when there are none.
	Arguments json.RawMessage
	// Claims are the claims of the subscriber's credentials that the
	// event type's access rule read when the subscription was granted or
	// last refreshed (Access.Record), never a token; nil for a type
	// without access. Delivery re-checks them (Permitted).
	Claims Claims
	// Secrets are the signing secrets, sealed by the writer; opaque to
	// the store.
	Secrets []byte

	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is when the subscription lapses unless refreshed; the
	// zero time means no expiry.
	ExpiresAt time.Time
	// Verified: the callback passed the verification handshake for this
	// principal.
	Verified bool

	// Watermark is the Seq of the topic log up to which every event has
	// been delivered (acknowledged) or abandoned.
	Watermark int64
	// LeaseUntil, while in the future, says a process is delivering to
	// the subscription: another leaves it alone until then.
	LeaseUntil time.Time
	// Retry is the retry state of the event after Watermark.
	Retry WebhookRetry
	// Status is what deliveryStatus reports.
	Status WebhookStatus
	// Attempts are the subscription's last delivery attempts (events,
	// gap and terminated envelopes), oldest first, at most
	// MaxWebhookAttempts: the operator's view of it (docs/operations.md).
	Attempts []WebhookAttempt

	// Version is the optimistic-concurrency token of UpdateWebhook; set
	// by the store.
	Version int64
}

// WebhookRetry is the retry state of the first undelivered event of a
// subscription.
type WebhookRetry struct {
	Seq       int64     // the event being retried; 0: none
	Attempts  int       // attempts made so far
	FirstAt   time.Time // the first attempt
	NextAt    time.Time // not before then
	Abandoned int       // events abandoned since the last accepted delivery
	// Gap, when not 0, is the Seq up to which events were abandoned and
	// a gap envelope is owed to the receiver: it is POSTed (with a cursor
	// at Gap) before the next event.
	Gap int64
}

// WebhookStatus is the delivery status of a subscription.
type WebhookStatus struct {
	// Suspended: delivery stopped after sustained failure, until the next
	// refresh.
	Suspended      bool
	LastDeliveryAt time.Time // the last accepted delivery
	LastError      string    // the category of the last failure; "" after a success
	FailedSince    time.Time // the first failure since the last success
}

// MaxWebhookAttempts bounds WebhookSubscription.Attempts (RecordAttempt
// keeps the last ones): 8 attempts of at most 64 bytes of category add
// under 1 KiB to a record.
const MaxWebhookAttempts = 8

// maxAttemptCategory bounds WebhookAttempt.Category as stored.
const maxAttemptCategory = 64

// WebhookAttempt is one delivery attempt to a subscription's callback.
type WebhookAttempt struct {
	At       time.Time     // when it ended
	Seq      int64         // the event's Seq (of the event after a gap envelope's)
	Status   int           // the HTTP status; 0 when none came (a timeout, a refused address)
	Category string        // the outcome category (webhook.Outcome.Category): "ok", "http_5xx", "timeout", ...
	Latency  time.Duration // from the request's start to its end
}

// RecordAttempt appends a to w.Attempts, keeping the last
// MaxWebhookAttempts.
func (w *WebhookSubscription) RecordAttempt(a WebhookAttempt) {
	if len(a.Category) > maxAttemptCategory {
		a.Category = a.Category[:maxAttemptCategory]
	}
	w.Attempts = append(w.Attempts, a)
	if n := len(w.Attempts); n > MaxWebhookAttempts {
		w.Attempts = append(w.Attempts[:0:0], w.Attempts[n-MaxWebhookAttempts:]...)
	}
}

// webhookAttempt is the stored encoding of a WebhookAttempt.
type webhookAttempt struct {
	At       int64  `json:"t"`
	Seq      int64  `json:"q,omitempty"`
	Status   int    `json:"s,omitempty"`
	Category string `json:"c"`
	Latency  int64  `json:"l"` // microseconds
}

// Live reports whether w has not expired at now.
func (w *WebhookSubscription) Live(now time.Time) bool {
	return w.ExpiresAt.IsZero() || w.ExpiresAt.After(now)
}

// webhookBody is the stored encoding of a record's fields.
type webhookBody struct {
	Principal string           `json:"p"`
	Name      string           `json:"n"`
	URL       string           `json:"u"`
	Arguments json.RawMessage  `json:"a,omitempty"`
	Claims    Claims           `json:"cl,omitempty"`
	Secrets   []byte           `json:"s"`
	CreatedAt int64            `json:"c"`
	UpdatedAt int64            `json:"m"`
	ExpiresAt int64            `json:"x,omitempty"`
	Verified  bool             `json:"v,omitempty"`
	Watermark int64            `json:"w"`
	Lease     int64            `json:"l,omitempty"`
	RSeq      int64            `json:"rs,omitempty"`
	RAttempts int              `json:"ra,omitempty"`
	RFirst    int64            `json:"rf,omitempty"`
	RNext     int64            `json:"rn,omitempty"`
	RAband    int              `json:"rb,omitempty"`
	RGap      int64            `json:"rg,omitempty"`
	Suspended bool             `json:"su,omitempty"`
	LastAt    int64            `json:"ld,omitempty"`
	LastError string           `json:"le,omitempty"`
	FailedAt  int64            `json:"fs,omitempty"`
	Attempts  []webhookAttempt `json:"at,omitempty"`
}

// CheckWebhook validates a record the same way for every store, and
// returns the encoding of its fields (all but Topic, ID and Version).
func CheckWebhook(w *WebhookSubscription) ([]byte, error) {
	switch {
	case w == nil || w.ID == "" || w.Topic == "" || w.Principal == "" || w.Name == "" || w.URL == "":
		return nil, fmt.Errorf("%w: a webhook subscription needs a topic, an id, a principal, a name and a URL", ErrInvalid)
	case len(w.Topic) > MaxEventNameLen || len(w.Name) > MaxEventNameLen:
		return nil, fmt.Errorf("%w: topic or event name over %d bytes", ErrTooLarge, MaxEventNameLen)
	case len(w.ID) > 128 || len(w.Principal) > MaxURIBytes || len(w.URL) > MaxURIBytes:
		return nil, fmt.Errorf("%w: id, principal or URL too long (limits 128, %d, %d bytes)", ErrTooLarge, MaxURIBytes, MaxURIBytes)
	}
	if len(w.Attempts) > MaxWebhookAttempts {
		return nil, fmt.Errorf("%w: %d webhook attempts, limit %d", ErrTooLarge, len(w.Attempts), MaxWebhookAttempts)
	}
	var attempts []webhookAttempt
	for _, a := range w.Attempts {
		if len(a.Category) > maxAttemptCategory {
			return nil, fmt.Errorf("%w: webhook attempt category over %d bytes", ErrTooLarge, maxAttemptCategory)
		}
		attempts = append(attempts, webhookAttempt{At: UnixNanos(a.At), Seq: a.Seq, Status: a.Status, Category: a.Category, Latency: a.Latency.Microseconds()})
	}
	b, err := json.Marshal(webhookBody{
		Principal: w.Principal, Name: w.Name, URL: w.URL, Arguments: w.Arguments, Claims: w.Claims, Secrets: w.Secrets,
		CreatedAt: UnixNanos(w.CreatedAt), UpdatedAt: UnixNanos(w.UpdatedAt), ExpiresAt: UnixNanos(w.ExpiresAt),
		Verified: w.Verified, Watermark: w.Watermark, Lease: UnixNanos(w.LeaseUntil),
		RSeq: w.Retry.Seq, RAttempts: w.Retry.Attempts, RFirst: UnixNanos(w.Retry.FirstAt), RNext: UnixNanos(w.Retry.NextAt), RAband: w.Retry.Abandoned, RGap: w.Retry.Gap,
		Suspended: w.Status.Suspended, LastAt: UnixNanos(w.Status.LastDeliveryAt), LastError: w.Status.LastError, FailedAt: UnixNanos(w.Status.FailedSince),
		Attempts: attempts,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: encoding webhook subscription: %v", ErrInvalid, err)
	}
	if len(b) > MaxItemBytes {
		return nil, fmt.Errorf("%w: webhook subscription of %d bytes, limit %d", ErrTooLarge, len(b), MaxItemBytes)
	}
	return b, nil
}

// DecodeWebhook is the inverse of CheckWebhook, for stores.
func DecodeWebhook(topic, id string, version int64, b []byte) (*WebhookSubscription, error) {
	var body webhookBody
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, fmt.Errorf("decoding webhook subscription %q: %w", id, err)
	}
	var attempts []WebhookAttempt
	for _, a := range body.Attempts {
		attempts = append(attempts, WebhookAttempt{At: FromUnixNanos(a.At), Seq: a.Seq, Status: a.Status, Category: a.Category, Latency: time.Duration(a.Latency) * time.Microsecond})
	}
	return &WebhookSubscription{
		Topic: topic, ID: id, Version: version, Attempts: attempts,
		Principal: body.Principal, Name: body.Name, URL: body.URL, Arguments: body.Arguments, Claims: body.Claims, Secrets: body.Secrets,
		CreatedAt: FromUnixNanos(body.CreatedAt), UpdatedAt: FromUnixNanos(body.UpdatedAt), ExpiresAt: FromUnixNanos(body.ExpiresAt),
		Verified: body.Verified, Watermark: body.Watermark, LeaseUntil: FromUnixNanos(body.Lease),
		Retry:  WebhookRetry{Seq: body.RSeq, Attempts: body.RAttempts, FirstAt: FromUnixNanos(body.RFirst), NextAt: FromUnixNanos(body.RNext), Abandoned: body.RAband, Gap: body.RGap},
		Status: WebhookStatus{Suspended: body.Suspended, LastDeliveryAt: FromUnixNanos(body.LastAt), LastError: body.LastError, FailedSince: FromUnixNanos(body.FailedAt)},
	}, nil
}

// CheckWebhookPage validates the arguments of TopicWebhooks.
func CheckWebhookPage(topic string, limit int) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w: empty topic", ErrInvalid)
	case limit < 1 || limit > MaxWebhookPage:
		return fmt.Errorf("%w: page of %d webhook subscriptions (want 1 to %d)", ErrInvalid, limit, MaxWebhookPage)
	}
	return nil
}

// WebhookSecrets is the plaintext of a subscription's Secrets: the
// current signing secret ("whsec_..."), and during a rotation's grace
// window the previous one, with the end of the window.
type WebhookSecrets struct {
	Current       string    `json:"c"`
	Previous      string    `json:"p,omitempty"`
	PreviousUntil time.Time `json:"pu,omitzero"`
}

// WebhookSealLabel is the Sealer label of webhook secrets.
const WebhookSealLabel = "webhook secrets"

func webhookAAD(w *WebhookSubscription) []byte {
	return []byte("webhook\x00" + w.Topic + "\x00" + w.ID)
}

// SealSecrets sets w.Secrets to sec sealed by s, bound to w's topic and
// id.
func (w *WebhookSubscription) SealSecrets(s *Sealer, sec WebhookSecrets) {
	b, _ := json.Marshal(sec)
	w.Secrets = s.Seal(b, webhookAAD(w))
}

// OpenSecrets returns w's secrets, opened by s.
func (w *WebhookSubscription) OpenSecrets(s *Sealer) (WebhookSecrets, error) {
	var sec WebhookSecrets
	b, err := s.Open(w.Secrets, webhookAAD(w))
	if err != nil {
		return sec, fmt.Errorf("webhook subscription %s: %w", w.ID, err)
	}
	if err := json.Unmarshal(b, &sec); err != nil {
		return sec, fmt.Errorf("webhook subscription %s: secrets: %w", w.ID, err)
	}
	return sec, nil
}

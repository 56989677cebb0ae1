package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// Webhook delivery of the Events extension: events/subscribe and
// events/unsubscribe (SEP-3415). A subscription is a durable record in
// the store (notify.WebhookSubscription), keyed by its topic and a
// deterministic id over (principal, url, name, canonical arguments); any
// process refreshes or removes it, and the ingest delivers to it (see
// docs/events.md). Only an authenticated principal may subscribe. The
// signing secrets are sealed with a key derived from the state keys
// before they reach the store, and are never logged or returned.

// Bounds and defaults of webhook subscriptions (WebhookOptions).
const (
	// DefaultWebhookTTL is the grant of a subscribe without ttlMs;
	// MinWebhookTTL and MaxWebhookTTL the floor and ceiling a ttlMs is
	// clamped to.
	DefaultWebhookTTL = time.Hour
	MinWebhookTTL     = time.Minute
	MaxWebhookTTL     = 24 * time.Hour
	// DefaultSecretGrace is how long the previous secret still signs
	// after a rotation.
	DefaultSecretGrace = time.Hour
	// DefaultVerifyRate bounds the verification handshakes one principal
	// starts per minute (each is a POST to a URL it names).
	DefaultVerifyRate = 10
	// DefaultVerifyDestinationRate bounds the verification handshakes
	// POSTed to one origin (scheme, host, port) per minute, whoever asks:
	// principals together cannot flood a receiver with them.
	DefaultVerifyDestinationRate = 10
	// VerifiedTTL is how long a verified (principal, url, secret) stands:
	// that principal's new subscriptions to that URL (other arguments, a
	// resubscribe after an expiry or an unsubscribe) are not verified
	// again until it passes (as Hookdeck Outpost does).
	VerifiedTTL = 24 * time.Hour
)

// WebhookOptions configure webhook delivery (ServerOptions.Webhooks).
// Zero fields take the defaults above.
type WebhookOptions struct {
	// Sender checks callback URLs (its Policy) and runs the verification
	// handshake. Required.
	Sender *webhook.Sender
	// DefaultTTL, MinTTL and MaxTTL: the grant without ttlMs, and the
	// floor and ceiling of a suggested one.
	DefaultTTL, MinTTL, MaxTTL time.Duration
	// RefuseNoExpiry, if set, answers ttlMs: null with a MaxTTL grant
	// instead of no expiry.
	RefuseNoExpiry bool
	// MaxPerPrincipal bounds a principal's live subscriptions
	// (ResourceExhausted, data.limit "subscriptions"). Default
	// notify.MaxWebhooksPerPrincipal.
	MaxPerPrincipal int
	// SecretGrace is how long a rotated-out secret still signs.
	SecretGrace time.Duration
	// VerifyRate bounds the verification handshakes one principal starts
	// per minute, counted in the store across processes.
	VerifyRate int
	// VerifyDestinationRate bounds the verification handshakes POSTed to
	// one origin per minute, counted in the store across processes.
	VerifyDestinationRate int
}

func (o *WebhookOptions) withDefaults() *WebhookOptions {
	c := *o
	if c.DefaultTTL <= 0 {
		c.DefaultTTL = DefaultWebhookTTL
	}
	if c.MinTTL <= 0 {
		c.MinTTL = MinWebhookTTL
	}
	if c.MaxTTL <= 0 {
		c.MaxTTL = MaxWebhookTTL
	}
	if c.MaxPerPrincipal <= 0 {
		c.MaxPerPrincipal = notify.MaxWebhooksPerPrincipal
	}
	if c.SecretGrace <= 0 {
		c.SecretGrace = DefaultSecretGrace
	}
	if c.VerifyRate <= 0 {
		c.VerifyRate = DefaultVerifyRate
	}
	if c.VerifyDestinationRate <= 0 {
		c.VerifyDestinationRate = DefaultVerifyDestinationRate
	}
	return &c
}

// WebhookDelivery is the delivery member of events/subscribe and
// events/unsubscribe.
type WebhookDelivery struct {
	Mode   string `json:"mode,omitempty"`
	URL    string `json:"url"`
	Secret string `json:"secret,omitempty"`
}

// SubscribeEventsParams are the params of events/subscribe. TTLMs absent
// asks for the server's default, the JSON null for no expiry (set it to
// json.RawMessage("null")), a number for that many milliseconds.
type SubscribeEventsParams struct {
	Name      string           `json:"name"`
	Arguments json.RawMessage  `json:"arguments,omitempty"`
	Delivery  *WebhookDelivery `json:"delivery"`
	Cursor    *string          `json:"cursor"`
	MaxAgeMs  *int64           `json:"maxAgeMs,omitempty"`
	TTLMs     json.RawMessage  `json:"ttlMs,omitempty"`
	Meta      Meta             `json:"_meta,omitempty"`
}

// UnsubscribeEventsParams are the params of events/unsubscribe.
type UnsubscribeEventsParams struct {
	Name      string           `json:"name"`
	Arguments json.RawMessage  `json:"arguments,omitempty"`
	Delivery  *WebhookDelivery `json:"delivery"`
	Meta      Meta             `json:"_meta,omitempty"`
}

// DeliveryStatus is the deliveryStatus of a refresh.
type DeliveryStatus struct {
	Active         bool    `json:"active"`
	LastDeliveryAt *string `json:"lastDeliveryAt"`
	LastError      *string `json:"lastError"`
	FailedSince    *string `json:"failedSince,omitempty"`
}

// SubscribeEventsResult is the result of events/subscribe.
// RefreshBefore is nil for a subscription granted no expiry.
type SubscribeEventsResult struct {
	ResultType     string          `json:"resultType,omitempty"`
	ID             string          `json:"id"`
	RefreshBefore  *string         `json:"refreshBefore"`
	Cursor         *string         `json:"cursor"`
	Truncated      bool            `json:"truncated"`
	DeliveryStatus *DeliveryStatus `json:"deliveryStatus,omitempty"`
}

// UnsubscribeEventsResult is the (empty) result of events/unsubscribe.
type UnsubscribeEventsResult struct {
	ResultType string `json:"resultType,omitempty"`
}

// webhookStore returns the store's webhook subscriptions, nil when
// webhook delivery is not served.
func (s *Server) webhookStore() notify.WebhookStore {
	if s.opts.Webhooks == nil || s.opts.Webhooks.Sender == nil {
		return nil
	}
	return s.store
}

// webhookSealer seals and opens subscriptions' secrets.
func (s *Server) webhookSealer() (*notify.Sealer, error) {
	return notify.NewSealer(s.states.keys, notify.WebhookSealLabel)
}

// WebhookSubscriptionID returns the id of the subscription (principal,
// url, name, arguments): "sub_" and 32 hex digits of a SHA-256 over the
// four, arguments in canonical JSON (CanonicalArguments).
func WebhookSubscriptionID(principal, url, name string, canonicalArgs []byte) string {
	h := sha256.New()
	for _, p := range []string{"mcpush webhook subscription v1", principal, url, name} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	h.Write(canonicalArgs)
	return "sub_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// CanonicalArguments returns arguments (a JSON object, or absent or null
// for none) in canonical form: members sorted by name, no insignificant
// space, no HTML escaping, integers in decimal, other numbers in their
// shortest float64 form; absent, null and {} are all "{}". A value that
// is not an object is an error.
func CanonicalArguments(raw json.RawMessage) ([]byte, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return []byte("{}"), nil
	}
	if t[0] != '{' {
		return nil, errors.New("arguments must be a JSON object")
	}
	v, err := decodeNumbers(t)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := canonical(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func canonical(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			canonicalString(b, k)
			b.WriteByte(':')
			if err := canonical(b, v[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := canonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case json.Number:
		r, ok := new(big.Rat).SetString(string(v))
		if !ok {
			return fmt.Errorf("bad number %s", v)
		}
		if r.IsInt() {
			b.WriteString(r.Num().String())
			return nil
		}
		f, _ := r.Float64()
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	case string:
		canonicalString(b, v)
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	default:
		return fmt.Errorf("unexpected %T", v)
	}
	return nil
}

func canonicalString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	b.Truncate(b.Len() - 1) // Encode's newline
}

// authenticated returns the request's authenticated principal, or
// Forbidden: an anonymous client (its principal empty, or its address)
// may poll but not subscribe a webhook (SEP-3415).
func (s *Server) authenticated(ss *ServerSession, method string) (string, error) {
	p := ss.Principal()
	if p == "" || strings.HasPrefix(p, addressPrefix) {
		return "", s.eventsError(CodeForbidden, "Forbidden: "+method+" needs an authenticated principal, and this request has none (webhook delivery needs a server with authentication: MCPUSH_AUTH=oauth or iam; poll and push work without)", map[string]string{"reason": "unauthenticated"})
	}
	return p, nil
}

// noWebhooks is the answer to events/subscribe and events/unsubscribe on
// a server that does not deliver by webhook: Unsupported (not method
// not found: the extension is declared), naming MCPUSH_AUTH, since
// functions/mcp delivers by webhook only with authentication.
func (s *Server) noWebhooks() *Error {
	return s.eventsError(CodeUnsupported, "Unsupported: this server does not deliver events by webhook (mcpush serves webhook delivery only with authentication: set MCPUSH_AUTH=oauth or iam; events/poll and events/stream work without)", map[string]string{"feature": "deliveryMode", "value": notify.DeliveryWebhook})
}

// webhookKey is a checked subscription key.
type webhookKey struct {
	principal string
	event     *notify.EventItem
	url       string
	args      []byte // canonical
	id        string
}

// checkWebhookKey checks what events/subscribe and events/unsubscribe
// share: the principal, the store, the event type, its arguments (against
// the inputSchema when validate) and the callback URL.
func (s *Server) checkWebhookKey(ctx context.Context, ss *ServerSession, method, name string, args json.RawMessage, d *WebhookDelivery, validate bool) (*webhookKey, notify.WebhookStore, error) {
	ws := s.webhookStore()
	if ws == nil {
		return nil, nil, s.noWebhooks()
	}
	principal, err := s.authenticated(ss, method)
	if err != nil {
		return nil, nil, err
	}
	e, err := s.eventType(ctx, name, notify.DeliveryWebhook)
	if err != nil {
		return nil, nil, err
	}
	if args, err = s.bindArguments(ctx, e, args); err != nil {
		return nil, nil, err
	}
	if validate {
		if _, err := eventFilter(e, args); err != nil {
			return nil, nil, err
		}
	} else if len(args) > MaxEventArgumentsBytes {
		return nil, nil, Errorf(CodeInvalidParams, "invalid params: arguments are %d bytes, more than %d", len(args), MaxEventArgumentsBytes)
	}
	canon, err := CanonicalArguments(args)
	if err != nil {
		return nil, nil, Errorf(CodeInvalidParams, "invalid params: arguments: %v", err)
	}
	if d == nil || d.URL == "" {
		return nil, nil, Errorf(CodeInvalidParams, "invalid params: delivery.url is required")
	}
	if d.Mode != "" && d.Mode != notify.DeliveryWebhook {
		return nil, nil, s.eventsError(CodeUnsupported, "Unsupported: "+method+" is for webhook delivery only", map[string]string{"feature": "deliveryMode", "value": clipText(d.Mode, 32)})
	}
	if err := s.opts.Webhooks.Sender.Policy().CheckURL(d.URL); err != nil {
		return nil, nil, Errorf(CodeInvalidParams, "invalid params: delivery.url: %v", err)
	}
	return &webhookKey{principal: principal, event: e, url: d.URL, args: canon, id: WebhookSubscriptionID(principal, d.URL, e.Name, canon)}, ws, nil
}

// grant returns the expiry granted for a ttlMs suggestion at now (the
// zero time: no expiry).
func (o *WebhookOptions) grant(raw json.RawMessage, now time.Time) (time.Time, error) {
	t := bytes.TrimSpace(raw)
	switch {
	case len(t) == 0:
		return now.Add(o.DefaultTTL), nil
	case bytes.Equal(t, []byte("null")):
		if o.RefuseNoExpiry {
			return now.Add(o.MaxTTL), nil
		}
		return time.Time{}, nil
	}
	var ms float64
	if err := json.Unmarshal(t, &ms); err != nil || ms != ms {
		return time.Time{}, Errorf(CodeInvalidParams, "invalid params: ttlMs must be a number of milliseconds or null")
	}
	d := o.MaxTTL
	if ms < float64(o.MaxTTL.Milliseconds()) {
		d = time.Duration(max(ms, 0)) * time.Millisecond
	}
	return now.Add(min(max(d, o.MinTTL), o.MaxTTL)), nil
}

// subscribeEvents answers events/subscribe.
func (s *Server) subscribeEvents(ctx context.Context, ss *ServerSession, raw json.RawMessage) (*SubscribeEventsResult, error) {
	p, err := decodeParams[SubscribeEventsParams](raw)
	if err != nil {
		return nil, err
	}
	k, ws, err := s.checkWebhookKey(ctx, ss, "events/subscribe", p.Name, p.Arguments, p.Delivery, true)
	if err != nil {
		return nil, err
	}
	if p.Delivery.Secret == "" {
		return nil, Errorf(CodeInvalidParams, "invalid params: delivery.secret is required (whsec_ and the base64 of 24 to 64 random bytes)")
	}
	secret, err := webhook.ParseSecret(p.Delivery.Secret)
	if err != nil {
		return nil, Errorf(CodeInvalidParams, "invalid params: delivery.secret: %v", err)
	}
	o := s.opts.Webhooks.withDefaults()
	now := s.opts.Now()
	expires, err := o.grant(p.TTLMs, now)
	if err != nil {
		return nil, err
	}
	expires = accessCeiling(k.event, expires, now, o.MaxTTL)
	if p.MaxAgeMs != nil && *p.MaxAgeMs < 0 {
		return nil, Errorf(CodeInvalidParams, "invalid params: maxAgeMs must not be negative")
	}
	var start *eventCursor
	if p.Cursor != nil {
		if start, err = s.states.verifyCursor(*p.Cursor, k.event.Name); err != nil {
			return nil, Errorf(CodeInvalidParams, "invalid params: cursor: %v", err)
		}
	}
	sealer, err := s.webhookSealer()
	if err != nil {
		return nil, err
	}
	for range 5 {
		w, err := ws.GetWebhook(ctx, k.event.Topic, k.id)
		switch {
		case errors.Is(err, notify.ErrNotFound):
			res, err := s.createWebhook(ctx, ws, o, sealer, k, secret, expires, start, p.MaxAgeMs)
			if errors.Is(err, notify.ErrExists) {
				continue // created meanwhile by a concurrent subscribe: refresh it
			}
			return res, err
		case err != nil:
			return nil, err
		case w.Principal != k.principal || w.URL != k.url || w.Name != k.event.Name:
			return nil, fmt.Errorf("webhook subscription %s: stored key differs (an id collision)", k.id)
		}
		w.Claims = recordedClaims(ctx, k.event)
		if w.Status.Suspended {
			// A refresh reactivates a suspended subscription: its
			// callback, failing for an hour, must answer the handshake
			// again first (whatever was verified before).
			if err := s.verifyCallback(ctx, ws, o, k, secret, true); err != nil {
				return nil, err
			}
		}
		res, err := s.refreshWebhook(ctx, ws, o, sealer, w, secret, expires, now)
		if errors.Is(err, notify.ErrConflict) || errors.Is(err, notify.ErrNotFound) {
			continue // changed (a delivery) or lapsed meanwhile: read again
		}
		return res, err
	}
	return nil, Errorf(CodeInternalError, "internal error: the subscription kept changing; try again")
}

// createWebhook verifies the callback and stores a new subscription.
// Nothing is stored when the verification fails. Before any POST: the
// principal's subscription bound, then the verification cache (a
// (principal, url) verified in the last VerifiedTTL is not verified
// again), then the callback's name resolved and checked, then the
// handshakes' rates (per principal, per destination origin).
func (s *Server) createWebhook(ctx context.Context, ws notify.WebhookStore, o *WebhookOptions, sealer *notify.Sealer, k *webhookKey, secret webhook.Secret, expires time.Time, start *eventCursor, maxAgeMs *int64) (*SubscribeEventsResult, error) {
	watermark, truncated, err := s.startPosition(ctx, k.event, start, maxAgeMs)
	if err != nil {
		return nil, err
	}
	switch n, err := ws.CountWebhooks(ctx, k.principal, o.MaxPerPrincipal); {
	case err != nil:
		return nil, err
	case n >= o.MaxPerPrincipal:
		return nil, s.tooManyWebhooks(o)
	}
	if err := s.verifyCallback(ctx, ws, o, k, secret, false); err != nil {
		return nil, err
	}
	now := s.opts.Now()
	w := &notify.WebhookSubscription{
		Topic: k.event.Topic, ID: k.id, Principal: k.principal, Name: k.event.Name, URL: k.url,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: expires, Verified: true, Watermark: watermark,
		Claims: recordedClaims(ctx, k.event),
	}
	if !bytes.Equal(k.args, []byte("{}")) {
		w.Arguments = k.args
	}
	w.SealSecrets(sealer, notify.WebhookSecrets{Current: secret.Reveal()})
	switch err := ws.CreateWebhook(ctx, w, o.MaxPerPrincipal); {
	case errors.Is(err, notify.ErrLimit):
		return nil, s.tooManyWebhooks(o) // reached meanwhile (a race of the principal's own subscribes)
	case err != nil:
		return nil, err
	}
	s.log.InfoContext(ctx, "webhook subscription created", "subscription", w.ID, "event", w.Name, "noExpiry", w.ExpiresAt.IsZero())
	return s.webhookResult(w, truncated, false), nil
}

// refreshWebhook refreshes a live subscription: a new grant, the secret
// replaced (the previous one signs on for the grace window), delivery
// reactivated. The cursor of the request is a no-op: the subscription is
// live, and delivery goes on from its watermark.
func (s *Server) refreshWebhook(ctx context.Context, ws notify.WebhookStore, o *WebhookOptions, sealer *notify.Sealer, w *notify.WebhookSubscription, secret webhook.Secret, expires, now time.Time) (*SubscribeEventsResult, error) {
	sec, err := w.OpenSecrets(sealer)
	if err != nil {
		return nil, err
	}
	if cur := secret.Reveal(); sec.Current != cur {
		sec = notify.WebhookSecrets{Current: cur, Previous: sec.Current, PreviousUntil: now.Add(o.SecretGrace)}
	} else if !sec.PreviousUntil.IsZero() && !sec.PreviousUntil.After(now) {
		sec = notify.WebhookSecrets{Current: cur}
	}
	res := s.webhookResult(w, false, true) // the status as it was: "active: false" says the refresh reactivated it
	w.SealSecrets(sealer, sec)
	w.ExpiresAt, w.UpdatedAt = expires, now
	if w.Status.Suspended {
		// Reactivated: pending events are retried now, their window
		// afresh, and the failure window too (else the next failure
		// would suspend it again at once: it failed for an hour).
		w.Status.Suspended = false
		w.Status.FailedSince = time.Time{}
		w.Retry.FirstAt, w.Retry.NextAt = now, now
	}
	if err := ws.UpdateWebhook(ctx, w); err != nil {
		return nil, err
	}
	res.RefreshBefore = refreshBefore(w.ExpiresAt)
	return res, nil
}

// webhookResult is the subscribe result of w.
func (s *Server) webhookResult(w *notify.WebhookSubscription, truncated, status bool) *SubscribeEventsResult {
	c := s.states.signCursor(eventCursor{Name: w.Name, Topic: w.Topic, Seq: w.Watermark})
	res := &SubscribeEventsResult{ResultType: resultComplete, ID: w.ID, RefreshBefore: refreshBefore(w.ExpiresAt), Cursor: &c, Truncated: truncated}
	if status {
		res.DeliveryStatus = &DeliveryStatus{Active: !w.Status.Suspended, LastDeliveryAt: isoTime(w.Status.LastDeliveryAt), FailedSince: isoTime(w.Status.FailedSince)}
		if w.Status.LastError != "" {
			e := webhook.WireCategory(w.Status.LastError)
			res.DeliveryStatus.LastError = &e
		}
	}
	return res
}

func refreshBefore(t time.Time) *string { return isoTime(t) }

func isoTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	v := t.UTC().Format("2006-01-02T15:04:05.000Z")
	return &v
}

// startPosition is where a new subscription's delivery starts: the head
// of the topic for no cursor; else the cursor's position, moved (and
// truncated) past what the log no longer keeps, past events older than
// maxAgeMs (scanning at most maxPollScan events; beyond that, the head),
// or to the head when the event type moved to another topic.
func (s *Server) startPosition(ctx context.Context, e *notify.EventItem, c *eventCursor, maxAgeMs *int64) (int64, bool, error) {
	head, err := s.store.TopicHead(ctx, e.Topic)
	if err != nil || c == nil {
		return head, false, err
	}
	if c.Topic != e.Topic || c.Seq > head {
		return head, c.Topic != e.Topic, nil
	}
	pos, truncated := c.Seq, false
	var floor time.Time
	if maxAgeMs != nil {
		floor = s.opts.Now().Add(-time.Duration(min(*maxAgeMs, int64(1<<62)/int64(time.Millisecond))) * time.Millisecond)
	}
	for scanned := 0; pos < head; {
		evs, err := s.store.ReadTopicEvents(ctx, e.Topic, pos, pollBatch)
		if err != nil {
			return 0, false, err
		}
		if len(evs) == 0 {
			return head, true, nil // what follows the cursor left the log
		}
		if scanned == 0 && evs[0].Seq > pos+1 {
			truncated = true
		}
		for _, ev := range evs {
			if floor.IsZero() || !ev.ReceivedAt.Before(floor) {
				return ev.Seq - 1, truncated, nil
			}
			pos, truncated = ev.Seq, true
			scanned++
		}
		if scanned >= maxPollScan {
			return head, true, nil
		}
	}
	return pos, truncated, nil
}

// tooManyWebhooks is the answer to a subscribe over MaxPerPrincipal.
func (s *Server) tooManyWebhooks(o *WebhookOptions) *Error {
	return s.eventsError(CodeResourceExhausted, fmt.Sprintf("ResourceExhausted: at most %d webhook subscriptions per principal", o.MaxPerPrincipal), map[string]any{"limit": "subscriptions", "max": o.MaxPerPrincipal})
}

// verifiedKey is the store's key of a verified (principal, url, secret):
// "wv2:" and the hex SHA-256 of the three (a fixed size, whatever the
// URL's; the secret never stored). The secret is in it because the
// handshake proves the receiver holds it: a subscription to the same URL
// with another secret is verified again.
func verifiedKey(principal, url, secret string) string {
	h := sha256.New()
	for _, p := range []string{"mcpush webhook verified v2", principal, url, secret} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "wv2:" + hex.EncodeToString(h.Sum(nil))
}

// verifyCallback makes sure k's callback wants deliveries: a pass of the
// handshake by k's principal for k's URL with this secret in the last
// VerifiedTTL stands (no POST) unless again (a suspended subscription's refresh); otherwise the URL's host is resolved and must have a
// globally routable address (an allowed origin is not checked), the
// principal's and the destination's handshake rates must allow one
// more, and either the origin's receiver document
// (webhook.WellKnownReceiverPath) covers the URL or the handshake passes;
// the pass is then recorded.
func (s *Server) verifyCallback(ctx context.Context, ws notify.WebhookStore, o *WebhookOptions, k *webhookKey, secret webhook.Secret, again bool) error {
	vk := verifiedKey(k.principal, k.url, secret.Reveal())
	switch ok, err := ws.WebhookVerified(ctx, vk); {
	case err != nil:
		return err
	case ok && !again:
		return nil
	}
	if err := o.Sender.Policy().CheckResolved(ctx, k.url); err != nil {
		if errors.Is(err, webhook.ErrBlockedAddress) || errors.Is(err, webhook.ErrInvalidURL) {
			return Errorf(CodeInvalidParams, "invalid params: delivery.url: its host has no globally routable address")
		}
		s.log.InfoContext(ctx, "webhook callback does not resolve", "subscription", k.id, "err", err)
		reason := webhook.WireCategory(webhook.CategoryConnectionRefused)
		return s.eventsError(CodeCallbackEndpointError, "CallbackEndpointError: the callback's host does not resolve ("+reason+")", map[string]string{"reason": reason})
	}
	if err := s.allowVerification(ctx, o, k.principal, k.url); err != nil {
		return err
	}
	covered, err := o.Sender.ReceiverDocument(ctx, k.url)
	if err != nil {
		s.log.DebugContext(ctx, "no webhook receiver document", "subscription", k.id, "err", err)
	}
	if covered {
		s.log.InfoContext(ctx, "webhook callback verified by its origin's receiver document", "subscription", k.id)
	} else if out := countVerification(ctx, o.Sender.Verify(ctx, k.url, k.id, []webhook.Secret{secret})); !out.OK() {
		s.log.InfoContext(ctx, "webhook verification failed", "subscription", k.id, "category", out.Category, "err", out.Err)
		return s.eventsError(CodeCallbackEndpointError, "CallbackEndpointError: the callback did not pass verification ("+webhook.WireCategory(out.Category)+")", map[string]string{"reason": webhook.WireCategory(out.Category)})
	}
	if err := ws.PutWebhookVerified(ctx, vk, s.opts.Now().Add(VerifiedTTL)); err != nil {
		// The subscription is verified all the same; the next one to
		// this URL is verified again.
		s.log.WarnContext(ctx, "recording a webhook verification", "subscription", k.id, "err", err)
	}
	return nil
}

// allowVerification bounds the verification handshakes: VerifyRate a
// minute started by principal, VerifyDestinationRate a minute POSTed to
// rawURL's origin, each counted in the store across processes.
func (s *Server) allowVerification(ctx context.Context, o *WebhookOptions, principal, rawURL string) error {
	now := s.opts.Now()
	window := now.Unix() / 60
	n, err := s.store.CountInWindow(ctx, "webhook-verify\x00"+principalTag(principal), window, 1, now.Add(2*time.Minute))
	if err != nil {
		return err
	}
	if n > int64(o.VerifyRate) {
		return s.eventsError(CodeResourceExhausted, fmt.Sprintf("ResourceExhausted: at most %d webhook verifications a minute per principal; try again in a minute", o.VerifyRate), map[string]any{"limit": "verifications", "max": o.VerifyRate})
	}
	origin, err := webhook.URLOrigin(rawURL)
	if err != nil {
		return Errorf(CodeInvalidParams, "invalid params: delivery.url: %v", err)
	}
	n, err = s.store.CountInWindow(ctx, "webhook-verify-dest\x00"+origin.String(), window, 1, now.Add(2*time.Minute))
	if err != nil {
		return err
	}
	if n > int64(o.VerifyDestinationRate) {
		return s.eventsError(CodeResourceExhausted, fmt.Sprintf("ResourceExhausted: at most %d webhook verifications a minute to one callback origin; try again in a minute", o.VerifyDestinationRate), map[string]any{"limit": "destinationVerifications", "max": o.VerifyDestinationRate})
	}
	return nil
}

// unsubscribeEvents answers events/unsubscribe: the subscription of the
// same key is deleted, or NotFound (data.kind "subscription"), also when
// it is another principal's (its key differs).
func (s *Server) unsubscribeEvents(ctx context.Context, ss *ServerSession, raw json.RawMessage) (*UnsubscribeEventsResult, error) {
	p, err := decodeParams[UnsubscribeEventsParams](raw)
	if err != nil {
		return nil, err
	}
	k, ws, err := s.checkWebhookKey(ctx, ss, "events/unsubscribe", p.Name, p.Arguments, p.Delivery, false)
	if err != nil {
		return nil, err
	}
	w, err := ws.GetWebhook(ctx, k.event.Topic, k.id)
	if err == nil {
		err = ws.DeleteWebhook(ctx, w)
	}
	if errors.Is(err, notify.ErrNotFound) {
		return nil, s.eventsError(CodeNotFound, "NotFound: no webhook subscription of "+k.event.Name+" to that URL with those arguments", map[string]string{"kind": "subscription"})
	}
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "webhook subscription removed", "subscription", w.ID, "event", w.Name)
	return &UnsubscribeEventsResult{ResultType: resultComplete}, nil
}

package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Receiver defaults.
const (
	DefaultTolerance = 5 * time.Minute // webhook-timestamp may be this far from now, either way
	DefaultDedup     = 4096            // (subscription, webhook-id) pairs remembered
	maxSubIDLen      = maxHeaderValue
)

// Delivery is one verified POST as a Receiver's Handle sees it: exactly
// one of Event and Control is set.
type Delivery struct {
	SubscriptionID string // X-MCP-Subscription-Id
	WebhookID      string // webhook-id
	Timestamp      time.Time
	Event          *EventOccurrence
	Control        *Control
	Raw            []byte // the body as received (and as signed)
}

// Receiver is an http.Handler that receives webhook deliveries. For each
// request it: accepts POST only (405); bounds the body (413 over
// MaxBody); looks up the subscription's secrets (503, retryable, for a
// subscription it does not know); verifies the Standard Webhooks
// signature over the raw body with the standard-webhooks library and the
// timestamp within 5 minutes of Now (401 otherwise); parses the body
// (400 if it is neither an EventOccurrence nor a control envelope); and
// answers a webhook-id handled recently for the same subscription with
// 200 without handling it again (503, Retry-After 1, while another copy
// is being handled).
// Then it calls Handle: nil answers 204 (for a verification envelope 200
// with {"challenge": ...} echoed), ErrGone answers 410 (not retried), and
// any other error 500 (retried). Set the fields before use and do not copy
// a Receiver in use; it is then safe for concurrent use.
type Receiver struct {
	// Secrets returns the secrets a subscription's deliveries are signed
	// with (any one verifying suffices); nil or empty means the
	// subscription is unknown. Required. It is called with the header's
	// value before any signature is checked: treat it as untrusted.
	Secrets func(subscriptionID string) []Secret
	// Handle processes a verified delivery, verification envelopes
	// included (return nil to have the challenge echoed). nil accepts
	// everything. It should return quickly: the sender waits ~5 s.
	Handle func(Delivery) error
	// MaxBody bounds a body; 0 is DefaultMaxBody.
	MaxBody int
	// Now is the clock for the timestamp window; nil is time.Now.
	Now func() time.Time
	// Tolerance is the timestamp window; 0 is DefaultTolerance.
	Tolerance time.Duration
	// Dedup is how many handled (X-MCP-Subscription-Id, webhook-id)
	// pairs are remembered; 0 is DefaultDedup, negative disables
	// deduplication. The pair, not the id alone: an event delivered to
	// two subscriptions has one webhook-id (its eventId).
	Dedup int

	mu   sync.Mutex
	seen map[string]bool // subscription NUL webhook-id → handled (false: being handled)
	ring []string        // the keys in seen, oldest first
}

// ServeHTTP implements http.Handler.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	maxBody := r.MaxBody
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	if req.ContentLength > int64(maxBody) {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, int64(maxBody)))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the body failed", http.StatusBadRequest)
		return
	}
	id, sub := req.Header.Get(HeaderID), req.Header.Get(HeaderSubscriptionID)
	if id == "" || req.Header.Get(HeaderTimestamp) == "" || req.Header.Get(HeaderSignature) == "" || sub == "" {
		http.Error(w, "missing webhook-id, webhook-timestamp, webhook-signature or X-MCP-Subscription-Id", http.StatusBadRequest)
		return
	}
	if len(sub) > maxSubIDLen || len(id) > maxHeaderValue {
		http.Error(w, "header too long", http.StatusBadRequest)
		return
	}
	secrets := r.Secrets(sub)
	if len(secrets) == 0 {
		http.Error(w, "unknown subscription", http.StatusServiceUnavailable)
		return
	}
	ts, err := r.verify(body, req.Header, secrets)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	d, err := ParseBody(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d.SubscriptionID, d.WebhookID, d.Timestamp = sub, id, ts

	// The key is the subscription and the webhook-id: an event's
	// webhook-id is its eventId, the same for every subscription that
	// matches it, and one receiver may hold several of them.
	key := sub + "\x00" + id
	switch r.reserve(key) {
	case handled:
		w.WriteHeader(http.StatusOK) // a duplicate of a handled delivery
		return
	case inProgress:
		// Not 200: the first copy may yet fail, and the sender must
		// then still have a reason to retry.
		w.Header().Set("Retry-After", "1")
		http.Error(w, "this delivery is being handled", http.StatusServiceUnavailable)
		return
	}
	if r.Handle != nil {
		err = r.Handle(d)
	}
	r.release(key, err == nil)
	switch {
	case errors.Is(err, ErrGone):
		http.Error(w, "gone", http.StatusGone)
	case err != nil:
		http.Error(w, "handling failed", http.StatusInternalServerError)
	case d.Control != nil && d.Control.Type == ControlVerification:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"challenge": d.Control.Challenge})
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// verify checks the signature with each secret and the timestamp window;
// it returns the message's timestamp.
func (r *Receiver) verify(body []byte, h http.Header, secrets []Secret) (time.Time, error) {
	sec, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return time.Time{}, errors.New("webhook-timestamp is not a Unix time in seconds")
	}
	ok := false
	for _, s := range secrets {
		if !s.IsZero() && s.webhook().VerifyIgnoringTimestamp(body, h) == nil {
			ok = true
			break
		}
	}
	if !ok {
		return time.Time{}, errors.New("no signature verifies")
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	tol := r.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > tol || d < -tol {
		return time.Time{}, fmt.Errorf("webhook-timestamp is %v from now, beyond %v", d.Round(time.Second), tol)
	}
	return ts, nil
}

// Results of reserve.
const (
	claimed    = iota // handle it
	handled           // handled recently: a duplicate
	inProgress        // being handled by another request
)

// reserve claims key (subscription and webhook-id) for handling, unless it
// was handled recently or is being handled.
func (r *Receiver) reserve(key string) int {
	if r.Dedup < 0 {
		return claimed
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if done, dup := r.seen[key]; dup {
		if done {
			return handled
		}
		return inProgress
	}
	if r.seen == nil {
		r.seen = make(map[string]bool)
	}
	r.seen[key] = false
	return claimed
}

// release ends the handling of key: remembered if handled, forgotten (so
// the sender's retry is handled) if not.
func (r *Receiver) release(key string, handled bool) {
	if r.Dedup < 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !handled {
		delete(r.seen, key)
		return
	}
	r.seen[key] = true
	r.ring = append(r.ring, key)
	limit := r.Dedup
	if limit == 0 {
		limit = DefaultDedup
	}
	for len(r.ring) > limit {
		delete(r.seen, r.ring[0])
		r.ring = r.ring[1:]
	}
}

// ParseBody parses a delivery body: a JSON object with a top-level "type"
// is a control envelope (a string type; a verification carries a
// non-empty challenge), one without is an EventOccurrence (a non-empty
// eventId and name). Unknown members are ignored, as are unknown control
// types (returned as they are, for the caller to forward).
func ParseBody(body []byte) (Delivery, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil || probe == nil {
		return Delivery{}, errors.New("the body is not a JSON object")
	}
	d := Delivery{Raw: body}
	if _, ok := probe["type"]; ok {
		var c Control
		if err := json.Unmarshal(body, &c); err != nil {
			return Delivery{}, fmt.Errorf("a malformed control envelope: %v", err)
		}
		switch {
		case c.Type == "":
			return Delivery{}, errors.New("a control envelope with an empty type")
		case c.Type == ControlVerification && c.Challenge == "":
			return Delivery{}, errors.New("a verification envelope without a challenge")
		case c.Type == ControlTerminated && c.Error == nil:
			return Delivery{}, errors.New("a terminated envelope without an error")
		}
		d.Control = &c
		return d, nil
	}
	var e EventOccurrence
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&e); err != nil {
		return Delivery{}, fmt.Errorf("a malformed event: %v", err)
	}
	if e.EventID == "" || e.Name == "" {
		return Delivery{}, errors.New("an event without an eventId or a name")
	}
	d.Event = &e
	return d, nil
}

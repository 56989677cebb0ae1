// Package eventsconformance holds what the Events conformance scenarios
// (the conformance repository's draft suite of SEP-3415, run by hand: see
// docs/events.md) need of a server under test beyond the protocol: event
// types of every shape they look for, events flowing on one of them, and
// the suite's diagnostic controls, ordinary tools named
// events_conformance_* that provoke what a healthy server never does
// during a run (an upstream error, a retention gap, a termination, a
// webhook gap or termination) or report state no request reads (whether
// a subscription is registered, the restart generation).
//
// Like package conformance it is test scaffolding: only test builds of
// functions/mcp (-tags conformance) contain it, and only with
// MCPUSH_FIXTURES=conformance do they serve it. Unlike package
// conformance it keeps state of its own, in the process: the faults
// injected (mcp.EventFaults), the callback origins allowed, the restart
// generation. A control reaches the streams and webhook deliveries of the
// process that serves it; see AllowCallbackOrigin for the allowance.
package eventsconformance

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// The event types Setup puts in the events registry. Their names sort
// so that the suite, which takes the first type of events/list offering
// a mode, picks EventsType for every mode, and PushOnlyType as the
// second push type (the one it terminates).
const (
	// EventsType offers poll, push and webhook, takes an optional string
	// argument "channel", and has an event on EventsTopic every
	// EmitEvery while Emit runs.
	EventsType  = "conformance.events"
	EventsTopic = "conformance-events"
	// PushOnlyType offers push only (the suite's type to terminate, and
	// its type without webhook).
	PushOnlyType  = "conformance.push-only"
	PushOnlyTopic = "conformance-push-only"
	// PageTypes filler types (poll only, named conformance.pages.NNN)
	// make events/list longer than one page of 100.
	PageTypes = 100
	// EmitEvery is the interval of Emit's events.
	EmitEvery = time.Second
)

// setupMessageID is the registry message id of Setup's put: every
// process of a cluster puts the same items once.
const setupMessageID = "events-conformance-types-v1"

// Store is what the fixtures use of the store: the server's, and the
// webhook records the ingest reads. Both stores are one.
type Store interface {
	mcp.Store
	delivery.Store
}

// eventTypes returns Setup's registry items.
func eventTypes() map[string]json.RawMessage {
	items := map[string]notify.EventItem{
		EventsType: {Name: EventsType, Topic: EventsTopic,
			Description:   "An event every second, on channel a or b (conformance fixture).",
			Delivery:      []string{notify.DeliveryPoll, notify.DeliveryPush, notify.DeliveryWebhook},
			InputSchema:   json.RawMessage(`{"type":"object","properties":{"channel":{"type":"string","description":"Only the events of this channel (a or b)."}}}`),
			PayloadSchema: json.RawMessage(`{"type":"object","properties":{"channel":{"type":"string"},"n":{"type":"integer"}},"required":["channel","n"]}`)},
		PushOnlyType: {Name: PushOnlyType, Topic: PushOnlyTopic,
			Description: "A push-only event type without events (conformance fixture).",
			Delivery:    []string{notify.DeliveryPush}},
	}
	for i := range PageTypes {
		name := fmt.Sprintf("conformance.pages.%03d", i)
		items[name] = notify.EventItem{Name: name, Topic: "conformance-pages", Description: "A filler (conformance fixture).",
			Delivery: []string{notify.DeliveryPoll}}
	}
	out := make(map[string]json.RawMessage, len(items))
	for name, e := range items {
		out[name], _ = json.Marshal(e.WithDefaults())
	}
	return out
}

// Setup puts the fixtures' event types in the events registry, once per
// store (the put is deduplicated by its message id).
func Setup(ctx context.Context, st ingest.Store) error {
	_, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, eventTypes(), setupMessageID)
	if err != nil {
		return fmt.Errorf("eventsconformance: putting the event types: %w", err)
	}
	return nil
}

// Controls are the diagnostic controls of one process. Build them with
// New, give them the server options (Configure) before building the
// server, then Register the tools.
type Controls struct {
	faults mcp.EventFaults
	gen    atomic.Int64 // the restart generation, from 1

	mu    sync.RWMutex
	allow []webhook.Origin // AllowCallbackOrigin's, at most webhook.MaxAllow

	// Set by Configure.
	sender    *webhook.Sender // nil: the server delivers no webhooks
	keys      [][]byte
	maxListen int
	logger    *slog.Logger
}

// New returns the controls of a process, at generation 1.
func New() *Controls {
	c := &Controls{}
	c.gen.Store(1)
	return c
}

// Configure makes o serve the controls: the faults of the stream
// controls (o.EventFaults) and, when o serves webhooks, a Sender that
// also lets the origins of AllowCallbackOrigin past the URL checks. Call
// it once o has its state keys and webhook options, before the server is
// built from o.
func (c *Controls) Configure(o *mcp.ServerOptions) {
	o.EventFaults = &c.faults
	c.keys = o.StateKeys
	c.maxListen = o.Limits.MaxListensPerPrincipal
	if c.maxListen <= 0 {
		c.maxListen = mcp.DefaultLimits.MaxListensPerPrincipal
	}
	c.logger = o.Logger
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if o.Webhooks != nil && o.Webhooks.Sender != nil {
		p := *o.Webhooks.Sender.Policy()
		p.AllowAlso = c.allowed
		c.sender = webhook.NewSender(p)
		w := *o.Webhooks
		w.Sender = c.sender
		o.Webhooks = &w
	}
}

// AllowCallbackOrigin lets callback URLs of origin o past the scheme and
// address checks of this process's Sender, for its verifications and
// deliveries, from now on: events_conformance_allow_callback_origin. It
// reaches no other process (an sns-ingest delivering to the same
// subscriptions checks with its own MCPUSH_WEBHOOK_ALLOW). At most
// webhook.MaxAllow origins.
func (c *Controls) AllowCallbackOrigin(o webhook.Origin) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.allow {
		if a == o {
			return nil
		}
	}
	if len(c.allow) >= webhook.MaxAllow {
		return fmt.Errorf("at most %d callback origins may be allowed", webhook.MaxAllow)
	}
	c.allow = append(c.allow, o)
	return nil
}

// allowed is the Sender's Policy.AllowAlso.
func (c *Controls) allowed(o webhook.Origin) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, a := range c.allow {
		if a == o {
			return true
		}
	}
	return false
}

// Emit publishes an event on EventsTopic every interval until ctx ends,
// through the ingest as SNS would, handing it to a delivery pool of its
// own (with the controls' sender, so an origin allowed by
// allow_callback_origin is delivered to) when the server delivers
// webhooks. Its data is {"channel": "a" or "b" in turn, "n": a counter}.
// Failures are logged.
func (c *Controls) Emit(ctx context.Context, st Store, interval time.Duration) error {
	// The ingest's own lines (two a second) are left out; its webhook
	// deliveries' are kept, and a failed publish is logged below.
	opts := &ingest.Options{Logger: slog.New(slog.DiscardHandler)}
	if c.sender != nil && len(c.keys) > 0 {
		sealer, err := notify.NewSealer(c.keys, notify.WebhookSealLabel)
		if err != nil {
			return err
		}
		pool := delivery.NewPool(&delivery.PoolOptions{Logger: c.logger})
		eng, err := delivery.New(delivery.Options{Store: st, Queue: pool, Sender: c.sender, Sealer: sealer, CursorKey: c.keys[0],
			EventTypes: delivery.RegistryEventTypes(st), Logger: c.logger})
		if err != nil {
			return err
		}
		go pool.Run(ctx, eng)
		opts.Delivery = pool
	}
	in := ingest.New(st, opts)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			channel := "a"
			if n%2 == 0 {
				channel = "b"
			}
			msg := fmt.Sprintf(`{"type":"event","topic":%q,"data":{"channel":%q,"n":%d}}`, EventsTopic, channel, n)
			_, err := in.Handle(ctx, events.SNSEvent{Records: []events.SNSEventRecord{{EventVersion: "1.0", EventSource: "aws:sns",
				SNS: events.SNSEntity{Type: "Notification", MessageID: "conformance-" + run + "-" + strconv.Itoa(n),
					TopicArn: "arn:aws:sns:us-east-1:000000000000:mcpush-conformance", Timestamp: time.Now(), Message: msg, SignatureVersion: "1"}}}})
			if err != nil && ctx.Err() == nil {
				c.logger.Warn("conformance events: publishing an event", "n", n, "err", err)
			}
		}
	}()
	return nil
}

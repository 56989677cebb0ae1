// Package metrics is mcpush's one set of named metrics: what the
// functions count (events ingested, deliveries, held streams, refusals,
// store requests, ...) through typed helpers such as [EventsIngested], so
// that a handler calls metrics.EventsIngested(ctx, metrics.Accepted, 1)
// and never formats a metric itself. The instruments are OpenTelemetry's
// (the Go metrics API, [go.opentelemetry.io/otel/metric]), on the
// package's own small implementation of the API (meter.go) rather than
// the SDK's, for the size of the Lambda binaries; the package exports
// them in two ways ([Setup]):
//
//   - CloudWatch Embedded Metric Format (EMF): JSON lines on stdout, which
//     CloudWatch Logs turns into metrics, printed by [Flush] once per
//     Lambda invocation (pkg/serve calls it for the MCP function; [Wrap]
//     wraps a handler such as sns-ingest's);
//   - the Prometheus text format ([Handler]), which the local server
//     serves at /metrics.
//
// Every dimension is a bounded set of values that this package names (an
// outcome, a mode, a kind, an HTTP status): never a principal, a session
// or a subscription id. docs/operations.md lists the metrics, their units
// and dimensions, and what the dashboard and alarms of template.yaml make
// of them.
package metrics

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// def is one metric: its OpenTelemetry instrument name (also its
// Prometheus name), its CloudWatch name and unit, and its help text.
type def struct {
	name string // the instrument's and Prometheus's name
	emf  string // the CloudWatch metric name
	unit string // the CloudWatch unit: Count or Seconds
	help string
	// keys are the metric's attribute keys (its labels; capitalised, its
	// EMF dimensions beside Function).
	keys []string
	// rollup, if set, are the attribute keys of a second EMF dimension
	// set (beside Function): CloudWatch then also aggregates the metric
	// over the other keys, which an alarm needs to divide by a total
	// (Deliveries by Mode alone: the failure rate).
	rollup []string
}

// The metric set. docs/operations.md describes each one; TestMetricDocs
// checks that it names every one of them.
var (
	defEventsIngested      = def{"mcpush_events_ingested_total", "EventsIngested", "Count", "SNS records ingested, by outcome (accepted, duplicate, rejected, failed).", []string{"outcome"}, nil}
	defFanOut              = def{"mcpush_fanout_sessions", "FanOutSessions", "Count", "Sessions one ingested event was appended to (its fan-out).", nil, nil}
	defDeliveries          = def{"mcpush_deliveries_total", "Deliveries", "Count", "Event deliveries, by mode (stream, poll, webhook) and outcome (ok or a failure category).", []string{"mode", "outcome"}, []string{"mode"}}
	defDeliveryLatency     = def{"mcpush_delivery_latency_seconds", "DeliveryLatency", "Seconds", "Time from an event's ingest to its delivery, by mode.", []string{"mode"}, nil}
	defHeldStreams         = def{"mcpush_held_streams", "HeldStreams", "Count", "SSE streams this process holds open now, by kind (get, resume, listen).", []string{"kind"}, nil}
	defHeldStreamsOpened   = def{"mcpush_held_streams_opened_total", "HeldStreamsOpened", "Count", "SSE streams this process opened, by kind (get, resume, listen).", []string{"kind"}, nil}
	defWebhookSubs         = def{"mcpush_webhook_subscriptions", "WebhookSubscriptions", "Count", "Webhook subscriptions, by status (active, suspended), as last counted.", []string{"status"}, nil}
	defWebhookVerification = def{"mcpush_webhook_verifications_total", "WebhookVerifications", "Count", "Webhook endpoint verifications (events/subscribe), by outcome (ok or a failure category).", []string{"outcome"}, nil}
	defRefusals            = def{"mcpush_refusals_total", "Refusals", "Count", "Requests the transport refused, by HTTP status (401 and 403: authorization refusals).", []string{"status"}, nil}
	defStoreRequests       = def{"mcpush_store_requests_total", "StoreRequests", "Count", "Store requests (one per store method call), by access (read, write).", []string{"access"}, nil}
	defStoreThrottles      = def{"mcpush_store_throttles_total", "StoreThrottles", "Count", "Store requests that failed as unavailable (throttled, busy, unreachable) after the store's retries, by access.", []string{"access"}, nil}
	defQueueDepth          = def{"mcpush_queue_depth", "QueueDepth", "Count", "Messages waiting in a queue, by queue, as last seen.", []string{"queue"}, nil}
	defQueueAge            = def{"mcpush_queue_age_seconds", "QueueAge", "Seconds", "Age of the oldest message of a queue, by queue, as last seen.", []string{"queue"}, nil}
)

// Info describes a metric of the set: its names, unit and dimensions.
type Info struct {
	Name       string   // its CloudWatch name (EMF), e.g. EventsIngested
	Prometheus string   // its Prometheus name, e.g. mcpush_events_ingested_total
	Unit       string   // its CloudWatch unit: Count or Seconds
	Help       string   // what it counts
	Dimensions []string // its EMF dimensions: Function, then its own
	// Rollup, if set, is a second EMF dimension set of the metric:
	// Function and fewer of its own (Deliveries by Mode).
	Rollup []string
}

// Set returns the metric set, sorted by Name: what docs/operations.md
// lists and template.yaml's alarms and dashboard may name.
func Set() []Info {
	var out []Info
	for _, d := range defs {
		i := Info{Name: d.emf, Prometheus: d.name, Unit: d.unit, Help: d.help, Dimensions: []string{"Function"}}
		for _, k := range d.keys {
			i.Dimensions = append(i.Dimensions, dimensionName(k))
		}
		if d.rollup != nil {
			i.Rollup = []string{"Function"}
			for _, k := range d.rollup {
				i.Rollup = append(i.Rollup, dimensionName(k))
			}
		}
		out = append(out, i)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// defs are every metric, by instrument name.
var defs = map[string]def{}

func init() {
	for _, d := range []def{defEventsIngested, defFanOut, defDeliveries, defDeliveryLatency, defHeldStreams, defHeldStreamsOpened,
		defWebhookSubs, defWebhookVerification, defRefusals, defStoreRequests, defStoreThrottles, defQueueDepth, defQueueAge} {
		defs[d.name] = d
	}
}

// Histogram bucket bounds: latency in seconds, fan-out in sessions.
var (
	latencyBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	fanOutBounds  = []float64{0, 1, 2, 5, 10, 50, 100, 500, 1000, 5000, 10000, 50000}
)

// The process's instruments, on one meter (meter.go), which the
// exporters read (export.go).
var (
	instruments = &meter{}

	eventsIngested       = must(instruments.Int64Counter(defEventsIngested.name, metric.WithDescription(defEventsIngested.help)))
	fanOut               = must(instruments.Int64Histogram(defFanOut.name, metric.WithDescription(defFanOut.help), metric.WithExplicitBucketBoundaries(fanOutBounds...)))
	deliveries           = must(instruments.Int64Counter(defDeliveries.name, metric.WithDescription(defDeliveries.help)))
	deliveryLatency      = must(instruments.Float64Histogram(defDeliveryLatency.name, metric.WithDescription(defDeliveryLatency.help), metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(latencyBounds...)))
	heldStreams          = must(instruments.Int64UpDownCounter(defHeldStreams.name, metric.WithDescription(defHeldStreams.help)))
	heldStreamsOpened    = must(instruments.Int64Counter(defHeldStreamsOpened.name, metric.WithDescription(defHeldStreamsOpened.help)))
	webhookSubs          = must(instruments.Int64Gauge(defWebhookSubs.name, metric.WithDescription(defWebhookSubs.help)))
	webhookVerifications = must(instruments.Int64Counter(defWebhookVerification.name, metric.WithDescription(defWebhookVerification.help)))
	refusals             = must(instruments.Int64Counter(defRefusals.name, metric.WithDescription(defRefusals.help)))
	storeRequests        = must(instruments.Int64Counter(defStoreRequests.name, metric.WithDescription(defStoreRequests.help)))
	storeThrottles       = must(instruments.Int64Counter(defStoreThrottles.name, metric.WithDescription(defStoreThrottles.help)))
	queueDepth           = must(instruments.Int64Gauge(defQueueDepth.name, metric.WithDescription(defQueueDepth.help)))
	queueAge             = must(instruments.Float64Gauge(defQueueAge.name, metric.WithDescription(defQueueAge.help), metric.WithUnit("s")))
)

// must returns an instrument, or panics at start-up on a bad definition.
func must[T any](v T, err error) T {
	if err != nil {
		panic("metrics: " + err.Error())
	}
	return v
}

// with is the option of one attribute.
func with(key, value string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(key, value)))
}

// IngestOutcome is what happened to one SNS record (ingest.Summary's
// fields).
type IngestOutcome string

// The outcomes of an ingested record.
const (
	Accepted  IngestOutcome = "accepted"  // stored now
	Duplicate IngestOutcome = "duplicate" // stored by an earlier delivery of its MessageId
	Rejected  IngestOutcome = "rejected"  // malformed: delivering it again cannot succeed
	Failed    IngestOutcome = "failed"    // a store failure: delivering it again completes it
)

// EventsIngested counts n SNS records ingested with outcome o.
func EventsIngested(ctx context.Context, o IngestOutcome, n int) {
	if n > 0 {
		eventsIngested.Add(ctx, int64(n), with("outcome", string(o)))
	}
}

// FanOut records the fan-out of one ingested event: the sessions it was
// appended to.
func FanOut(ctx context.Context, sessions int) {
	fanOut.Record(ctx, int64(sessions))
}

// Mode is a delivery mode of the Events extension.
type Mode string

// The delivery modes.
const (
	ModeStream  Mode = "stream"  // push: a held SSE stream (GET, resumed POST, listen)
	ModePoll    Mode = "poll"    // events/poll
	ModeWebhook Mode = "webhook" // a webhook POST
)

// OutcomeOK is the outcome of a delivery or verification that succeeded;
// a failure's outcome is its category (pkg/webhook's Category*).
const OutcomeOK = "ok"

// OutcomeOther is the outcome of a failure whose category is not one of
// pkg/webhook's Category* constants (so the dimension stays bounded).
const OutcomeOther = "other"

// outcome is category as a bounded dimension value: OutcomeOK for "", a
// known category as itself, else OutcomeOther.
func outcome(category string) string {
	switch category {
	case "", OutcomeOK:
		return OutcomeOK
	case "connection_refused", "timeout", "tls_error", "http_4xx", "http_5xx", "challenge_failed",
		"http_3xx", "blocked_address", "body_too_large", "invalid_message", "expired":
		return category
	}
	return OutcomeOther
}

// Delivery counts one delivery attempt of an event in mode m whose
// failure category is category ("" or OutcomeOK: delivered; else a
// pkg/webhook Category* such as "http_5xx", or "expired" for an event
// given up on; anything else counts as OutcomeOther). The delivery engine
// calls it once per attempt (docs/operations.md, "Where the delivery
// metrics come from").
func Delivery(ctx context.Context, m Mode, category string) {
	deliveries.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String("mode", string(m)), attribute.String("outcome", outcome(category)))))
}

// DeliveryLatency records the time from an event's ingest (its
// TopicEvent.ReceivedAt) to its delivery in mode m, for a delivery that
// succeeded. A negative d (clocks apart) counts as 0.
func DeliveryLatency(ctx context.Context, m Mode, d time.Duration) {
	deliveryLatency.Record(ctx, max(d, 0).Seconds(), with("mode", string(m)))
}

// StreamKind is the kind of a held SSE stream.
type StreamKind string

// The kinds of held streams (pkg/mcp's held.go).
const (
	StreamGet    StreamKind = "get"    // a 2025-era GET stream
	StreamResume StreamKind = "resume" // a resumed POST response stream
	StreamListen StreamKind = "listen" // a 2026-era subscriptions/listen, or an events/stream of either era
)

// HeldStream counts a held stream of kind k as open, and returns the
// function that counts it closed: defer metrics.HeldStream(ctx, k)().
func HeldStream(ctx context.Context, k StreamKind) (closed func()) {
	opt := with("kind", string(k))
	heldStreams.Add(ctx, 1, opt)
	heldStreamsOpened.Add(ctx, 1, opt)
	return func() { heldStreams.Add(context.WithoutCancel(ctx), -1, opt) }
}

// WebhookSubscriptions records the webhook subscriptions counted now:
// active ones and suspended ones (delivery stopped after sustained
// failure). The delivery engine calls it at each fan-out of a topic whose
// subscriptions fit one page (a sample, not a sum over topics).
func WebhookSubscriptions(ctx context.Context, active, suspended int) {
	webhookSubs.Record(ctx, int64(active), with("status", "active"))
	webhookSubs.Record(ctx, int64(suspended), with("status", "suspended"))
}

// WebhookVerification counts one verification of a webhook endpoint
// (events/subscribe's challenge) whose failure category is category (""
// or OutcomeOK: verified).
func WebhookVerification(ctx context.Context, category string) {
	webhookVerifications.Add(ctx, 1, with("outcome", outcome(category)))
}

// Refusal counts a request the transport refused with HTTP status
// (pkg/mcp's one error writer calls it): 401 and 403 are the
// authorization refusals. A status below 400 is not counted.
func Refusal(ctx context.Context, status int) {
	if status >= 400 && status <= 599 {
		refusals.Add(ctx, 1, with("status", strconv.Itoa(status)))
	}
}

// Access is whether a store request only reads or writes.
type Access string

// The accesses of a store request.
const (
	Read  Access = "read"
	Write Access = "write"
)

// StoreRequest counts one store request (a store method call); throttled
// reports that it failed as unavailable (notify.ErrUnavailable: throttled,
// busy or unreachable after the store's own retries).
func StoreRequest(ctx context.Context, a Access, throttled bool) {
	opt := with("access", string(a))
	storeRequests.Add(ctx, 1, opt)
	if throttled {
		storeThrottles.Add(ctx, 1, opt)
	}
}

// Queue names a queue.
type Queue string

// QueueDelivery is the webhook delivery queue (SQS on AWS, the worker
// pool's queue locally).
const QueueDelivery Queue = "delivery"

// QueueState records what a queue holds now: its depth (messages
// waiting) and the age of its oldest message (0 when empty). The delivery
// engine calls it when it learns them: locally at each enqueue and
// dequeue of its worker pool; on AWS from the SQS event's
// ApproximateFirstReceiveTimestamp (age), as AWS/SQS's own
// ApproximateNumberOfMessagesVisible gives the depth.
func QueueState(ctx context.Context, q Queue, depth int, oldest time.Duration) {
	opt := with("queue", string(q))
	queueDepth.Record(ctx, int64(depth), opt)
	queueAge.Record(ctx, max(oldest, 0).Seconds(), opt)
}

package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
)

// Options configure an Ingester. A nil *Options means the defaults.
type Options struct {
	// Logger receives one record per SNS record (JSON in Lambda). Log
	// records carry message ids, topics and errors, never message bodies.
	// Nil discards.
	Logger *slog.Logger
	// Now is the clock, used for a record without a Timestamp. Nil means
	// time.Now.
	Now func() time.Time
	// Tools are the tools a tools registry item may enable, disable or
	// re-describe: those the MCP server registers in code. Nil means
	// BuiltinTools.
	Tools []string
	// FanOutConcurrency is how many batches of notify.MaxAppendEach
	// subscribed sessions one event's fan-out appends to at a time
	// (Store.AppendEach). Default: DefaultFanOutConcurrency.
	FanOutConcurrency int
	// Delivery, if set, takes a fan-out task (delivery.FanOut) for
	// every event appended: the hand-off to webhook delivery, which runs
	// elsewhere (package delivery). Nil: the event waits in its topic's
	// log for a delivery Pool that watches the store (the local server).
	Delivery delivery.Queue
}

// DefaultFanOutConcurrency is the default Options.FanOutConcurrency. On
// DynamoDB a batch of 50 sessions is two BatchGetItem and three
// TransactWriteItems (small events), about 5 x 15 ms in sequence, so one
// event reaches 10,000 sessions (200 batches, 7 rounds of 32) in about
// 0.5 s after listing them (docs/design.md, "Fan-out").
const DefaultFanOutConcurrency = 32

// Store is what an Ingester uses of the store: it appends topic events and
// registry changes, and fans an event out into the stream logs of the
// sessions subscribed to its topic. Every notify.Store is one.
type Store interface {
	AppendTopicEvent(ctx context.Context, topic, messageID string, receivedAt time.Time, data json.RawMessage) (ev notify.TopicEvent, created bool, err error)
	ApplyRegistry(ctx context.Context, kind, op string, items map[string]json.RawMessage, messageID string) (reg *notify.Registry, applied bool, err error)
	ReadTopicEvents(ctx context.Context, topic string, after int64, limit int) ([]notify.TopicEvent, error)
	Subscribers(ctx context.Context, uri string) ([]string, error)
	AppendEach(ctx context.Context, ids []string, uri string, upTo int64, pick func(*notify.Session, notify.Position) [][]byte) (appended []string, err error)
}

var _ Store = notify.Store(nil)

// Ingester applies SNS events to a Store. It keeps no state between
// calls and is safe for concurrent use.
type Ingester struct {
	store       Store
	logger      *slog.Logger
	now         func() time.Time
	tools       []string
	concurrency int
	delivery    delivery.Queue
}

// New returns an Ingester that writes to store.
func New(store Store, opts *Options) *Ingester {
	if opts == nil {
		opts = &Options{}
	}
	in := &Ingester{store: store, logger: opts.Logger, now: opts.Now, tools: opts.Tools, concurrency: opts.FanOutConcurrency, delivery: opts.Delivery}
	if in.tools == nil {
		in.tools = BuiltinTools
	}
	if in.concurrency < 1 {
		in.concurrency = DefaultFanOutConcurrency
	}
	if in.logger == nil {
		in.logger = slog.New(slog.DiscardHandler)
	}
	if in.now == nil {
		in.now = time.Now
	}
	return in
}

// Summary counts what Handle did with the records of one SNS event.
// Accepted + Duplicates + Rejected + Failed is the number of records.
type Summary struct {
	// Accepted records were stored now: a new topic event, or a registry
	// change applied.
	Accepted int `json:"accepted"`
	// Duplicates were stored by an earlier delivery of the same MessageId
	// and changed nothing now (an event's fan-out is still completed).
	Duplicates int `json:"duplicates"`
	// Conflicts are the Duplicates whose event differs from the one the
	// MessageId first delivered (counted in Duplicates too): the first is
	// kept, and each is logged as a warning. SNS redelivers a message
	// unchanged, so a conflict is a publisher reusing a MessageId.
	Conflicts int `json:"conflicts,omitempty"`
	// Rejected records are malformed: refused by Parse, or refused by the
	// store as invalid or too large (notify.ErrInvalid, ErrTooLarge).
	// Nothing of them is stored, and delivering them again cannot
	// succeed.
	Rejected int `json:"rejected"`
	// Failed records met a store failure (an outage, throttling, a
	// timeout, a failed fan-out): the message is fine, and delivering it
	// again completes it (what went through is then a duplicate).
	Failed int `json:"failed"`
	// Errors has one "<MessageId>: <error>" line per rejected or failed
	// record.
	Errors []string `json:"errors,omitempty"`
}

// Handle processes every record of ev, in order, and returns what it did.
// A failing record does not stop the others. If any record was rejected
// or failed, Handle also returns an error naming their MessageIds, and
// saying which were malformed and which met a store failure: in Lambda
// that fails the invocation, so that SNS delivers the event again (the
// records that went through are then duplicates) and, after its retries,
// sends it to the dead-letter queue with that error as its message. A
// store failure alone makes a *StoreFailure (errors.Is
// notify.ErrUnavailable holds), never a message's rejection.
func (in *Ingester) Handle(ctx context.Context, ev events.SNSEvent) (Summary, error) {
	var (
		sum              Summary
		rejected, failed []string
	)
	for i := range ev.Records {
		sns := &ev.Records[i].SNS
		dup, conflict, err := in.handle(ctx, sns)
		if conflict {
			sum.Conflicts++
		}
		switch {
		case err != nil:
			id := sns.MessageID
			if checkMessageID(id) != nil {
				id = fmt.Sprintf("Records[%d]", i)
			}
			if IsRejection(err) {
				sum.Rejected++
				rejected = append(rejected, id)
			} else {
				sum.Failed++
				failed = append(failed, id)
			}
			sum.Errors = append(sum.Errors, id+": "+err.Error())
		case dup:
			sum.Duplicates++
		default:
			sum.Accepted++
		}
	}
	metrics.EventsIngested(ctx, metrics.Accepted, sum.Accepted)
	metrics.EventsIngested(ctx, metrics.Duplicate, sum.Duplicates)
	metrics.EventsIngested(ctx, metrics.Rejected, sum.Rejected)
	metrics.EventsIngested(ctx, metrics.Failed, sum.Failed)
	in.logger.LogAttrs(ctx, slog.LevelInfo, "SNS event processed",
		slog.Int("records", len(ev.Records)), slog.Int("accepted", sum.Accepted),
		slog.Int("duplicates", sum.Duplicates), slog.Int("conflicts", sum.Conflicts), slog.Int("rejected", sum.Rejected),
		slog.Int("failed", sum.Failed))
	var msgs []string
	if len(failed) > 0 {
		msgs = append(msgs, fmt.Sprintf("%d of %d SNS records failed in the store (not malformed; a retry completes them): %s", len(failed), len(ev.Records), strings.Join(failed, ", ")))
	}
	if len(rejected) > 0 {
		msgs = append(msgs, fmt.Sprintf("%d of %d SNS records rejected as malformed: %s", len(rejected), len(ev.Records), strings.Join(rejected, ", ")))
	}
	switch {
	case len(msgs) == 0:
		return sum, nil
	case len(rejected) == 0:
		return sum, &StoreFailure{Msg: "ingest: " + msgs[0]}
	}
	return sum, errors.New("ingest: " + strings.Join(msgs, "; "))
}

// StoreFailure is the error of a Handle whose records were all fine but
// some met a store failure: delivering the event again completes it. In
// Lambda its type name is the invocation's errorType. errors.Is(err,
// notify.ErrUnavailable) holds.
type StoreFailure struct {
	// Msg names the failed MessageIds.
	Msg string
}

func (e *StoreFailure) Error() string { return e.Msg }

// Is makes a StoreFailure notify.ErrUnavailable.
func (e *StoreFailure) Is(target error) bool { return target == notify.ErrUnavailable }

// IsRejection reports whether err, an error of one record, rejects the
// message itself (malformed, invalid or too large: delivering it again
// cannot succeed) rather than reporting a store failure.
func IsRejection(err error) bool {
	return errors.Is(err, ErrInvalidMessage) || errors.Is(err, notify.ErrInvalid) || errors.Is(err, notify.ErrTooLarge)
}

// MaxMessageIDLen is the longest SNS MessageId accepted (SNS sends
// 36-character UUIDs); a longer one is rejected and stored nowhere.
const MaxMessageIDLen = 128

// checkMessageID accepts a MessageId of 1 to MaxMessageIDLen printable
// ASCII characters other than space (a UUID is): no control characters
// (NUL), which would reach logs, error lines and store keys.
func checkMessageID(id string) error {
	switch {
	case id == "":
		return invalidf("MessageId", "empty")
	case len(id) > MaxMessageIDLen:
		return invalidf("MessageId", "%d bytes, more than %d (SNS MessageIds are UUIDs)", len(id), MaxMessageIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' {
			return invalidf("MessageId", "byte %d is %#x: only printable ASCII without spaces (SNS MessageIds are UUIDs)", i, c)
		}
	}
	return nil
}

// handle processes one record and reports whether it was a duplicate,
// and whether a duplicate event differs from the first delivery of its
// MessageId. Errors are logged here.
func (in *Ingester) handle(ctx context.Context, sns *events.SNSEntity) (dup, conflict bool, err error) {
	if err := checkMessageID(sns.MessageID); err != nil {
		// Not logged with the id itself: it may hold control characters.
		in.logger.LogAttrs(ctx, slog.LevelError, "SNS record rejected", slog.String("err", err.Error()))
		return false, false, err
	}
	attrs := []slog.Attr{slog.String("messageId", sns.MessageID), slog.String("topicArn", sns.TopicArn)}
	defer func() {
		switch {
		case err == nil:
		case IsRejection(err):
			in.logger.LogAttrs(ctx, slog.LevelError, "SNS record rejected", append(attrs, slog.String("err", err.Error()))...)
		default:
			in.logger.LogAttrs(ctx, slog.LevelError, "SNS record failed in the store", append(attrs, slog.String("err", err.Error()))...)
		}
	}()
	msg, err := parse(sns.TopicArn, sns.Message, in.tools)
	if err != nil {
		return false, false, err
	}
	switch msg.Type {
	case TypeEvent:
		attrs = append(attrs, slog.String("topic", msg.Topic))
		received := sns.Timestamp
		if received.IsZero() {
			received = in.now()
		}
		ev, created, err := in.store.AppendTopicEvent(ctx, msg.Topic, sns.MessageID, received, msg.Data)
		if err != nil {
			return false, false, err
		}
		attrs = append(attrs, slog.Int64("seq", ev.Seq), slog.Bool("duplicate", !created))
		if !created && !sameJSON(ev.Data, msg.Data) {
			conflict = true
			in.logger.LogAttrs(ctx, slog.LevelWarn, "duplicate MessageId with a different event: the first is kept",
				append(attrs, slog.Int("storedBytes", len(ev.Data)), slog.Int("receivedBytes", len(msg.Data)))...)
		}
		n, err := in.fanOut(ctx, &ev)
		attrs = append(attrs, slog.Int("sessions", n))
		if err != nil {
			return false, conflict, err
		}
		if created {
			metrics.FanOut(ctx, n)
		}
		if in.delivery != nil {
			// Accepting is not delivering: the hand-off is one task.
			// Not a failure of the record when it fails: the event is in
			// the log, the outbox, and the sweep enqueues it.
			if err := in.delivery.Enqueue(ctx, delivery.FanOut(&ev)); err != nil {
				attrs = append(attrs, slog.String("deliveryErr", err.Error()))
			}
		}
		in.logger.LogAttrs(ctx, slog.LevelInfo, "event stored", attrs...)
		return !created, conflict, nil

	case TypeRegistry:
		attrs = append(attrs, slog.String("registry", msg.Registry), slog.String("op", msg.Op), slog.Int("items", len(msg.Items)))
		reg, applied, err := in.store.ApplyRegistry(ctx, msg.Registry, msg.Op, msg.Items, sns.MessageID)
		if err != nil {
			return false, false, err
		}
		attrs = append(attrs, slog.String("hash", reg.Hash), slog.Bool("duplicate", !applied))
		if applied && msg.Registry == notify.RegistryEvents && in.delivery != nil {
			// Webhook subscriptions whose type went, or whose claims
			// its access rule no longer admits, end now.
			if err := in.delivery.Enqueue(ctx, delivery.Recheck()); err != nil {
				attrs = append(attrs, slog.String("deliveryErr", err.Error()))
			}
		}
		in.logger.LogAttrs(ctx, slog.LevelInfo, "registry changed", attrs...)
		return !applied, false, nil
	}
	return false, false, errors.New("ingest: unreachable: message type " + msg.Type)
}

// sameJSON reports whether two JSON values are the same text once
// compacted (how Parse stores an event's data).
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

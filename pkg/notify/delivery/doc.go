// Package delivery delivers topic events to the Events extension's webhook
// subscriptions (events/subscribe) through a queue, so that accepting an
// event never waits for a receiver.
//
// # Accepting is not delivering
//
// The ingest appends an event to its topic's log and hands a fan-out
// [Task] to a [Queue], then returns: its latency does not depend on any
// receiver. The [Engine] works the queue's tasks:
//
//   - a fan-out task reads one page (1,000) of the topic's subscriptions,
//     enqueues the next page as a task of its own (so pages run in
//     parallel) and one subscription task per subscription that is behind;
//   - a subscription task claims the subscription, POSTs what follows its
//     watermark in order, one attempt at a time, and releases it.
//
// Two queues implement Queue: SQS on AWS ([SQSQueue]; a Lambda
// event-source mapping feeds the tasks to [Engine.HandleSQS]), and [Pool],
// an in-process queue and worker pool for the local server, which also
// watches the store's topic heads so that events appended by another
// process (the sns-ingest CLI) are delivered without any queue between
// them.
//
// # The store is the truth
//
// The topic log and each subscription's record (its watermark, retry state
// and lease, [notify.WebhookSubscription]) are the source of truth; the
// queue may lose or repeat tasks. A repeated task finds the subscription
// claimed or up to date and does nothing; a lost one is repaired by
// [Engine.Sweep] (the schedule on AWS, a ticker locally), which enqueues a
// fan-out of
// every recently active topic. This is why the SQS queue is a standard
// queue, not FIFO: per-subscription order and one attempt in flight come
// from the claim, not from message groups, and a standard queue gives
// per-message delays (the retry schedule) and no throughput ceiling
// (docs/design.md).
//
// # Per subscription: in order, one attempt in flight, a claim that never
// outlives its lease
//
// A claim is a conditional write of the record that sets
// [notify.WebhookSubscription.LeaseUntil]. Before every attempt the claim
// is checked: when what is left of the lease would not cover the attempt
// ([Options.Sender]'s timeout plus a margin), or 16 attempts have
// gone unrecorded, it is renewed by another conditional write, which also
// records the watermark so far. An attempt therefore always ends before the
// lease does, and another process claims a subscription only after it.
// The watermark moves only after a 2xx (or when an event is abandoned), and
// the record is written before the task is acknowledged, so a crash loses
// nothing and repeats at most the attempts made since the last write.
//
// # Across subscriptions and destinations: isolated
//
// Subscription tasks run on many workers (Pool's, or many Lambda
// invocations). Each process bounds the attempts in flight per callback
// origin ([Options.PerOrigin], 8) and, for an origin whose last attempts all
// failed, to one, so a slow, hanging or failing host delays only its own
// subscriptions: a task for a busy origin is put back with a short delay
// before it claims anything.
//
// # Retries, give-up and suspension
//
// A failed attempt is retried on [webhook.Retry]'s schedule (by default
// 1 s, 5 s, 15 s, 30 s, 2 min and 10 min after each failure, with jitter; 7
// attempts within 15 minutes), by a delayed task; while an event waits, the
// subscription's later events wait behind it. An event whose attempts are
// exhausted, or that the receiver cannot take (413, a body over 256 KiB),
// is abandoned and a signed gap envelope is owed to the receiver: it is
// POSTed before the next event, and retried like one, so the loss is
// reported, never silent. A 410 abandons the event without a gap (the
// receiver refused it knowingly). A delivery refused by this process's own
// webhook policy (an origin not in MCPUSH_WEBHOOK_ALLOW, an address that
// is not globally routable) is logged as an error naming the variable,
// counted ([Counts.Refused]) and retried like a failure. After
// [Options.SuspendAfter] (1 h) of failures with no accepted delivery the
// subscription is suspended until a refresh; a suspended subscription
// without expiry is ended with a signed terminated envelope.
//
// # The operator's view
//
// Each attempt (events, gap envelopes) is kept in the subscription's
// record, the last [notify.MaxWebhookAttempts] (8), written with the
// delivery state at the next renewal or release (no request of its own).
// [Admin] lists subscriptions by event type or principal with their state
// and attempts, counts them per type, and suspends, resumes, deletes or
// replays one (from a cursor or a time), by conditional writes that a
// held delivery lease refuses ([ErrBusy]); it never returns a secret. The
// MCP server's admin tools (package admintools) and `mcpush admin` are
// built on it.
package delivery

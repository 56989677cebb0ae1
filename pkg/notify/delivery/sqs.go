package delivery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/mcpush/mcpush/pkg/metrics"
)

// SQS bounds.
const (
	sqsBatch = 10 // entries per SendMessageBatch
	// sqsSenders bounds the SendMessageBatch calls one Enqueue makes at
	// once (a page of 1,000 subscriptions is 100 calls).
	sqsSenders = 8
	// sqsHandlers bounds the records of one SQS event handled at once.
	sqsHandlers = 10
)

// SQSAPI is what SQSQueue uses of an SQS client (*sqs.Client).
type SQSAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// SQSQueue is the [Queue] of a deployment on AWS: a standard SQS queue
// whose messages a Lambda event-source mapping hands to
// [Engine.HandleSQS].
// A task's Delay becomes the message's DelaySeconds (rounded up to whole
// seconds, at most 900). Safe for concurrent use.
type SQSQueue struct {
	api SQSAPI
	url string
}

// NewSQSQueue returns the queue at queueURL.
func NewSQSQueue(api SQSAPI, queueURL string) *SQSQueue {
	return &SQSQueue{api: api, url: queueURL}
}

// Enqueue implements Queue: SendMessageBatch, 10 tasks a call, up to 8
// calls at once; entries SQS refuses are sent once more, and what still
// fails is the error (the sweep repairs it).
func (q *SQSQueue) Enqueue(ctx context.Context, tasks ...Task) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, sqsSenders)
	)
	for start := 0; start < len(tasks); start += sqsBatch {
		batch := tasks[start:min(start+sqsBatch, len(tasks))]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := q.send(ctx, batch); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// send sends one batch, and once more the entries SQS refused.
func (q *SQSQueue) send(ctx context.Context, batch []Task) error {
	entries := make([]types.SendMessageBatchRequestEntry, 0, len(batch))
	for i, t := range batch {
		body, err := MarshalTask(t)
		if err != nil {
			return err
		}
		secs := int32(0)
		if t.Delay > 0 {
			secs = int32(min((t.Delay+999_999_999)/1_000_000_000, MaxDelay/1_000_000_000))
		}
		entries = append(entries, types.SendMessageBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(body)), DelaySeconds: secs,
		})
	}
	for try := 0; ; try++ {
		out, err := q.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
		if err != nil {
			return fmt.Errorf("delivery: SQS SendMessageBatch: %w", err)
		}
		if len(out.Failed) == 0 {
			return nil
		}
		failed := map[string]bool{}
		for _, f := range out.Failed {
			failed[aws.ToString(f.Id)] = true
		}
		if try == 1 {
			f := out.Failed[0]
			return fmt.Errorf("delivery: SQS refused %d of %d tasks: %s: %s", len(out.Failed), len(entries), aws.ToString(f.Code), aws.ToString(f.Message))
		}
		var again []types.SendMessageBatchRequestEntry
		for _, e := range entries {
			if failed[aws.ToString(e.Id)] {
				again = append(again, e)
			}
		}
		entries = again
	}
}

// HandleSQS handles an SQS event of the delivery queue (a Lambda
// event-source mapping with ReportBatchItemFailures): each record is a
// Task, handled concurrently (up to 10 at once); a record whose task
// failed in the store, or that is not a task, is reported as a batch item
// failure, so SQS delivers it again after its visibility timeout and,
// after the queue's maxReceiveCount, moves it to the dead-letter queue.
// Every other record is acknowledged, after its task released its claims.
func (e *Engine) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, Counts) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		resp  events.SQSEventResponse
		total Counts
		sem   = make(chan struct{}, sqsHandlers)
	)
	var oldest time.Duration
	for _, r := range ev.Records {
		if ms, err := strconv.ParseInt(r.Attributes["SentTimestamp"], 10, 64); err == nil {
			oldest = max(oldest, time.Since(time.UnixMilli(ms)))
		}
	}
	metrics.QueueState(ctx, metrics.QueueDelivery, len(ev.Records), oldest)
	for _, r := range ev.Records {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t, err := ParseTask([]byte(r.Body))
			var c Counts
			if err == nil {
				c, err = e.Handle(ctx, t)
			}
			total.add(&c)
			if err != nil {
				e.o.Logger.WarnContext(ctx, "webhook delivery task failed", "messageId", r.MessageId, "err", err)
				mu.Lock()
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return resp, total.Snapshot()
}

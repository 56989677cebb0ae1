package esm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// MaxBatchSize is the largest batch of a mapping of a standard queue
// without a batching window, and of one ReceiveMessage.
const MaxBatchSize = 10

// SQSAPI is what SQS uses of an SQS client (*sqs.Client).
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Invoke invokes the function once, synchronously (RequestResponse), with
// event, and returns its response payload. An error is a failed
// invocation: a function error, an init error, a timeout, an unreachable
// function.
type Invoke func(ctx context.Context, event []byte) ([]byte, error)

// SQSOptions configure an SQS mapping; nil means the defaults.
type SQSOptions struct {
	// BatchSize is the most messages one invocation gets: 1 to
	// MaxBatchSize; 0 is MaxBatchSize (Lambda's default for SQS).
	BatchSize int
	// WaitTimeSeconds is each ReceiveMessage's long poll (0 to 20; the
	// real poller waits 20). 0, the default, short-polls: moto_server
	// answers a long poll by holding the request, and internal/moto's
	// proxy serializes SQS requests with everything else.
	WaitTimeSeconds int32
	// PollInterval is how long Drain waits after a receive that found
	// nothing while the queue still holds messages (delayed or in
	// flight). Default 100 ms.
	PollInterval time.Duration
}

// SQS is one event-source mapping: a queue, a function, and
// ReportBatchItemFailures. Poll and Drain may be called from one goroutine
// at a time.
type SQS struct {
	api    SQSAPI
	url    string
	invoke Invoke
	o      SQSOptions

	arn, region string // the queue's, once read
}

// NewSQS returns the mapping of the queue at queueURL to the function
// invoke calls.
func NewSQS(api SQSAPI, queueURL string, invoke Invoke, opts *SQSOptions) (*SQS, error) {
	var o SQSOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.BatchSize == 0:
		o.BatchSize = MaxBatchSize
	case o.BatchSize < 0 || o.BatchSize > MaxBatchSize:
		return nil, fmt.Errorf("esm: batch size %d, want 1 to %d", o.BatchSize, MaxBatchSize)
	}
	if o.WaitTimeSeconds < 0 || o.WaitTimeSeconds > 20 {
		return nil, fmt.Errorf("esm: wait time %d s, want 0 to 20", o.WaitTimeSeconds)
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 100 * time.Millisecond
	}
	if api == nil || queueURL == "" || invoke == nil {
		return nil, fmt.Errorf("esm: a mapping needs an SQS client, a queue URL and a function")
	}
	return &SQS{api: api, url: queueURL, invoke: invoke, o: o}, nil
}

// Batch is what one Poll did.
type Batch struct {
	// Event is the SQS event the function was invoked with (nil: the
	// receive found no message, and nothing was invoked).
	Event []byte
	// Records are Event's records, decoded.
	Records []events.SQSMessage
	// Response is the function's response payload.
	Response []byte
	// Deleted are the message IDs acknowledged (deleted from the queue);
	// Failed those left on it, to come back after the visibility timeout.
	Deleted, Failed []string
	// Err says why the whole batch failed (the invocation failed, or its
	// response is not a valid batch response); then Failed is every
	// record.
	Err error
}

// Poll runs one round of the mapping: receive a batch, invoke the function
// with it (unless it is empty) and delete what the function acknowledged.
// Its error is the queue's (receive, delete); what the function did is in
// the Batch.
func (m *SQS) Poll(ctx context.Context) (Batch, error) {
	arn, region, err := m.queueARN(ctx)
	if err != nil {
		return Batch{}, err
	}
	out, err := m.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(m.url),
		MaxNumberOfMessages:         int32(m.o.BatchSize),
		WaitTimeSeconds:             m.o.WaitTimeSeconds,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return Batch{}, fmt.Errorf("esm: ReceiveMessage: %w", err)
	}
	if len(out.Messages) == 0 {
		return Batch{}, nil
	}
	var b Batch
	b.Event, err = Event(out.Messages, arn, region)
	if err != nil {
		return Batch{}, err
	}
	if err := json.Unmarshal(b.Event, &struct {
		Records *[]events.SQSMessage `json:"Records"`
	}{&b.Records}); err != nil {
		return Batch{}, fmt.Errorf("esm: decoding the event built: %w", err)
	}
	ids := make([]string, len(out.Messages))
	for i, msg := range out.Messages {
		ids[i] = aws.ToString(msg.MessageId)
	}
	var failed map[string]bool
	b.Response, b.Err = m.invoke(ctx, b.Event)
	if b.Err == nil {
		failed, b.Err = batchItemFailures(b.Response, ids)
	}
	if b.Err != nil {
		b.Failed = ids
		return b, nil
	}
	var del []types.DeleteMessageBatchRequestEntry
	for i, msg := range out.Messages {
		if failed[ids[i]] {
			b.Failed = append(b.Failed, ids[i])
			continue
		}
		b.Deleted = append(b.Deleted, ids[i])
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle})
	}
	if len(del) == 0 {
		return b, nil
	}
	res, err := m.api.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.url), Entries: del})
	if err != nil {
		return b, fmt.Errorf("esm: DeleteMessageBatch: %w", err)
	}
	if len(res.Failed) > 0 {
		f := res.Failed[0]
		return b, fmt.Errorf("esm: DeleteMessageBatch refused %d of %d entries: %s: %s", len(res.Failed), len(del), aws.ToString(f.Code), aws.ToString(f.Message))
	}
	return b, nil
}

// Drain polls until the queue holds no message (none visible, in flight
// or delayed: Empty) and done, if given, reports true; it returns the
// batches it invoked the function with. It waits PollInterval after a
// receive that found nothing. It ends with ctx's error (and the batches so
// far) when ctx ends first: give ctx a deadline.
func (m *SQS) Drain(ctx context.Context, done func() bool) ([]Batch, error) {
	var batches []Batch
	for {
		b, err := m.Poll(ctx)
		if err != nil {
			return batches, err
		}
		if b.Event != nil {
			batches = append(batches, b)
			continue
		}
		empty, err := m.Empty(ctx)
		if err != nil {
			return batches, err
		}
		if empty && (done == nil || done()) {
			return batches, nil
		}
		select {
		case <-ctx.Done():
			return batches, fmt.Errorf("esm: draining %s: %w", m.url, ctx.Err())
		case <-time.After(m.o.PollInterval):
		}
	}
}

// Empty reports whether the queue holds no message: none visible, in
// flight or delayed (its Approximate* attributes, exact on moto).
func (m *SQS) Empty(ctx context.Context) (bool, error) {
	names := []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	}
	out, err := m.api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(m.url), AttributeNames: names})
	if err != nil {
		return false, fmt.Errorf("esm: GetQueueAttributes: %w", err)
	}
	for _, n := range names {
		v, ok := out.Attributes[string(n)]
		if !ok {
			return false, fmt.Errorf("esm: GetQueueAttributes did not return %s", n)
		}
		if v != "0" {
			return false, nil
		}
	}
	return true, nil
}

// queueARN returns the queue's ARN (the event's eventSourceARN) and its
// region (awsRegion), read on first success.
func (m *SQS) queueARN(ctx context.Context) (arn, region string, err error) {
	if m.arn != "" {
		return m.arn, m.region, nil
	}
	out, err := m.api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(m.url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", "", fmt.Errorf("esm: GetQueueAttributes QueueArn: %w", err)
	}
	arn = out.Attributes[string(types.QueueAttributeNameQueueArn)]
	// arn:PARTITION:sqs:REGION:ACCOUNT:NAME
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[3] == "" {
		return "", "", fmt.Errorf("esm: queue ARN %q is not an SQS queue's", arn)
	}
	m.arn, m.region = arn, parts[3]
	return m.arn, m.region, nil
}

// The event, its fields in the order Lambda writes them.
type (
	sqsEvent struct {
		Records []sqsRecord `json:"Records"`
	}
	sqsRecord struct {
		MessageID         string                  `json:"messageId"`
		ReceiptHandle     string                  `json:"receiptHandle"`
		Body              string                  `json:"body"`
		Attributes        sqsAttributes           `json:"attributes"`
		MessageAttributes map[string]sqsAttribute `json:"messageAttributes"`
		MD5OfBody         string                  `json:"md5OfBody"`
		EventSource       string                  `json:"eventSource"`
		EventSourceARN    string                  `json:"eventSourceARN"`
		AWSRegion         string                  `json:"awsRegion"`
	}
	// sqsAttributes are the system attributes Lambda passes: a standard
	// queue's four, and a FIFO queue's in the order of AWS's example.
	sqsAttributes struct {
		ApproximateReceiveCount          string `json:"ApproximateReceiveCount"`
		SentTimestamp                    string `json:"SentTimestamp"`
		SequenceNumber                   string `json:"SequenceNumber,omitempty"`
		MessageGroupID                   string `json:"MessageGroupId,omitempty"`
		SenderID                         string `json:"SenderId"`
		MessageDeduplicationID           string `json:"MessageDeduplicationId,omitempty"`
		ApproximateFirstReceiveTimestamp string `json:"ApproximateFirstReceiveTimestamp"`
	}
	sqsAttribute struct {
		StringValue      *string  `json:"stringValue,omitempty"`
		BinaryValue      []byte   `json:"binaryValue,omitempty"`
		StringListValues []string `json:"stringListValues"`
		BinaryListValues [][]byte `json:"binaryListValues"`
		DataType         string   `json:"dataType"`
	}
)

// Event returns the SQS event of msgs (ReceiveMessage's, with all system
// attributes) from the queue queueARN in region, as Lambda delivers it:
// see the package comment.
func Event(msgs []types.Message, queueARN, region string) ([]byte, error) {
	ev := sqsEvent{Records: make([]sqsRecord, 0, len(msgs))}
	for _, msg := range msgs {
		a := msg.Attributes
		r := sqsRecord{
			MessageID: aws.ToString(msg.MessageId), ReceiptHandle: aws.ToString(msg.ReceiptHandle), Body: aws.ToString(msg.Body),
			Attributes: sqsAttributes{
				ApproximateReceiveCount: a["ApproximateReceiveCount"], SentTimestamp: a["SentTimestamp"],
				SequenceNumber: a["SequenceNumber"], MessageGroupID: a["MessageGroupId"], SenderID: a["SenderId"],
				MessageDeduplicationID: a["MessageDeduplicationId"], ApproximateFirstReceiveTimestamp: a["ApproximateFirstReceiveTimestamp"],
			},
			MessageAttributes: map[string]sqsAttribute{},
			MD5OfBody:         aws.ToString(msg.MD5OfBody),
			EventSource:       "aws:sqs", EventSourceARN: queueARN, AWSRegion: region,
		}
		if r.MessageID == "" || r.ReceiptHandle == "" {
			return nil, fmt.Errorf("esm: a received message without a message ID or receipt handle")
		}
		for name, v := range msg.MessageAttributes {
			r.MessageAttributes[name] = sqsAttribute{
				StringValue: v.StringValue, BinaryValue: v.BinaryValue,
				StringListValues: nonNil(v.StringListValues), BinaryListValues: nonNil(v.BinaryListValues),
				DataType: aws.ToString(v.DataType),
			}
		}
		ev.Records = append(ev.Records, r)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// batchItemFailures returns the message IDs a function's response names
// as failed, or an error when the response fails the whole batch (see the
// package comment). ids are the batch's message IDs.
func batchItemFailures(resp []byte, ids []string) (map[string]bool, error) {
	resp = bytes.TrimSpace(resp)
	if len(resp) == 0 || string(resp) == "null" {
		return nil, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(resp, &doc); err != nil {
		return nil, fmt.Errorf("esm: the response is not a JSON object (the whole batch fails): %.200s", resp)
	}
	raw, ok := doc["batchItemFailures"]
	if !ok {
		return nil, nil
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("esm: batchItemFailures is not a list of objects (the whole batch fails): %.200s", raw)
	}
	in := make(map[string]bool, len(ids))
	for _, id := range ids {
		in[id] = true
	}
	failed := map[string]bool{}
	for _, it := range items {
		var id string
		if err := json.Unmarshal(it["itemIdentifier"], &id); err != nil || !in[id] {
			return nil, fmt.Errorf("esm: batchItemFailures names %s, not a message of the batch (the whole batch fails)", it["itemIdentifier"])
		}
		failed[id] = true
	}
	return failed, nil
}

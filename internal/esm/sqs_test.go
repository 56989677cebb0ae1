package esm

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/mcpush/mcpush/internal/moto"
)

func TestMain(m *testing.M) {
	code := m.Run()
	moto.Stop()
	os.Exit(code)
}

// samEvent returns testdata/sam-receive-message.json, the output of `sam
// local generate-event sqs receive-message` (its defaults), compacted.
func samEvent(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "sam-receive-message.json"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestEvent: the message of SAM's sample event, as ReceiveMessage returns
// it, makes SAM's event byte for byte (compacted); message attributes
// take Lambda's shape; a body keeps <, > and & as they are.
func TestEvent(t *testing.T) {
	sam := types.Message{
		MessageId: aws.String("19dd0b57-b21e-4ac1-bd88-01bbb068cb78"), ReceiptHandle: aws.String("MessageReceiptHandle"),
		Body: aws.String("Hello from SQS!"), MD5OfBody: aws.String("7b270e59b47ff90a553787216d55d91d"),
		Attributes: map[string]string{
			// In another order than the event's, and one Lambda does
			// not pass.
			"ApproximateFirstReceiveTimestamp": "1523232000001", "SenderId": "123456789012",
			"SentTimestamp": "1523232000000", "ApproximateReceiveCount": "1", "MessageTooOld": "x",
		},
	}
	got, err := Event([]types.Message{sam}, "arn:aws:sqs:us-east-1:123456789012:MyQueue", "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := samEvent(t); !bytes.Equal(got, want) {
		t.Errorf("Event of SAM's message:\n got %s\nwant %s", got, want)
	}

	withAttrs := sam
	withAttrs.Body = aws.String(`<a&b>`)
	withAttrs.MessageAttributes = map[string]types.MessageAttributeValue{
		"s": {DataType: aws.String("String"), StringValue: aws.String("v")},
		"b": {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2}},
	}
	got, err = Event([]types.Message{withAttrs}, "arn:aws:sqs:us-east-1:123456789012:MyQueue", "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"body":"<a&b>"`,
		`"messageAttributes":{"b":{"binaryValue":"AQI=","stringListValues":[],"binaryListValues":[],"dataType":"Binary"},` +
			`"s":{"stringValue":"v","stringListValues":[],"binaryListValues":[],"dataType":"String"}}`,
	} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("Event with message attributes:\n%s\nlacks %s", got, want)
		}
	}

	if _, err := Event([]types.Message{{Body: aws.String("x")}}, "arn:aws:sqs:us-east-1:1:q", "us-east-1"); err == nil {
		t.Error("Event of a message without an ID or receipt handle: no error")
	}
}

// TestBatchItemFailures: what a response fails of a batch of a and b.
func TestBatchItemFailures(t *testing.T) {
	for _, tc := range []struct {
		resp   string
		failed []string // nil: none
		whole  bool     // the whole batch fails
	}{
		{resp: ``},
		{resp: `null`},
		{resp: `{}`},
		{resp: ` {"batchItemFailures":null} `},
		{resp: `{"batchItemFailures":[]}`},
		{resp: `{"other":1}`},
		{resp: `{"batchItemFailures":[{"itemIdentifier":"b"}]}`, failed: []string{"b"}},
		{resp: `{"batchItemFailures":[{"itemIdentifier":"a"},{"itemIdentifier":"b"},{"itemIdentifier":"a"}]}`, failed: []string{"a", "b"}},
		{resp: `{"batchItemFailures":[{"itemIdentifier":"c"}]}`, whole: true},
		{resp: `{"batchItemFailures":[{"itemIdentifier":""}]}`, whole: true},
		{resp: `{"batchItemFailures":[{"itemIdentifier":null}]}`, whole: true},
		{resp: `{"batchItemFailures":[{"itemId":"a"}]}`, whole: true},
		{resp: `{"batchItemFailures":[{"itemIdentifier":1}]}`, whole: true},
		{resp: `{"batchItemFailures":[null]}`, whole: true},
		{resp: `{"batchItemFailures":"a"}`, whole: true},
		{resp: `"ok"`, whole: true},
		{resp: `[]`, whole: true},
		{resp: `not json`, whole: true},
	} {
		failed, err := batchItemFailures([]byte(tc.resp), []string{"a", "b"})
		if (err != nil) != tc.whole {
			t.Errorf("%s: error %v, want the whole batch to fail: %v", tc.resp, err, tc.whole)
			continue
		}
		var got []string
		for id := range failed {
			got = append(got, id)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.failed) {
			t.Errorf("%s: failed %v, want %v", tc.resp, got, tc.failed)
		}
	}
}

func TestNewSQSOptions(t *testing.T) {
	invoke := func(context.Context, []byte) ([]byte, error) { return nil, nil }
	api := moto.NewSQSClient("http://127.0.0.1:1")
	for _, o := range []*SQSOptions{{BatchSize: -1}, {BatchSize: 11}, {WaitTimeSeconds: 21}, {WaitTimeSeconds: -1}} {
		if _, err := NewSQS(api, "http://127.0.0.1:1/123456789012/q", invoke, o); err == nil {
			t.Errorf("NewSQS(%+v): no error", *o)
		}
	}
	if _, err := NewSQS(api, "", invoke, nil); err == nil {
		t.Error("NewSQS without a queue URL: no error")
	}
	m, err := NewSQS(api, "http://127.0.0.1:1/123456789012/q", invoke, nil)
	if err != nil || m.o.BatchSize != MaxBatchSize || m.o.WaitTimeSeconds != 0 || m.o.PollInterval <= 0 {
		t.Errorf("NewSQS with nil options: %+v, %v; want batches of %d, short polls", m, err, MaxBatchSize)
	}
}

var queueSeq atomic.Int64

// newQueue creates a queue on the shared moto_server and returns a client
// and its URL.
func newQueue(t *testing.T, visibility int) (*sqs.Client, string) {
	t.Helper()
	client := moto.NewSQSClient(moto.Start(t))
	url, err := moto.NewQueue(t.Context(), client, fmt.Sprintf("esm-%d-%d", time.Now().UnixNano(), queueSeq.Add(1)), visibility)
	if err != nil {
		t.Fatal(err)
	}
	return client, url
}

// send sends bodies to the queue, each delayed by delay seconds, and
// returns their message IDs.
func send(t *testing.T, client *sqs.Client, url string, delay int32, bodies ...string) []string {
	t.Helper()
	var ids []string
	for _, b := range bodies {
		out, err := client.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(b), DelaySeconds: delay})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, aws.ToString(out.MessageId))
	}
	return ids
}

// counts returns the queue's visible, in-flight and delayed messages.
func counts(t *testing.T, client *sqs.Client, url string) string {
	t.Helper()
	out, err := client.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	a := out.Attributes
	return a["ApproximateNumberOfMessages"] + "/" + a["ApproximateNumberOfMessagesNotVisible"] + "/" + a["ApproximateNumberOfMessagesDelayed"]
}

// shape returns the structure of a JSON document: its keys in order,
// every scalar replaced by "v".
func shape(t testing.TB, doc []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	var walk func() string
	walk = func() string {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("shape of %s: %v", doc, err)
		}
		var b strings.Builder
		switch tok {
		case json.Delim('{'):
			b.WriteString("{")
			for dec.More() {
				key, _ := dec.Token()
				fmt.Fprintf(&b, "%s:%s,", key, walk())
			}
			dec.Token()
			b.WriteString("}")
		case json.Delim('['):
			b.WriteString("[")
			for dec.More() {
				b.WriteString(walk() + ",")
			}
			dec.Token()
			b.WriteString("]")
		default:
			b.WriteString("v")
		}
		return b.String()
	}
	return walk()
}

// TestPoll: a batch of three messages on moto's SQS reaches the function
// as one SQS event of SAM's shape (one record each, their MD5s, the
// queue's ARN and region); the record the response names as failed stays
// in flight, the others are deleted.
func TestPoll(t *testing.T) {
	client, url := newQueue(t, 30)
	bodies := []string{`{"k":"fanout","t":"orders","s":1}`, "second", "third"}
	ids := send(t, client, url, 0, bodies...)
	var invoked [][]byte
	m, err := NewSQS(client, url, func(_ context.Context, ev []byte) ([]byte, error) {
		invoked = append(invoked, ev)
		return []byte(`{"batchItemFailures":[{"itemIdentifier":"` + ids[1] + `"}]}`), nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Poll(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(invoked) != 1 || !bytes.Equal(invoked[0], b.Event) || len(b.Records) != 3 {
		t.Fatalf("one poll invoked %d times, %d records: %s", len(invoked), len(b.Records), b.Event)
	}
	// SAM's shape, one record after another.
	one := shape(t, samEvent(t))
	record := strings.TrimSuffix(strings.TrimPrefix(one, "{Records:["), "],}")
	if got, want := shape(t, b.Event), "{Records:["+strings.Repeat(record, 3)+"],}"; got != want {
		t.Errorf("event shape\n got %s\nwant %s", got, want)
	}
	queue := url[strings.LastIndex(url, "/")+1:]
	var got []string
	for _, r := range b.Records {
		sum := md5.Sum([]byte(r.Body))
		if r.Md5OfBody != hex.EncodeToString(sum[:]) || r.EventSource != "aws:sqs" || r.AWSRegion != moto.Region ||
			r.EventSourceARN != "arn:aws:sqs:"+moto.Region+":123456789012:"+queue || r.Attributes["ApproximateReceiveCount"] != "1" ||
			r.Attributes["SentTimestamp"] == "" || r.Attributes["SenderId"] == "" || r.ReceiptHandle == "" {
			t.Errorf("record %+v", r)
		}
		got = append(got, r.MessageId+" "+r.Body)
	}
	var want []string
	for i := range ids {
		want = append(want, ids[i]+" "+bodies[i])
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	del := slices.Sorted(slices.Values(b.Deleted))
	if b.Err != nil || !slices.Equal(b.Failed, []string{ids[1]}) || !slices.Equal(del, slices.Sorted(slices.Values([]string{ids[0], ids[2]}))) {
		t.Errorf("batch deleted %v, failed %v (%v); want %s failed, the others deleted", b.Deleted, b.Failed, b.Err, ids[1])
	}
	if c := counts(t, client, url); c != "0/1/0" {
		t.Errorf("queue visible/in flight/delayed %s, want 0/1/0", c)
	}
}

// TestDrainRedelivers: a failed invocation deletes nothing; the messages
// come back after the visibility timeout (1 s), received a second time,
// and Drain returns once the function took them and the queue is empty.
// A delayed message waits for its delay.
func TestDrainRedelivers(t *testing.T) {
	client, url := newQueue(t, 1)
	ids := send(t, client, url, 0, "a", "b")
	ids = append(ids, send(t, client, url, 1, "delayed")...)
	calls := 0
	m, err := NewSQS(client, url, func(context.Context, []byte) ([]byte, error) {
		calls++
		if calls == 1 {
			return nil, errors.New("function error")
		}
		return []byte(`{"batchItemFailures":[]}`), nil
	}, &SQSOptions{PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	batches, err := m.Drain(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) < 2 || batches[0].Err == nil || len(batches[0].Deleted) != 0 || len(batches[0].Failed) != len(batches[0].Records) {
		t.Fatalf("batches %+v; want the first failed whole, nothing deleted", batches)
	}
	deleted := map[string]string{}
	for _, b := range batches[1:] {
		if b.Err != nil || len(b.Failed) != 0 {
			t.Errorf("batch %+v, want every record deleted", b)
		}
		for _, r := range b.Records {
			deleted[r.MessageId] = r.Attributes["ApproximateReceiveCount"]
		}
	}
	for _, r := range batches[0].Records {
		if deleted[r.MessageId] != "2" {
			t.Errorf("message %s (%q) of the failed batch: deleted at receive %q, want 2", r.MessageId, r.Body, deleted[r.MessageId])
		}
	}
	if _, ok := deleted[ids[2]]; !ok || len(deleted) != 3 {
		t.Errorf("deleted %v, want all of %v", deleted, ids)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("drained in %v, before the visibility timeout and the delay (1 s)", d)
	}
	if c := counts(t, client, url); c != "0/0/0" {
		t.Errorf("queue visible/in flight/delayed %s after Drain, want 0/0/0", c)
	}
}

// TestDrainDone: Drain does not return on an empty queue until done says
// so, and ends with its context.
func TestDrainDone(t *testing.T) {
	client, url := newQueue(t, 30)
	m, err := NewSQS(client, url, func(context.Context, []byte) ([]byte, error) { return nil, nil }, &SQSOptions{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	polls := 0
	if _, err := m.Drain(t.Context(), func() bool { polls++; return polls == 3 }); err != nil || polls != 3 {
		t.Errorf("Drain: %v after %d calls of done, want nil after 3", err, polls)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := m.Drain(ctx, func() bool { return false }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Drain never done: %v, want the context's deadline", err)
	}
}

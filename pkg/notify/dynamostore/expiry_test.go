package dynamostore_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// TestExpiredItems checks, with an injected clock, that readers ignore
// items whose TTL has passed (DynamoDB deletes them late; moto never does)
// and that expired keys and message ids can be used again, while sequence
// numbers never restart.
func TestExpiredItems(t *testing.T) {
	ctx := t.Context()
	c := client(endpoint(t))
	table := newTable(t)
	if err := dynamostore.CreateTable(ctx, c, table); err != nil {
		t.Fatal(err)
	}
	clk := testutil.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := dynamostore.New(strictAPI{c}, table, &dynamostore.Options{Now: clk.Now, EventTTL: time.Hour, TopicEventTTL: 2 * time.Hour})
	data := func(d ...string) [][]byte {
		var b [][]byte
		for _, s := range d {
			b = append(b, []byte(s))
		}
		return b
	}
	check := func(what string, got, want any) {
		t.Helper()
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
			t.Errorf("%s mismatch (-want +got):\n%s", what, diff)
		}
	}

	if err := st.CreateSession(ctx, &notify.Session{ID: "s", ExpiresAt: clk.Now().Add(10 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	st.Append(ctx, "s", "x", data("a", "b"), &notify.AppendOptions{IdempotencyKey: "k"})
	st.PutMessage(ctx, "s", "m", []byte("old"))
	st.AppendTopicEvent(ctx, "t", "id1", clk.Now(), json.RawMessage(`1`))
	clk.Advance(30 * time.Minute)
	st.Append(ctx, "s", "x", data("c"), nil)
	clk.Advance(40 * time.Minute) // a, b, k, m expired; c lives 20 more minutes

	evs, err := st.ReadEvents(ctx, "s", "x", 0, 100)
	check("ReadEvents(0, 100)", []any{evs, err}, []any{[]notify.Event{{Seq: 3, Data: []byte("c")}}, nil})
	evs, err = st.ReadEvents(ctx, "s", "x", 0, 1)
	check("ReadEvents(0, 1)", []any{evs, err}, []any{[]notify.Event{{Seq: 3, Data: []byte("c")}}, nil})
	if _, err := st.GetMessage(ctx, "s", "m"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetMessage(expired): got %v, want ErrNotFound", err)
	}
	created, err := st.PutMessage(ctx, "s", "m", []byte("new"))
	check("PutMessage(over an expired one)", []any{created, err}, []any{true, nil})
	seq, ok, err := st.Append(ctx, "s", "x", data("d"), &notify.AppendOptions{IdempotencyKey: "k"})
	check("Append(expired key)", []any{seq, ok, err}, []any{int64(4), true, nil})

	clk.Advance(2 * time.Hour) // the topic event expired
	tevs, err := st.ReadTopicEvents(ctx, "t", 0, 10)
	check("ReadTopicEvents", []any{tevs, err}, []any{[]notify.TopicEvent(nil), nil})
	ev, created, err := st.AppendTopicEvent(ctx, "t", "id1", clk.Now(), json.RawMessage(`2`))
	check("AppendTopicEvent(expired message id)", []any{ev.Seq, created, err}, []any{int64(2), true, nil})
	topics, err := st.Topics(ctx)
	check("Topics", []any{topics, err}, []any{[]notify.Topic{{Name: "t", LastSeq: 2, UpdatedAt: clk.Now()}}, nil})

	clk.Advance(10 * time.Hour) // the session expired
	if _, err := st.GetSession(ctx, "s"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetSession(expired): got %v, want ErrNotFound", err)
	}
	// It is replaced, with everything it owned.
	if err := st.CreateSession(ctx, &notify.Session{ID: "s", ExpiresAt: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("CreateSession(over an expired one): %v", err)
	}
	seq, ok, err = st.Append(ctx, "s", "x", data("new"), nil)
	check("Append to the new session", []any{seq, ok, err}, []any{int64(1), true, nil})
}

// TestLongAndOddKeys checks ids that need escaping or hashing to fit
// DynamoDB's key limits.
func TestLongAndOddKeys(t *testing.T) {
	ctx := t.Context()
	c := client(endpoint(t))
	table := newTable(t)
	if err := dynamostore.CreateTable(ctx, c, table); err != nil {
		t.Fatal(err)
	}
	st := dynamostore.New(strictAPI{c}, table, nil)
	ids := []string{"a#b", "a", "%23", strings.Repeat("s", 3000)}
	uri := "file:///" + strings.Repeat("u", 2000) // over DynamoDB's 1024-byte sort key
	for _, id := range ids {
		if err := st.CreateSession(ctx, &notify.Session{ID: id, ExpiresAt: time.Now().Add(time.Hour), Subscriptions: []string{uri, "x#y"}}); err != nil {
			t.Fatalf("CreateSession(%.20q): %v", id, err)
		}
	}
	for i, id := range ids {
		stream := strings.Repeat("#", 1+i*1000)
		if seq, ok, err := st.Append(ctx, id, stream, [][]byte{[]byte(id[:1])}, &notify.AppendOptions{IdempotencyKey: strings.Repeat("k", 2000)}); err != nil || !ok || seq != 1 {
			t.Errorf("Append(%.20q) = %d, %t, %v", id, seq, ok, err)
		}
		evs, err := st.ReadEvents(ctx, id, stream, 0, 10)
		if err != nil || len(evs) != 1 || string(evs[0].Data) != id[:1] {
			t.Errorf("ReadEvents(%.20q) = %v, %v", id, evs, err)
		}
		sess, err := st.GetSession(ctx, id)
		if err != nil || !cmp.Equal(sess.Subscriptions, []string{uri, "x#y"}) {
			t.Errorf("GetSession(%.20q): %v, subscriptions %.40q", id, err, sess.Subscriptions)
		}
	}
	subs, err := st.Subscribers(ctx, uri)
	if want := []string{"%23", "a", "a#b", ids[3]}; err != nil || !cmp.Equal(subs, want) {
		t.Errorf("Subscribers = %.60q, %v; want %.60q", subs, err, want)
	}
	if _, _, err := st.AppendTopicEvent(ctx, strings.Repeat("t", 3000), strings.Repeat("m", 3000), time.Now(), json.RawMessage(`1`)); err != nil {
		t.Errorf("AppendTopicEvent(long): %v", err)
	}
	topics, err := st.Topics(ctx)
	if err != nil || len(topics) != 1 || topics[0].Name != strings.Repeat("t", 3000) {
		t.Errorf("Topics() = %d topics, %v", len(topics), err)
	}
	for _, id := range ids {
		if err := st.DeleteSession(ctx, id); err != nil {
			t.Errorf("DeleteSession(%.20q): %v", id, err)
		}
	}
	if subs, err := st.Subscribers(ctx, uri); err != nil || len(subs) != 0 {
		t.Errorf("Subscribers after DeleteSession = %q, %v", subs, err)
	}
}

// TestCreateTable checks that CreateTable is idempotent, safe to race, and
// sets the key schema and TTL the Store needs.
func TestCreateTable(t *testing.T) {
	ctx := t.Context()
	c := client(endpoint(t))
	table := newTable(t)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := dynamostore.CreateTable(ctx, c, table); err != nil {
				t.Errorf("CreateTable: %v", err)
			}
		})
	}
	wg.Wait()
	if err := dynamostore.CreateTable(ctx, c, table); err != nil {
		t.Errorf("CreateTable(existing): %v", err)
	}
	d, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	want := []types.KeySchemaElement{
		{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
		{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
	}
	if diff := cmp.Diff(want, d.Table.KeySchema, cmpopts.IgnoreUnexported(types.KeySchemaElement{})); diff != "" {
		t.Errorf("key schema mismatch (-want +got):\n%s", diff)
	}
	ttl, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil || ttl.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled ||
		aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "expiresAt" {
		t.Errorf("DescribeTimeToLive = %+v, %v; want enabled on expiresAt", ttl.TimeToLiveDescription, err)
	}
}

// TestAppendLimits checks the limits of one Append: notify.MaxAppendBatch
// events, and what one DynamoDB transaction holds (4 MB).
func TestAppendLimits(t *testing.T) {
	ctx := t.Context()
	c := client(endpoint(t))
	table := newTable(t)
	if err := dynamostore.CreateTable(ctx, c, table); err != nil {
		t.Fatal(err)
	}
	st := dynamostore.New(strictAPI{c}, table, nil)
	if err := st.CreateSession(ctx, &notify.Session{ID: "s", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	events := func(n, size int) [][]byte {
		b := make([][]byte, n)
		for i := range b {
			b[i] = make([]byte, size)
		}
		return b
	}
	key := &notify.AppendOptions{IdempotencyKey: "k"}
	cas := &notify.AppendOptions{IdempotencyKey: "k2", NotifiedHash: &notify.HashCAS{Registry: notify.RegistryTools, New: "h"}}
	tests := []struct {
		name    string
		data    [][]byte
		opts    *notify.AppendOptions
		wantSeq int64
		wantErr error
	}{
		{"MaxAppendBatch+1 events", events(notify.MaxAppendBatch+1, 1), nil, 0, notify.ErrInvalid},
		{"over MaxAppendBytes", events(notify.MaxAppendBytes/notify.MaxItemBytes+1, notify.MaxItemBytes), nil, 0, notify.ErrTooLarge},
		{"MaxAppendBatch events", events(notify.MaxAppendBatch, 1), nil, notify.MaxAppendBatch, nil},
		{"MaxAppendBatch events with a key", events(notify.MaxAppendBatch, 1), key, 2 * notify.MaxAppendBatch, nil},
		// The largest append there is, with every condition: it must fit
		// one DynamoDB transaction (4 MB with the session item).
		{"MaxAppendBytes of MaxItemBytes events with a key and a hash", events(notify.MaxAppendBytes/notify.MaxItemBytes, notify.MaxItemBytes), cas, 2*notify.MaxAppendBatch + notify.MaxAppendBytes/notify.MaxItemBytes, nil},
	}
	for _, tt := range tests {
		seq, _, err := st.Append(ctx, "s", "x", tt.data, tt.opts)
		if seq != tt.wantSeq || !matchErr(err, tt.wantErr) {
			t.Errorf("Append(%s) = %d, %v; want %d, %v", tt.name, seq, err, tt.wantSeq, tt.wantErr)
		}
	}

	// AppendEach splits its sessions over transactions by size: three
	// sessions that each get the largest append there is need three.
	ids := []string{"s", "t", "u"}
	for _, id := range ids[1:] {
		if err := st.CreateSession(ctx, &notify.Session{ID: id, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if err := st.Subscribe(ctx, id, "events://big"); err != nil {
			t.Fatal(err)
		}
	}
	big := events(notify.MaxAppendBytes/notify.MaxItemBytes, notify.MaxItemBytes)
	got, err := st.AppendEach(ctx, ids, "events://big", 1, func(*notify.Session, notify.Position) [][]byte { return big })
	if err != nil || len(got) != len(ids) {
		t.Fatalf("AppendEach of the largest appends = %q, %v", got, err)
	}
	for _, id := range ids {
		sess, err := st.GetSession(ctx, id)
		if err != nil || sess.StreamHead != int64(len(big)) {
			t.Errorf("%s after AppendEach: %+v, %v; want StreamHead %d", id, sess, err, len(big))
		}
	}
}

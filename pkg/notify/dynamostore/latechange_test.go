package dynamostore_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// slowSend delays the next TransactWriteItems before sending it, as an
// SDK retry after a throttled or lost attempt does: the request carries
// the change feed item stamped before the delay.
type slowSend struct {
	dynamostore.API
	delay atomic.Int64 // nanoseconds, for the next call only
}

func (s *slowSend) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	time.Sleep(time.Duration(s.delay.Swap(0)))
	return s.API.TransactWriteItems(ctx, in, optFns...)
}

// TestLateChangeIsReported: an append whose transaction commits well after
// its change feed item's stamp (1.5 s: the SDK retrying it) is still
// reported to a reader that read the feed every 100 ms meanwhile, whose
// window had passed the stamp by the commit.
func TestLateChangeIsReported(t *testing.T) {
	endpoint(t)
	table := newTable(t)
	var slow *slowSend
	writer, err := openWith(table, func(api dynamostore.API) dynamostore.API { slow = &slowSend{API: api}; return slow })
	if err != nil {
		t.Fatal(err)
	}
	reader, err := open(table)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	const id = "late-session-0000000000"
	if err := writer.CreateSession(ctx, &notify.Session{ID: id, ProtocolVersion: "2025-11-25", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_, cursor, err := reader.Changes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	read := func() {
		ch, next, err := reader.Changes(ctx, cursor)
		if err != nil {
			t.Fatal(err)
		}
		got, cursor = append(got, ch.Sessions...), next
	}
	slow.delay.Store(int64(1500 * time.Millisecond))
	done := make(chan error, 1)
	go func() {
		_, _, err := writer.Append(ctx, id, notify.SessionStream, [][]byte{[]byte(`{"n":1}`)}, nil)
		done <- err
	}()
	for appending := true; appending; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			appending = false
		case <-time.After(100 * time.Millisecond):
			read()
		}
	}
	for range 5 { // the reader goes on reading
		time.Sleep(100 * time.Millisecond)
		read()
	}
	if !slices.Contains(got, id) {
		t.Errorf("a change committed 1.5 s after its stamp was never reported to a reader reading every 100 ms (got %q)", got)
	}
}

// slowTransactions delays every TransactWriteItems by delay before
// sending it: a store whose transactions all take over the feed's 1 s
// overlap, as a busy moto's do.
type slowTransactions struct {
	dynamostore.API
	delay time.Duration
}

func (s slowTransactions) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	time.Sleep(s.delay)
	return s.API.TransactWriteItems(ctx, in, optFns...)
}

// TestSlowTransactionsReRecordOnce: on a store whose every transaction
// takes 1.2 s, a writer re-records the change of its first append (one
// PutItem, stamped after the commit), and at most one more where a feed
// partition ends: from then on it stamps its feed items ahead by the
// time its transactions take, so the others need none (each cost one
// PutItem more before: 5). A reader reading every
// 100 ms meanwhile gets all five changes.
func TestSlowTransactionsReRecordOnce(t *testing.T) {
	endpoint(t)
	table := newTable(t)
	var counter *dynamostore.Counter
	writer, err := openWith(table, func(api dynamostore.API) dynamostore.API {
		counter = dynamostore.NewCounter(slowTransactions{API: strictAPI{api}, delay: 1200 * time.Millisecond})
		return counter
	})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := open(table)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	var ids []string
	for i := range 5 {
		id := fmt.Sprintf("slow-session-%d", i)
		ids = append(ids, id)
		if err := writer.CreateSession(ctx, &notify.Session{ID: id, ProtocolVersion: "2025-11-25", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	_, cursor, err := reader.Changes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	done := make(chan error, 1)
	counter.Reset()
	go func() {
		for _, id := range ids {
			if _, _, err := writer.Append(ctx, id, notify.SessionStream, [][]byte{[]byte(`{"n":1}`)}, nil); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	read := func() {
		changed, next, err := reader.Changes(ctx, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range changed.Sessions {
			got[id] = true
		}
		cursor = next
	}
	for appending := true; appending; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			appending = false
		case <-time.After(100 * time.Millisecond):
			read()
		}
	}
	for range 5 {
		time.Sleep(100 * time.Millisecond)
		read()
	}
	for _, id := range ids {
		if !got[id] {
			t.Errorf("the change of %s was never reported to a reader reading every 100 ms", id)
		}
	}
	// The first append re-records (no lead yet); so may one that starts
	// less than its transaction's time before the end of a 10 s feed
	// partition, whose stamp's lead is cut at the partition's end
	// (feedStamp): the 6 s of appends cross at most one such end.
	if puts := counter.Counts()[dynamostore.OpPutItem]; puts > 2 {
		t.Errorf("5 appends whose transactions took 1.2 s each re-recorded their change %d times (%v), want at most twice (the first, and one at the end of a feed partition)", puts, counter.Counts())
	}
}

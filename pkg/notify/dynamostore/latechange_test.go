package dynamostore_test

import (
	"context"
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
		ids, next, err := reader.Changes(ctx, cursor)
		if err != nil {
			t.Fatal(err)
		}
		got, cursor = append(got, ids...), next
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

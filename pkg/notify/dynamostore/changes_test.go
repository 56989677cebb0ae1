package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// TestChangesAcrossShards: appends to sessions whose feed items fall in
// every shard of a Store with 8 are all reported to a reader with 8, in
// 8 Queries per read (one per shard); a reader with 1 shard (a
// misconfigured process) reads only shard 0's. Each Store counts its own
// requests.
func TestChangesAcrossShards(t *testing.T) {
	ep := endpoint(t)
	table := newTable(t)
	ctx := context.Background()
	if err := dynamostore.CreateTable(ctx, client(ep), table); err != nil {
		t.Fatal(err)
	}
	rc := dynamostore.NewCounter(strictAPI{client(ep)})
	writer := dynamostore.New(strictAPI{client(ep)}, table, &dynamostore.Options{FeedShards: 8})
	reader := dynamostore.New(rc, table, &dynamostore.Options{FeedShards: 8})
	narrow := dynamostore.New(strictAPI{client(ep)}, table, &dynamostore.Options{FeedShards: 1})

	now := time.Now()
	var ids []string
	for i := range 24 {
		id := fmt.Sprintf("shards-%02d", i)
		ids = append(ids, id)
		if err := writer.CreateSession(ctx, &notify.Session{ID: id, ProtocolVersion: "2025-11-25", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	_, cursor, err := reader.Changes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	_, narrowCursor, err := narrow.Changes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, _, err := writer.Append(ctx, id, notify.SessionStream, [][]byte{[]byte(`{"n":1}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	rc.Reset()
	ch, _, err := reader.Changes(ctx, cursor)
	if err != nil {
		t.Fatal(err)
	}
	if got := ch.Sessions; !slices.Equal(got, ids) {
		t.Errorf("a reader with 8 shards got %q, want %q", got, ids)
	}
	// One Query per shard, of one partition or of two when the window
	// spans a 10 s boundary.
	if q := rc.Counts()[dynamostore.OpQuery]; q != 8 && q != 16 {
		t.Errorf("a read of the feed made %d Queries (%v), want 8 (one per shard; 16 across a partition boundary)", q, rc.Counts())
	}
	narrowCh, _, err := narrow.Changes(ctx, narrowCursor)
	if err != nil {
		t.Fatal(err)
	}
	partial := narrowCh.Sessions
	if len(partial) == 0 || len(partial) >= len(ids) {
		t.Errorf("a reader with 1 shard got %d of the %d changes; want those of shard 0 only (some, not all)", len(partial), len(ids))
	}
}

// TestChangesCursorsOfBefore: the feed's cursors keep their form
// ("<nanos>|<token>,..."), so a cursor a process of before the sharding
// handed out reads on, and an item such a process put (in shard 0's
// key, C#<bucket>, which is the unsharded feed's) is reported; a cursor
// that is no cursor is ErrInvalid, not a crash.
func TestChangesCursorsOfBefore(t *testing.T) {
	ep := endpoint(t)
	table := newTable(t)
	ctx := context.Background()
	if err := dynamostore.CreateTable(ctx, client(ep), table); err != nil {
		t.Fatal(err)
	}
	st := dynamostore.New(strictAPI{client(ep)}, table, &dynamostore.Options{FeedShards: 4})
	now := time.Now()
	old := strconv.FormatInt(now.Add(-200*time.Millisecond).UnixNano(), 10)
	// What a writer of before the sharding put: one item in C#<bucket>.
	n := now.UnixNano()
	item := map[string]types.AttributeValue{
		"pk":        &types.AttributeValueMemberS{Value: "C#" + strconv.FormatInt(n/int64(10*time.Second), 10)},
		"sk":        &types.AttributeValueMemberS{Value: fmt.Sprintf("%020d#oldwriter123", n)},
		"ids":       &types.AttributeValueMemberSS{Value: []string{"old-writer-session"}},
		"exp":       &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Minute).UnixNano(), 10)},
		"expiresAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Minute).Unix()+1, 10)},
	}
	if _, err := client(ep).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
	for _, cursor := range []string{old, old + "|", old + "|abcdefabcdef,012345012345"} {
		ch, next, err := st.Changes(ctx, cursor)
		got := ch.Sessions
		if err != nil || !slices.Equal(got, []string{"old-writer-session"}) || next == "" {
			t.Errorf("Changes(%q) = %q, %q, %v; want the old writer's session and a cursor", cursor, got, next, err)
		}
		// Its token is in the next cursor: not reported again.
		if again, _, err := st.Changes(ctx, next); err != nil || len(again.Sessions) != 0 {
			t.Errorf("Changes(%q) after it = %+v, %v; want nothing new", next, again, err)
		}
	}
	for _, cursor := range []string{"x", "-5", "1.5|a", "|abc", "2:123|a"} {
		if got, next, err := st.Changes(ctx, cursor); !errors.Is(err, notify.ErrInvalid) {
			t.Errorf("Changes(%q) = %+v, %q, %v; want ErrInvalid", cursor, got, next, err)
		}
	}
}

// TestFeedShardsOption: FeedShards outside 0 to MaxFeedShards is refused
// by CheckOptions, and New panics on it.
func TestFeedShardsOption(t *testing.T) {
	for _, k := range []int{0, 1, 2, dynamostore.MaxFeedShards} {
		if err := dynamostore.CheckOptions(&dynamostore.Options{FeedShards: k}); err != nil {
			t.Errorf("FeedShards %d: %v", k, err)
		}
	}
	for _, k := range []int{-1, dynamostore.MaxFeedShards + 1} {
		if err := dynamostore.CheckOptions(&dynamostore.Options{FeedShards: k}); !errors.Is(err, notify.ErrInvalid) {
			t.Errorf("FeedShards %d: %v, want ErrInvalid", k, err)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New with FeedShards %d did not panic", k)
				}
			}()
			dynamostore.New(nil, "t", &dynamostore.Options{FeedShards: k})
		}()
	}
}

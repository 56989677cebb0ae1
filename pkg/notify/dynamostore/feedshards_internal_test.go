package dynamostore

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/pkg/notify"
)

// feedWrites records, at the API, the change feed items written, by
// partition key: in transactions and alone (PutItem).
type feedWrites struct {
	API
	mu   sync.Mutex
	byPK map[string]int
	ids  int // session ids the items name, in all
}

func (f *feedWrites) record(it item) {
	pk := getS(it, attrPK)
	if !strings.HasPrefix(pk, changePK) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byPK[pk]++
	if ss, ok := it[attrIDs].(*types.AttributeValueMemberSS); ok {
		f.ids += len(ss.Value)
	}
}

func (f *feedWrites) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := f.API.TransactWriteItems(ctx, in, optFns...)
	if err == nil {
		for _, w := range in.TransactItems {
			if w.Put != nil {
				f.record(w.Put.Item)
			}
		}
	}
	return out, err
}

func (f *feedWrites) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := f.API.PutItem(ctx, in, optFns...)
	if err == nil {
		f.record(in.Item)
	}
	return out, err
}

// TestFeedPartitionsFanOut counts the change feed's writes per partition
// key in a fan-out of one event to n subscribed sessions (10,000;
// MCPUSH_TEST_FANOUT_SESSIONS sets another n) through AppendEach, on
// moto, with feedShards shards: every item goes to one of the window's
// feedShards keys (or two windows' when the fan-out straddles a 10 s
// boundary), each shard takes its share as the model of docs/costs.md
// says (each item in the shard of a hash of its first session id: a
// binomial share of 1/K, here within 5 standard deviations), and no key
// takes more than the share of the busiest shard. The sessions are written
// in bulk (BatchWriteItem): their creation is not what is measured.
func TestFeedPartitionsFanOut(t *testing.T) {
	n := 2000
	if v := os.Getenv("MCPUSH_TEST_FANOUT_SESSIONS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < notify.MaxAppendEach {
			t.Fatalf("MCPUSH_TEST_FANOUT_SESSIONS=%q: want a number ≥ %d", v, notify.MaxAppendEach)
		}
	}
	const feedShards = 8
	ctx := context.Background()
	ep := moto.Start(t)
	c := moto.NewClient(ctx, ep)
	table := fmt.Sprintf("feedshards-%d", time.Now().UnixNano())
	if err := CreateTable(ctx, c, table); err != nil {
		t.Fatal(err)
	}
	rec := &feedWrites{API: c, byPK: map[string]int{}}
	st := New(rec, table, &Options{FeedShards: feedShards})

	began := time.Now()
	const uri = "events://fan"
	now := time.Now()
	ids := make([]string, n)
	var puts []types.WriteRequest
	for i := range ids {
		ids[i] = fmt.Sprintf("fan-%s-%06d", newToken()[:8], i)
		sess := &notify.Session{ID: ids[i], ProtocolVersion: "2025-11-25", Initialized: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		marker := key(sessPK(ids[i]), markerSK(uri))
		marker[attrURI] = avS(uri)
		marker[attrSince] = avN(toNanos(now))
		puts = append(puts,
			types.WriteRequest{PutRequest: &types.PutRequest{Item: sessionItem(sess, map[string]types.AttributeValue{}, newToken())}},
			types.WriteRequest{PutRequest: &types.PutRequest{Item: marker}})
	}
	parallel(len(puts)/25+1, 8, func(i int) {
		chunk := puts[min(25*i, len(puts)):min(25*(i+1), len(puts))]
		for len(chunk) > 0 {
			out, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: chunk}})
			if err != nil {
				t.Error(err)
				return
			}
			chunk = out.UnprocessedItems[table]
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	loaded := time.Since(began)

	began = time.Now()
	event := [][]byte{[]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"events://fan"}}`)}
	pick := func(*notify.Session, notify.Position) [][]byte { return event }
	var appended sync.Map
	parallel((n+notify.MaxAppendEach-1)/notify.MaxAppendEach, 8, func(i int) {
		batch := ids[i*notify.MaxAppendEach : min((i+1)*notify.MaxAppendEach, n)]
		done, err := st.AppendEach(ctx, batch, uri, 1, pick)
		if err != nil {
			t.Error(err)
		}
		for _, id := range done {
			appended.Store(id, true)
		}
	})
	fanned := time.Since(began)
	got := 0
	appended.Range(func(any, any) bool { got++; return true })
	if got != n {
		t.Fatalf("AppendEach appended to %d of %d sessions", got, n)
	}

	// The model: one item per transaction (and per re-record after a
	// slow one), each in the shard of its first id's hash.
	items := 0
	shards := make([]int, feedShards)
	var keys []string
	for pk, c := range rec.byPK {
		items += c
		keys = append(keys, fmt.Sprintf("%s=%d", pk, c))
		bucket, shard, _ := strings.Cut(strings.TrimPrefix(pk, changePK), "#")
		if _, err := strconv.ParseInt(bucket, 10, 64); err != nil {
			t.Errorf("feed key %q: not C#<bucket>[#<shard>]", pk)
			continue
		}
		k := 0
		if shard != "" {
			var err error
			if k, err = strconv.Atoi(shard); err != nil || k < 1 || k >= feedShards {
				t.Errorf("feed key %q: shard %q is not 1 to %d", pk, shard, feedShards-1)
				continue
			}
		}
		shards[k] += c
	}
	slices.Sort(keys)
	if rec.ids < n {
		t.Errorf("the feed items name %d session ids, want at least %d (one per append)", rec.ids, n)
	}
	mean := float64(items) / feedShards
	sd := math.Sqrt(float64(items) * (1.0 / feedShards) * (1 - 1.0/feedShards))
	for k, c := range shards {
		if math.Abs(float64(c)-mean) > 5*sd {
			t.Errorf("shard %d took %d of %d feed items; the model says %.0f ± %.0f (5 sd)", k, c, items, mean, 5*sd)
		}
	}
	t.Logf("%d sessions (loaded in %v): fan-out in %v, %d feed items naming %d ids over %d keys, by shard %v (model %.0f ± %.0f); keys: %s",
		n, loaded.Round(time.Millisecond), fanned.Round(time.Millisecond), items, rec.ids, len(rec.byPK), shards, mean, sd, strings.Join(keys, " "))
}

// parallel runs f(0) ... f(n-1), workers at a time.
func parallel(n, workers int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

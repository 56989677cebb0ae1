package mcp_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/mcpush/mcpush/internal/heldclients"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
)

// lateTransactions holds every TransactWriteItems of another process back
// for delay before sending it, while on: its change feed items become
// visible well after their stamp, as when the SDK retries a throttled
// transaction after its backoff (up to 2 s before the first retry).
type lateTransactions struct {
	dynamostore.API
	delay time.Duration
	on    atomic.Bool
}

func (l *lateTransactions) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if l.on.Load() {
		time.Sleep(l.delay)
	}
	return l.API.TransactWriteItems(ctx, in, optFns...)
}

// TestHeldStreamsLateFeedItem: on DynamoDB, an event whose fan-out
// transaction commits 2 s after its writer (another process) stamped its
// change feed item still reaches every held stream of both eras at once,
// not at the streams' own check 10 minutes later (the watcher reads the
// feed every 100 ms and looks back 1 s: it had read past the item's time
// before the item was visible).
func TestHeldStreamsLateFeedItem(t *testing.T) {
	endpoint := moto.Start(t)
	client := moto.NewClient(context.Background(), endpoint)
	table := fmt.Sprintf("late-%d", time.Now().UnixNano())
	if err := dynamostore.CreateTable(context.Background(), client, table); err != nil {
		t.Fatal(err)
	}
	url := heldServer(t, dynamostore.New(client, table, nil), time.Minute)
	late := &lateTransactions{API: client, delay: 2 * time.Second}
	ingestStore := dynamostore.New(late, table, nil)
	topic := fmt.Sprintf("late%d", time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	const perEra = 3
	streams, wait := heldclients.Open(ctx, t.Errorf, heldclients.OpenOptions{URLs: []string{url}, URI: ingest.EventURI(topic), N: 2 * perEra,
		Era2025: func(i int) bool { return i < perEra }, Concurrent: 2 * perEra})
	defer func() { cancel(); wait() }()
	if err := heldclients.WaitOpen(streams, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	late.on.Store(true)
	publish(t, ingestStore, topic, topic+"-1", 1)
	published := time.Now()
	// Well past the delay and the feed's overlap; far short of the
	// streams' own check.
	for time.Since(published) < 15*time.Second && !all(streams, func(s *heldclients.Stream) bool { return s.Record().Updated >= 1 }) {
		time.Sleep(50 * time.Millisecond)
	}
	for i, s := range streams {
		if n := s.Record().Updated; n != 1 {
			t.Errorf("stream %d (%s) got %d resources/updated within 15 s of the publication, want 1", i, era(i, perEra), n)
		}
	}
}

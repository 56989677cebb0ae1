package dynamostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// benchStore returns a Store on a fresh table behind a Counter, with one
// session "s" subscribed to two resources.
func benchStore(b *testing.B) (*dynamostore.Store, *dynamostore.Counter) {
	b.Helper()
	ctx := context.Background()
	c := client(endpoint(b))
	table := newTable(b)
	if err := dynamostore.CreateTable(ctx, c, table); err != nil {
		b.Fatal(err)
	}
	counter := dynamostore.NewCounter(c)
	st := dynamostore.New(counter, table, nil)
	err := st.CreateSession(ctx, &notify.Session{
		ID:                 "s",
		ProtocolVersion:    "2025-11-25",
		ClientCapabilities: []byte(`{"roots":{"listChanged":true},"sampling":{}}`),
		ExpiresAt:          time.Now().Add(time.Hour),
		Subscriptions:      []string{"file:///a", "events://orders"},
	})
	if err != nil {
		b.Fatal(err)
	}
	counter.Reset()
	return st, counter
}

// reportRequests reports DynamoDB requests per operation.
func reportRequests(b *testing.B, c *dynamostore.Counter) {
	b.ReportMetric(float64(c.Reads())/float64(b.N), "reads/op")
	b.ReportMetric(float64(c.Writes())/float64(b.N), "writes/op")
}

// BenchmarkGetSession measures GetSession against moto on loopback: one
// Query.
func BenchmarkGetSession(b *testing.B) {
	st, counter := benchStore(b)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := st.GetSession(ctx, "s"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRequests(b, counter)
}

// BenchmarkAppend measures a warm Append of one event against moto on
// loopback: one TransactWriteItems. moto copies the whole table for every
// transaction, so the benchmark moves to a fresh table every 200 appends
// to keep that cost from growing with b.N.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	data := [][]byte{[]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)}
	st, counter := benchStore(b)
	var reads, writes int64
	b.ResetTimer()
	for i := range b.N {
		if i > 0 && i%200 == 0 {
			b.StopTimer()
			reads, writes = reads+counter.Reads(), writes+counter.Writes()
			st, counter = benchStore(b)
			b.StartTimer()
		}
		if _, _, err := st.Append(ctx, "s", "get", data, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reads, writes = reads+counter.Reads(), writes+counter.Writes()
	b.ReportMetric(float64(reads)/float64(b.N), "reads/op")
	b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
}

// BenchmarkReadEventsIdle measures the idle poll of a stream: one
// BatchGetItem.
func BenchmarkReadEventsIdle(b *testing.B) {
	st, counter := benchStore(b)
	ctx := context.Background()
	if _, _, err := st.Append(ctx, "s", "get", [][]byte{[]byte("x")}, nil); err != nil {
		b.Fatal(err)
	}
	counter.Reset()
	b.ResetTimer()
	for range b.N {
		if _, err := st.ReadEvents(ctx, "s", "get", 1, 100); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRequests(b, counter)
}

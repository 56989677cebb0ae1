package dynamostore_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// TestRequestCounts pins the DynamoDB requests each Store method makes, as
// counted by dynamostore.Counter. Steps run in order on one store, warm
// (its sequence cache filled by earlier steps) unless they say otherwise.
func TestRequestCounts(t *testing.T) {
	ctx := t.Context()
	c := client(endpoint(t))
	table := newTable(t)
	if err := dynamostore.CreateTable(ctx, c, table); err != nil {
		t.Fatal(err)
	}
	counter := dynamostore.NewCounter(strictAPI{c})
	st := dynamostore.New(counter, table, nil)
	cold := dynamostore.New(counter, table, nil) // another instance, cache empty
	n := time.Now()
	sess := func(id string, subs ...string) *notify.Session {
		return &notify.Session{ID: id, ExpiresAt: n.Add(time.Hour), Subscriptions: subs}
	}
	data := func(d ...string) [][]byte {
		var b [][]byte
		for _, s := range d {
			b = append(b, []byte(s))
		}
		return b
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must2 := func(_ any, err error) { must(err) }
	must3 := func(_, _ any, err error) { must(err) }
	items := map[string]json.RawMessage{"a": json.RawMessage(`{}`)}

	steps := []struct {
		name string
		do   func()
		want map[string]int64
	}{
		{"CreateSession", func() { must(st.CreateSession(ctx, sess("s"))) }, ops("TransactWriteItems", 1)},
		{"CreateSession with subscriptions", func() { must(st.CreateSession(ctx, sess("t", "u"))) }, ops("TransactWriteItems", 1)},
		{"CountSessions, under the limit", func() { must2(st.CountSessions(ctx, "", 10)) }, ops("Query", 1)},
		{"CountSessions, at the limit", func() { must2(st.CountSessions(ctx, "", 2)) }, ops("Query", 1)},
		{"GetSession", func() { must2(st.GetSession(ctx, "t")) }, ops("Query", 1)},
		{"UpdateSession", func() {
			s := sess("s")
			must(st.UpdateSession(ctx, s))
		}, ops("UpdateItem", 1)},
		{"Append to a new stream", func() { must3(st.Append(ctx, "s", "x", data("1"), nil)) }, ops("TransactWriteItems", 1)},
		{"Append, warm", func() { must3(st.Append(ctx, "s", "x", data("2", "3"), nil)) }, ops("TransactWriteItems", 1)},
		{"Append with key and hash, warm", func() {
			must3(st.Append(ctx, "s", "x", data("4"), &notify.AppendOptions{IdempotencyKey: "k",
				NotifiedHash: &notify.HashCAS{Registry: notify.RegistryTools, Old: "", New: "h"}}))
		}, ops("TransactWriteItems", 1)},
		{"Append, failed hash condition", func() {
			must3(st.Append(ctx, "s", "x", data("5"), &notify.AppendOptions{
				NotifiedHash: &notify.HashCAS{Registry: notify.RegistryTools, Old: "", New: "h"}}))
		}, ops("TransactWriteItems", 1)},
		{"Append, cold (another instance appended)", func() { must3(cold.Append(ctx, "s", "x", data("5"), nil)) }, ops("TransactWriteItems", 2)},
		{"Append to the session stream (with its change feed item)", func() { must3(st.Append(ctx, "s", notify.SessionStream, data("g"), nil)) }, ops("TransactWriteItems", 1)},
		// One Query per shard of the feed (dynamostore.DefaultFeedShards),
		// outside the first second of a feed partition (10 s), when the
		// 1 s overlap reads the previous partition's shards too.
		{"Changes", func() {
			if into := time.Duration(time.Now().UnixNano() % int64(10*time.Second)); into < 1200*time.Millisecond {
				time.Sleep(1200*time.Millisecond - into)
			}
			must3(st.Changes(ctx, ""))
		}, ops("Query", dynamostore.DefaultFeedShards)},
		{"ReadEvents, nothing new (idle poll)", func() { must2(st.ReadEvents(ctx, "s", "x", 5, 100)) }, ops("BatchGetItem", 1)},
		{"ReadEvents, 3 new", func() { must2(st.ReadEvents(ctx, "s", "x", 2, 100)) }, ops("BatchGetItem", 1)},
		{"ReadEvents, 5 new", func() { must2(st.ReadEvents(ctx, "s", "x", 0, 100)) }, ops("BatchGetItem", 1, "Query", 1)},
		{"ReadEvents, missing session", func() { st.ReadEvents(ctx, "none", "x", 0, 100) }, ops("BatchGetItem", 1)},
		{"MarkDelivered", func() { must(st.MarkDelivered(ctx, "s", 3)) }, ops("UpdateItem", 1)},
		{"PutMessage", func() { must2(st.PutMessage(ctx, "s", "m", []byte("v"))) }, ops("TransactWriteItems", 1)},
		{"GetMessage", func() { must2(st.GetMessage(ctx, "s", "m")) }, ops("BatchGetItem", 1)},
		{"Subscribe", func() { must(st.Subscribe(ctx, "s", "u")) }, ops("TransactWriteItems", 1)},
		{"Unsubscribe", func() { must(st.Unsubscribe(ctx, "s", "v")) }, ops("TransactWriteItems", 1)},
		{"Subscribers", func() { must2(st.Subscribers(ctx, "u")) }, ops("Query", 1, "BatchGetItem", 1)},
		{"AppendTopicEvent to a new topic", func() { must3(st.AppendTopicEvent(ctx, "o", "m1", n, json.RawMessage(`1`))) }, ops("TransactWriteItems", 1)},
		{"AppendTopicEvent, warm", func() { must3(st.AppendTopicEvent(ctx, "o", "m2", n, json.RawMessage(`2`))) }, ops("TransactWriteItems", 1)},
		{"AppendTopicEvent, repeated message id", func() { must3(st.AppendTopicEvent(ctx, "o", "m1", n, json.RawMessage(`1`))) }, ops("TransactWriteItems", 1, "GetItem", 1)},
		{"ReadTopicEvents", func() { must2(st.ReadTopicEvents(ctx, "o", 0, 10)) }, ops("Query", 1)},
		{"Topics", func() { must2(st.Topics(ctx)) }, ops("Query", 1)},
		{"ApplyRegistry", func() { must3(st.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, items, "r1")) }, ops("GetItem", 1, "TransactWriteItems", 1)},
		{"ApplyRegistry, repeated message id", func() { must3(st.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, items, "r1")) }, ops("GetItem", 2, "TransactWriteItems", 1)},
		{"GetRegistry", func() { must2(st.GetRegistry(ctx, notify.RegistryTools)) }, ops("GetItem", 1)},
		{"RegistryHashes", func() { must2(st.RegistryHashes(ctx)) }, ops("GetItem", 1)},
		{"DeleteSession", func() { must(st.DeleteSession(ctx, "s")) }, ops("UpdateItem", 1, "Query", 1, "BatchWriteItem", 1, "DeleteItem", 1, "PutItem", 1)},
	}
	var table2 strings.Builder
	fmt.Fprintf(&table2, "%-45s %5s %6s  %s\n", "call", "reads", "writes", "requests")
	for _, s := range steps {
		counter.Reset()
		start := time.Now()
		s.do()
		got := counter.Counts()
		if time.Since(start) >= time.Second && got["PutItem"] > s.want["PutItem"] {
			// A write with a change feed item that took the feed's
			// overlap (1 s) or more records its change again (a slow
			// moto): one PutItem more, not counted against the call.
			if got["PutItem"]--; got["PutItem"] == 0 {
				delete(got, "PutItem")
			}
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("%s: requests mismatch (-want +got):\n%s", s.name, diff)
		}
		fmt.Fprintf(&table2, "%-45s %5d %6d  %s\n", s.name, counter.Reads(), counter.Writes(), counter)
	}
	t.Logf("requests per call:\n%s", table2.String())
}

func ops(kv ...any) map[string]int64 {
	m := make(map[string]int64)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = int64(kv[i+1].(int))
	}
	return m
}

func TestCounter(t *testing.T) {
	c := dynamostore.NewCounter(&scriptedAPI{steps: steps(succeed, succeed)})
	ctx := t.Context()
	c.TransactWriteItems(ctx, nil)
	c.TransactWriteItems(ctx, nil)
	if got, want := c.Counts(), ops("TransactWriteItems", 2); !cmp.Equal(got, want) {
		t.Errorf("Counts() = %v, want %v", got, want)
	}
	if c.Reads() != 0 || c.Writes() != 2 {
		t.Errorf("Reads, Writes = %d, %d; want 0, 2", c.Reads(), c.Writes())
	}
	if got, want := c.String(), "reads=0 writes=2 (TransactWriteItems=2)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	c.Reset()
	if len(c.Counts()) != 0 {
		t.Errorf("after Reset: %v", c.Counts())
	}
	for op, read := range map[string]bool{
		dynamostore.OpGetItem: true, dynamostore.OpBatchGetItem: true, dynamostore.OpQuery: true,
		dynamostore.OpPutItem: false, dynamostore.OpUpdateItem: false, dynamostore.OpDeleteItem: false,
		dynamostore.OpBatchWriteItem: false, dynamostore.OpTransactWriteItems: false,
	} {
		if dynamostore.IsRead(op) != read {
			t.Errorf("IsRead(%s) = %t, want %t", op, !read, read)
		}
	}
}

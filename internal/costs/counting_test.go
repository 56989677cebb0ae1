package costs

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go/middleware"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// tally counts requests by operation name.
type tally struct {
	mu   sync.Mutex
	ops  map[string]int
	read func(op string) bool
}

func newTally(read func(string) bool) *tally { return &tally{ops: map[string]int{}, read: read} }

func (t *tally) add(op string) {
	t.mu.Lock()
	t.ops[op]++
	t.mu.Unlock()
}

func (t *tally) reset() {
	t.mu.Lock()
	t.ops = map[string]int{}
	t.mu.Unlock()
}

// counts returns reads, writes and a description like "Query=1 PutItem=1".
func (t *tally) counts() (reads, writes int, desc string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for op, n := range t.ops {
		if t.read(op) {
			reads += n
		} else {
			writes += n
		}
		parts = append(parts, op+"="+itoa(n))
	}
	sort.Strings(parts)
	return reads, writes, strings.Join(parts, " ")
}

// count returns how many op requests were counted.
func (t *tally) count(op string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ops[op]
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// middleware counts every DynamoDB operation the SDK starts (once per
// operation, whatever its retries).
func (t *tally) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("mcpushCount",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			t.add(middleware.GetOperationName(ctx))
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

func dynamoRead(op string) bool { return dynamostore.IsRead(op) }

// countingStore counts notify.Store calls: on SQLite each is one statement
// or one transaction.
type countingStore struct {
	notify.Store
	t *tally
}

var storeReads = map[string]bool{
	"GetSession": true, "ReadEvents": true, "GetMessage": true, "Subscribers": true,
	"ReadTopicEvents": true, "Topics": true, "GetRegistry": true, "RegistryHashes": true,
}

func storeRead(op string) bool { return storeReads[op] }

func (c *countingStore) CreateSession(ctx context.Context, s *notify.Session) error {
	c.t.add("CreateSession")
	return c.Store.CreateSession(ctx, s)
}
func (c *countingStore) GetSession(ctx context.Context, id string) (*notify.Session, error) {
	c.t.add("GetSession")
	return c.Store.GetSession(ctx, id)
}
func (c *countingStore) UpdateSession(ctx context.Context, s *notify.Session) error {
	c.t.add("UpdateSession")
	return c.Store.UpdateSession(ctx, s)
}
func (c *countingStore) DeleteSession(ctx context.Context, id string) error {
	c.t.add("DeleteSession")
	return c.Store.DeleteSession(ctx, id)
}
func (c *countingStore) Append(ctx context.Context, sid, stream string, data [][]byte, o *notify.AppendOptions) (int64, bool, error) {
	c.t.add("Append")
	return c.Store.Append(ctx, sid, stream, data, o)
}
func (c *countingStore) AppendEach(ctx context.Context, ids []string, uri string, upTo int64, pick func(*notify.Session, int64) [][]byte) ([]string, error) {
	c.t.add("AppendEach")
	return c.Store.AppendEach(ctx, ids, uri, upTo, pick)
}
func (c *countingStore) ReadEvents(ctx context.Context, sid, stream string, after int64, limit int) ([]notify.Event, error) {
	c.t.add("ReadEvents")
	return c.Store.ReadEvents(ctx, sid, stream, after, limit)
}
func (c *countingStore) MarkDelivered(ctx context.Context, sid string, seq int64) error {
	c.t.add("MarkDelivered")
	return c.Store.MarkDelivered(ctx, sid, seq)
}
func (c *countingStore) PutMessage(ctx context.Context, sid, key string, data []byte) (bool, error) {
	c.t.add("PutMessage")
	return c.Store.PutMessage(ctx, sid, key, data)
}
func (c *countingStore) GetMessage(ctx context.Context, sid, key string) ([]byte, error) {
	c.t.add("GetMessage")
	return c.Store.GetMessage(ctx, sid, key)
}
func (c *countingStore) Subscribe(ctx context.Context, sid, uri string) error {
	c.t.add("Subscribe")
	return c.Store.Subscribe(ctx, sid, uri)
}
func (c *countingStore) Unsubscribe(ctx context.Context, sid, uri string) error {
	c.t.add("Unsubscribe")
	return c.Store.Unsubscribe(ctx, sid, uri)
}
func (c *countingStore) Subscribers(ctx context.Context, uri string) ([]string, error) {
	c.t.add("Subscribers")
	return c.Store.Subscribers(ctx, uri)
}
func (c *countingStore) AppendTopicEvent(ctx context.Context, topic, id string, at time.Time, data json.RawMessage) (notify.TopicEvent, bool, error) {
	c.t.add("AppendTopicEvent")
	return c.Store.AppendTopicEvent(ctx, topic, id, at, data)
}
func (c *countingStore) ReadTopicEvents(ctx context.Context, topic string, after int64, limit int) ([]notify.TopicEvent, error) {
	c.t.add("ReadTopicEvents")
	return c.Store.ReadTopicEvents(ctx, topic, after, limit)
}
func (c *countingStore) Topics(ctx context.Context) ([]notify.Topic, error) {
	c.t.add("Topics")
	return c.Store.Topics(ctx)
}
func (c *countingStore) ApplyRegistry(ctx context.Context, kind, op string, items map[string]json.RawMessage, id string) (*notify.Registry, bool, error) {
	c.t.add("ApplyRegistry")
	return c.Store.ApplyRegistry(ctx, kind, op, items, id)
}
func (c *countingStore) GetRegistry(ctx context.Context, kind string) (*notify.Registry, error) {
	c.t.add("GetRegistry")
	return c.Store.GetRegistry(ctx, kind)
}
func (c *countingStore) RegistryHashes(ctx context.Context) (map[string]string, error) {
	c.t.add("RegistryHashes")
	return c.Store.RegistryHashes(ctx)
}

package dynamostore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Operation names counted by Counter.
const (
	OpGetItem            = "GetItem"
	OpBatchGetItem       = "BatchGetItem"
	OpQuery              = "Query"
	OpPutItem            = "PutItem"
	OpUpdateItem         = "UpdateItem"
	OpDeleteItem         = "DeleteItem"
	OpBatchWriteItem     = "BatchWriteItem"
	OpTransactWriteItems = "TransactWriteItems"
)

// IsRead reports whether op (one of the Op constants) only reads.
func IsRead(op string) bool {
	switch op {
	case OpGetItem, OpBatchGetItem, OpQuery:
		return true
	}
	return false
}

// Counter is an API that passes every call to another API and counts the
// calls by operation. It counts requests as the caller sees them: the
// SDK's internal retries of one call are not counted again. A Counter is
// safe for concurrent use.
type Counter struct {
	api API

	mu     sync.Mutex
	counts map[string]int64
}

var _ API = (*Counter)(nil)

// NewCounter returns a Counter in front of api.
func NewCounter(api API) *Counter {
	return &Counter{api: api, counts: make(map[string]int64)}
}

func (c *Counter) add(op string) {
	c.mu.Lock()
	c.counts[op]++
	c.mu.Unlock()
}

// Counts returns the number of calls per operation since the Counter was
// made or last Reset. Operations never called are absent.
func (c *Counter) Counts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Reads returns the number of read calls (GetItem, BatchGetItem, Query).
func (c *Counter) Reads() int64 {
	var n int64
	for op, k := range c.Counts() {
		if IsRead(op) {
			n += k
		}
	}
	return n
}

// Writes returns the number of write calls (every other operation).
func (c *Counter) Writes() int64 {
	var n int64
	for op, k := range c.Counts() {
		if !IsRead(op) {
			n += k
		}
	}
	return n
}

// Reset sets every count to zero.
func (c *Counter) Reset() {
	c.mu.Lock()
	clear(c.counts)
	c.mu.Unlock()
}

// String formats the counts as "reads=R writes=W (Op=n, ...)", operations
// sorted by name.
func (c *Counter) String() string {
	counts := c.Counts()
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", op, counts[op]))
	}
	return fmt.Sprintf("reads=%d writes=%d (%s)", c.Reads(), c.Writes(), strings.Join(parts, ", "))
}

// GetItem implements API.
func (c *Counter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.add(OpGetItem)
	return c.api.GetItem(ctx, in, optFns...)
}

// BatchGetItem implements API.
func (c *Counter) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.add(OpBatchGetItem)
	return c.api.BatchGetItem(ctx, in, optFns...)
}

// Query implements API.
func (c *Counter) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.add(OpQuery)
	return c.api.Query(ctx, in, optFns...)
}

// PutItem implements API.
func (c *Counter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.add(OpPutItem)
	return c.api.PutItem(ctx, in, optFns...)
}

// UpdateItem implements API.
func (c *Counter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.add(OpUpdateItem)
	return c.api.UpdateItem(ctx, in, optFns...)
}

// DeleteItem implements API.
func (c *Counter) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.add(OpDeleteItem)
	return c.api.DeleteItem(ctx, in, optFns...)
}

// BatchWriteItem implements API.
func (c *Counter) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	c.add(OpBatchWriteItem)
	return c.api.BatchWriteItem(ctx, in, optFns...)
}

// TransactWriteItems implements API.
func (c *Counter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.add(OpTransactWriteItems)
	return c.api.TransactWriteItems(ctx, in, optFns...)
}

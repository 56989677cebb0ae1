package costs

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"

	"github.com/aws/smithy-go/middleware"

	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// requests is what the tests read of a request counter: tally for
// DynamoDB API calls, storeTally for notify.Store calls.
type requests interface {
	reset()
	counts() (reads, writes int, desc string)
	count(op string) int
}

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

// storeTally reads the counts of notify.Store calls (storecount, which
// the mains' MCPUSH_STORE_STATS uses too): on SQLite each is one
// statement or one transaction.
type storeTally struct{ c *storecount.Counter }

func (s storeTally) reset() { s.c.Reset() }

func (s storeTally) counts() (reads, writes int, desc string) {
	n := s.c.Counts()
	return int(n.Reads()), int(n.Writes()), n.String()
}

func (s storeTally) count(op string) int { return int(s.c.Counts()[op]) }

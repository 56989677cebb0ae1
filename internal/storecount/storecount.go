// Package storecount counts the requests a store (storeconfig.Store:
// what both stores implement) serves, by operation: one per method. On SQLite each call is one statement or
// one transaction; on DynamoDB a call may make several API calls (count
// those with an SDK middleware, as internal/costs does).
//
// Wrap counts into a Counter in memory (the cost tests read it); Record
// also writes the counts of a process to a stats file, so that a test
// can add up the store requests of many processes (the mains do it when
// MCPUSH_STORE_STATS is set). Every request also counts in the process's
// metrics (package metrics: StoreRequests and StoreThrottles), which is
// why Open always wraps the store.
package storecount

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
)

// reads are the counted operations that only read; every other one
// writes. Every counted operation is in ops.
var reads = map[string]bool{
	"GetSession": true, "ReadEvents": true, "GetMessage": true, "Subscribers": true,
	"ReadTopicEvents": true, "Topics": true, "GetRegistry": true, "RegistryHashes": true,
	"CountSessions": true, "IdleSessions": true, "PrincipalProfiles": true, "GetTask": true, "CountTasks": true, "Changes": true,
	"GetWebhook": true, "TopicWebhooks": true, "TopicHead": true, "CountWebhooks": true, "WebhookVerified": true,
}

// IsRead reports whether the counted operation op only reads.
func IsRead(op string) bool { return reads[op] }

// Counts are store requests by operation name (a notify.Store method).
type Counts map[string]int64

// Total returns the number of requests.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Reads returns the number of requests that only read (IsRead).
func (c Counts) Reads() int64 {
	var n int64
	for op, v := range c {
		if IsRead(op) {
			n += v
		}
	}
	return n
}

// Writes returns the number of requests that write.
func (c Counts) Writes() int64 { return c.Total() - c.Reads() }

// Add adds o to c, which must not be nil.
func (c Counts) Add(o Counts) {
	for op, v := range o {
		c[op] += v
	}
}

// Sub returns c - o by operation, leaving out operations whose difference
// is 0.
func (c Counts) Sub(o Counts) Counts {
	d := Counts{}
	for op, v := range c {
		if n := v - o[op]; n != 0 {
			d[op] = n
		}
	}
	for op, v := range o {
		if _, ok := c[op]; !ok && v != 0 {
			d[op] = -v
		}
	}
	return d
}

// String lists the counts by operation name, "GetSession=2 RegistryHashes=1".
func (c Counts) String() string {
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, op+"="+strconv.FormatInt(c[op], 10))
	}
	return strings.Join(parts, " ")
}

// Counter counts store requests by operation. The zero Counter is ready
// to use; it is safe for concurrent use.
type Counter struct {
	mu  sync.Mutex
	ops Counts
}

func (c *Counter) add(op string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.ops == nil {
		c.ops = Counts{}
	}
	c.ops[op]++
	c.mu.Unlock()
}

// Counts returns a copy of the counts so far.
func (c *Counter) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.ops)
}

// Reset forgets the counts so far.
func (c *Counter) Reset() {
	c.mu.Lock()
	c.ops = nil
	c.mu.Unlock()
}

// Wrap returns st counting into c: one wrapper, with every method of
// the stores, so that a server finds through it what it finds in st.
// Close is not counted. Every request also counts in the process's
// metrics (metrics.StoreRequest: by access, and as a throttle when it
// failed as notify.ErrUnavailable); a nil c counts only there.
func Wrap(st storeconfig.Store, c *Counter) storeconfig.Store {
	return &store{Store: st, c: c}
}

// count counts the request op that ended with *errp.
func (s *store) count(ctx context.Context, op string, errp *error) {
	s.c.add(op)
	a := metrics.Write
	if IsRead(op) {
		a = metrics.Read
	}
	metrics.StoreRequest(ctx, a, errors.Is(*errp, notify.ErrUnavailable))
}

// store counts the requests of the store it embeds; it overrides every
// method but Close. close, when set, replaces Close.
type store struct {
	storeconfig.Store
	c     *Counter
	close func() error
}

func (s *store) SharedKey(ctx context.Context, name string, value []byte) (r0 []byte, err error) {
	defer s.count(ctx, "SharedKey", &err)
	return s.Store.SharedKey(ctx, name, value)
}

func (s *store) IdleSessions(ctx context.Context, principal string, expiresBy time.Time, limit int) (r0 []string, err error) {
	defer s.count(ctx, "IdleSessions", &err)
	return s.Store.IdleSessions(ctx, principal, expiresBy, limit)
}

func (s *store) PrincipalProfiles(ctx context.Context, principal string, match notify.ListenMatch, limit int) (r0 []*notify.Session, err error) {
	defer s.count(ctx, "PrincipalProfiles", &err)
	return s.Store.PrincipalProfiles(ctx, principal, match, limit)
}

func (s *store) TopicHead(ctx context.Context, topic string) (r0 int64, err error) {
	defer s.count(ctx, "TopicHead", &err)
	return s.Store.TopicHead(ctx, topic)
}

func (s *store) Close() error {
	if s.close != nil {
		return s.close()
	}
	return s.Store.Close()
}

func (s *store) CreateSession(ctx context.Context, ses *notify.Session) (err error) {
	defer s.count(ctx, "CreateSession", &err)
	return s.Store.CreateSession(ctx, ses)
}

func (s *store) GetSession(ctx context.Context, id string) (r0 *notify.Session, err error) {
	defer s.count(ctx, "GetSession", &err)
	return s.Store.GetSession(ctx, id)
}

func (s *store) UpdateSession(ctx context.Context, ses *notify.Session) (err error) {
	defer s.count(ctx, "UpdateSession", &err)
	return s.Store.UpdateSession(ctx, ses)
}

func (s *store) DeleteSession(ctx context.Context, id string) (err error) {
	defer s.count(ctx, "DeleteSession", &err)
	return s.Store.DeleteSession(ctx, id)
}

func (s *store) Append(ctx context.Context, sessionID, streamID string, data [][]byte, opts *notify.AppendOptions) (r0 int64, r1 bool, err error) {
	defer s.count(ctx, "Append", &err)
	return s.Store.Append(ctx, sessionID, streamID, data, opts)
}

func (s *store) AppendEach(ctx context.Context, ids []string, uri string, upTo int64, pick func(*notify.Session, notify.Position) [][]byte) (r0 []string, err error) {
	defer s.count(ctx, "AppendEach", &err)
	return s.Store.AppendEach(ctx, ids, uri, upTo, pick)
}

func (s *store) ReadEvents(ctx context.Context, sessionID, streamID string, after int64, limit int) (r0 []notify.Event, err error) {
	defer s.count(ctx, "ReadEvents", &err)
	return s.Store.ReadEvents(ctx, sessionID, streamID, after, limit)
}

func (s *store) MarkDelivered(ctx context.Context, sessionID string, seq int64) (err error) {
	defer s.count(ctx, "MarkDelivered", &err)
	return s.Store.MarkDelivered(ctx, sessionID, seq)
}

func (s *store) PutMessage(ctx context.Context, sessionID, key string, data []byte) (r0 bool, err error) {
	defer s.count(ctx, "PutMessage", &err)
	return s.Store.PutMessage(ctx, sessionID, key, data)
}

func (s *store) GetMessage(ctx context.Context, sessionID, key string) (r0 []byte, err error) {
	defer s.count(ctx, "GetMessage", &err)
	return s.Store.GetMessage(ctx, sessionID, key)
}

func (s *store) Subscribe(ctx context.Context, sessionID, uri string) (err error) {
	defer s.count(ctx, "Subscribe", &err)
	return s.Store.Subscribe(ctx, sessionID, uri)
}

func (s *store) Unsubscribe(ctx context.Context, sessionID, uri string) (err error) {
	defer s.count(ctx, "Unsubscribe", &err)
	return s.Store.Unsubscribe(ctx, sessionID, uri)
}

func (s *store) Subscribers(ctx context.Context, uri string) (r0 []string, err error) {
	defer s.count(ctx, "Subscribers", &err)
	return s.Store.Subscribers(ctx, uri)
}

func (s *store) AppendTopicEvent(ctx context.Context, topic, messageID string, receivedAt time.Time, data json.RawMessage) (r0 notify.TopicEvent, r1 bool, err error) {
	defer s.count(ctx, "AppendTopicEvent", &err)
	return s.Store.AppendTopicEvent(ctx, topic, messageID, receivedAt, data)
}

func (s *store) ReadTopicEvents(ctx context.Context, topic string, after int64, limit int) (r0 []notify.TopicEvent, err error) {
	defer s.count(ctx, "ReadTopicEvents", &err)
	return s.Store.ReadTopicEvents(ctx, topic, after, limit)
}

func (s *store) Topics(ctx context.Context) (r0 []notify.Topic, err error) {
	defer s.count(ctx, "Topics", &err)
	return s.Store.Topics(ctx)
}

func (s *store) ApplyRegistry(ctx context.Context, kind, op string, items map[string]json.RawMessage, messageID string) (r0 *notify.Registry, r1 bool, err error) {
	defer s.count(ctx, "ApplyRegistry", &err)
	return s.Store.ApplyRegistry(ctx, kind, op, items, messageID)
}

func (s *store) GetRegistry(ctx context.Context, kind string) (r0 *notify.Registry, err error) {
	defer s.count(ctx, "GetRegistry", &err)
	return s.Store.GetRegistry(ctx, kind)
}

func (s *store) RegistryHashes(ctx context.Context) (r0 map[string]string, err error) {
	defer s.count(ctx, "RegistryHashes", &err)
	return s.Store.RegistryHashes(ctx)
}

func (s *store) Changes(ctx context.Context, cursor string) (r0 notify.ChangeSet, r1 string, err error) {
	defer s.count(ctx, "Changes", &err)
	return s.Store.Changes(ctx, cursor)
}

func (s *store) CountInWindow(ctx context.Context, key string, window, n int64, expires time.Time) (r0 int64, err error) {
	defer s.count(ctx, "CountInWindow", &err)
	return s.Store.CountInWindow(ctx, key, window, n, expires)
}

func (s *store) CountSessions(ctx context.Context, principal string, limit int) (r0 int, err error) {
	defer s.count(ctx, "CountSessions", &err)
	return s.Store.CountSessions(ctx, principal, limit)
}

func (s *store) CreateTask(ctx context.Context, task *notify.Task) (err error) {
	defer s.count(ctx, "CreateTask", &err)
	return s.Store.CreateTask(ctx, task)
}

func (s *store) GetTask(ctx context.Context, principal, id string) (r0 *notify.Task, err error) {
	defer s.count(ctx, "GetTask", &err)
	return s.Store.GetTask(ctx, principal, id)
}

func (s *store) UpdateTask(ctx context.Context, task *notify.Task) (err error) {
	defer s.count(ctx, "UpdateTask", &err)
	return s.Store.UpdateTask(ctx, task)
}

func (s *store) CountTasks(ctx context.Context, principal string, limit int) (r0 notify.TaskCount, err error) {
	defer s.count(ctx, "CountTasks", &err)
	return s.Store.CountTasks(ctx, principal, limit)
}

func (s *store) CreateWebhook(ctx context.Context, sub *notify.WebhookSubscription, max int) (err error) {
	defer s.count(ctx, "CreateWebhook", &err)
	return s.Store.CreateWebhook(ctx, sub, max)
}

func (s *store) CountWebhooks(ctx context.Context, principal string, limit int) (n int, err error) {
	defer s.count(ctx, "CountWebhooks", &err)
	return s.Store.CountWebhooks(ctx, principal, limit)
}

func (s *store) PutWebhookVerified(ctx context.Context, key string, until time.Time) (err error) {
	defer s.count(ctx, "PutWebhookVerified", &err)
	return s.Store.PutWebhookVerified(ctx, key, until)
}

func (s *store) WebhookVerified(ctx context.Context, key string) (ok bool, err error) {
	defer s.count(ctx, "WebhookVerified", &err)
	return s.Store.WebhookVerified(ctx, key)
}

func (s *store) GetWebhook(ctx context.Context, topic, id string) (r0 *notify.WebhookSubscription, err error) {
	defer s.count(ctx, "GetWebhook", &err)
	return s.Store.GetWebhook(ctx, topic, id)
}

func (s *store) UpdateWebhook(ctx context.Context, sub *notify.WebhookSubscription) (err error) {
	defer s.count(ctx, "UpdateWebhook", &err)
	return s.Store.UpdateWebhook(ctx, sub)
}

func (s *store) DeleteWebhook(ctx context.Context, sub *notify.WebhookSubscription) (err error) {
	defer s.count(ctx, "DeleteWebhook", &err)
	return s.Store.DeleteWebhook(ctx, sub)
}

func (s *store) TopicWebhooks(ctx context.Context, topic, after string, limit int) (r0 []*notify.WebhookSubscription, r1 string, err error) {
	defer s.count(ctx, "TopicWebhooks", &err)
	return s.Store.TopicWebhooks(ctx, topic, after, limit)
}

// Package storecount counts the requests a store (storeconfig.Store:
// what both stores implement) serves, by operation: one per method. On SQLite each call is one statement or
// one transaction; on DynamoDB a call may make several API calls (count
// those with an SDK middleware, as internal/costs does).
//
// Wrap counts into a Counter in memory (the cost tests read it); Record
// also writes the counts of a process to a stats file, so that a test
// can add up the store requests of many processes (the mains do it when
// MCPUSH_STORE_STATS is set).
package storecount

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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
// Close is not counted.
func Wrap(st storeconfig.Store, c *Counter) storeconfig.Store {
	return &store{Store: st, c: c}
}

// store counts the requests of the store it embeds; it overrides every
// method but Close. close, when set, replaces Close.
type store struct {
	storeconfig.Store
	c     *Counter
	close func() error
}

func (s *store) SharedKey(ctx context.Context, name string, value []byte) ([]byte, error) {
	s.c.add("SharedKey")
	return s.Store.SharedKey(ctx, name, value)
}

func (s *store) IdleSessions(ctx context.Context, principal string, expiresBy time.Time, limit int) ([]string, error) {
	s.c.add("IdleSessions")
	return s.Store.IdleSessions(ctx, principal, expiresBy, limit)
}

func (s *store) PrincipalProfiles(ctx context.Context, principal string, match notify.ListenMatch, limit int) ([]*notify.Session, error) {
	s.c.add("PrincipalProfiles")
	return s.Store.PrincipalProfiles(ctx, principal, match, limit)
}

func (s *store) TopicHead(ctx context.Context, topic string) (int64, error) {
	s.c.add("TopicHead")
	return s.Store.TopicHead(ctx, topic)
}

func (s *store) Close() error {
	if s.close != nil {
		return s.close()
	}
	return s.Store.Close()
}

func (s *store) CreateSession(ctx context.Context, ses *notify.Session) error {
	s.c.add("CreateSession")
	return s.Store.CreateSession(ctx, ses)
}

func (s *store) GetSession(ctx context.Context, id string) (*notify.Session, error) {
	s.c.add("GetSession")
	return s.Store.GetSession(ctx, id)
}

func (s *store) UpdateSession(ctx context.Context, ses *notify.Session) error {
	s.c.add("UpdateSession")
	return s.Store.UpdateSession(ctx, ses)
}

func (s *store) DeleteSession(ctx context.Context, id string) error {
	s.c.add("DeleteSession")
	return s.Store.DeleteSession(ctx, id)
}

func (s *store) Append(ctx context.Context, sessionID, streamID string, data [][]byte, opts *notify.AppendOptions) (int64, bool, error) {
	s.c.add("Append")
	return s.Store.Append(ctx, sessionID, streamID, data, opts)
}

func (s *store) AppendEach(ctx context.Context, ids []string, uri string, upTo int64, pick func(*notify.Session, notify.Position) [][]byte) ([]string, error) {
	s.c.add("AppendEach")
	return s.Store.AppendEach(ctx, ids, uri, upTo, pick)
}

func (s *store) ReadEvents(ctx context.Context, sessionID, streamID string, after int64, limit int) ([]notify.Event, error) {
	s.c.add("ReadEvents")
	return s.Store.ReadEvents(ctx, sessionID, streamID, after, limit)
}

func (s *store) MarkDelivered(ctx context.Context, sessionID string, seq int64) error {
	s.c.add("MarkDelivered")
	return s.Store.MarkDelivered(ctx, sessionID, seq)
}

func (s *store) PutMessage(ctx context.Context, sessionID, key string, data []byte) (bool, error) {
	s.c.add("PutMessage")
	return s.Store.PutMessage(ctx, sessionID, key, data)
}

func (s *store) GetMessage(ctx context.Context, sessionID, key string) ([]byte, error) {
	s.c.add("GetMessage")
	return s.Store.GetMessage(ctx, sessionID, key)
}

func (s *store) Subscribe(ctx context.Context, sessionID, uri string) error {
	s.c.add("Subscribe")
	return s.Store.Subscribe(ctx, sessionID, uri)
}

func (s *store) Unsubscribe(ctx context.Context, sessionID, uri string) error {
	s.c.add("Unsubscribe")
	return s.Store.Unsubscribe(ctx, sessionID, uri)
}

func (s *store) Subscribers(ctx context.Context, uri string) ([]string, error) {
	s.c.add("Subscribers")
	return s.Store.Subscribers(ctx, uri)
}

func (s *store) AppendTopicEvent(ctx context.Context, topic, messageID string, receivedAt time.Time, data json.RawMessage) (notify.TopicEvent, bool, error) {
	s.c.add("AppendTopicEvent")
	return s.Store.AppendTopicEvent(ctx, topic, messageID, receivedAt, data)
}

func (s *store) ReadTopicEvents(ctx context.Context, topic string, after int64, limit int) ([]notify.TopicEvent, error) {
	s.c.add("ReadTopicEvents")
	return s.Store.ReadTopicEvents(ctx, topic, after, limit)
}

func (s *store) Topics(ctx context.Context) ([]notify.Topic, error) {
	s.c.add("Topics")
	return s.Store.Topics(ctx)
}

func (s *store) ApplyRegistry(ctx context.Context, kind, op string, items map[string]json.RawMessage, messageID string) (*notify.Registry, bool, error) {
	s.c.add("ApplyRegistry")
	return s.Store.ApplyRegistry(ctx, kind, op, items, messageID)
}

func (s *store) GetRegistry(ctx context.Context, kind string) (*notify.Registry, error) {
	s.c.add("GetRegistry")
	return s.Store.GetRegistry(ctx, kind)
}

func (s *store) RegistryHashes(ctx context.Context) (map[string]string, error) {
	s.c.add("RegistryHashes")
	return s.Store.RegistryHashes(ctx)
}

func (s *store) Changes(ctx context.Context, cursor string) (notify.ChangeSet, string, error) {
	s.c.add("Changes")
	return s.Store.Changes(ctx, cursor)
}

func (s *store) CountInWindow(ctx context.Context, key string, window, n int64, expires time.Time) (int64, error) {
	s.c.add("CountInWindow")
	return s.Store.CountInWindow(ctx, key, window, n, expires)
}

func (s *store) CountSessions(ctx context.Context, principal string, limit int) (int, error) {
	s.c.add("CountSessions")
	return s.Store.CountSessions(ctx, principal, limit)
}

func (s *store) CreateTask(ctx context.Context, task *notify.Task) error {
	s.c.add("CreateTask")
	return s.Store.CreateTask(ctx, task)
}

func (s *store) GetTask(ctx context.Context, principal, id string) (*notify.Task, error) {
	s.c.add("GetTask")
	return s.Store.GetTask(ctx, principal, id)
}

func (s *store) UpdateTask(ctx context.Context, task *notify.Task) error {
	s.c.add("UpdateTask")
	return s.Store.UpdateTask(ctx, task)
}

func (s *store) CountTasks(ctx context.Context, principal string, limit int) (notify.TaskCount, error) {
	s.c.add("CountTasks")
	return s.Store.CountTasks(ctx, principal, limit)
}

func (s *store) CreateWebhook(ctx context.Context, sub *notify.WebhookSubscription, max int) error {
	s.c.add("CreateWebhook")
	return s.Store.CreateWebhook(ctx, sub, max)
}

func (s *store) CountWebhooks(ctx context.Context, principal string, limit int) (int, error) {
	s.c.add("CountWebhooks")
	return s.Store.CountWebhooks(ctx, principal, limit)
}

func (s *store) PutWebhookVerified(ctx context.Context, key string, until time.Time) error {
	s.c.add("PutWebhookVerified")
	return s.Store.PutWebhookVerified(ctx, key, until)
}

func (s *store) WebhookVerified(ctx context.Context, key string) (bool, error) {
	s.c.add("WebhookVerified")
	return s.Store.WebhookVerified(ctx, key)
}

func (s *store) GetWebhook(ctx context.Context, topic, id string) (*notify.WebhookSubscription, error) {
	s.c.add("GetWebhook")
	return s.Store.GetWebhook(ctx, topic, id)
}

func (s *store) UpdateWebhook(ctx context.Context, sub *notify.WebhookSubscription) error {
	s.c.add("UpdateWebhook")
	return s.Store.UpdateWebhook(ctx, sub)
}

func (s *store) DeleteWebhook(ctx context.Context, sub *notify.WebhookSubscription) error {
	s.c.add("DeleteWebhook")
	return s.Store.DeleteWebhook(ctx, sub)
}

func (s *store) TopicWebhooks(ctx context.Context, topic, after string, limit int) ([]*notify.WebhookSubscription, string, error) {
	s.c.add("TopicWebhooks")
	return s.Store.TopicWebhooks(ctx, topic, after, limit)
}

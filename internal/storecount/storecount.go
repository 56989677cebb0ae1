// Package storecount counts the requests a notify.Store serves, by
// operation: the notify.Store methods, and the optional notify.RateCounter
// and notify.SessionCounter ones. On SQLite each call is one statement or
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
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// reads are the counted operations that only read; every other one
// writes. Every counted operation is in ops.
var reads = map[string]bool{
	"GetSession": true, "ReadEvents": true, "GetMessage": true, "Subscribers": true,
	"ReadTopicEvents": true, "Topics": true, "GetRegistry": true, "RegistryHashes": true,
	"CountSessions": true, "IdleSessions": true, "PrincipalProfiles": true, "GetTask": true, "CountTasks": true, "Changes": true,
	"GetWebhook": true, "TopicWebhooks": true, "TopicHead": true,
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

// Wrap returns st with every request counted in c. The result implements
// notify.RateCounter and notify.SessionCounter exactly when st does (and
// notify.TaskStore when st implements all three, as both stores do, and
// the webhook subscription methods when it implements those too), so
// that a server finds the same capabilities through it. Close is not
// counted.
func Wrap(st notify.Store, c *Counter) notify.Store {
	return wrap(&store{Store: st, c: c})
}

// wrap adds to s the optional interfaces its inner store implements.
func wrap(s *store) notify.Store {
	rc, isRC := s.Store.(notify.RateCounter)
	sc, isSC := s.Store.(notify.SessionCounter)
	r := rateCounter{rc, s.c}
	n := sessionCounter{sc, s.c}
	ts, isTS := s.Store.(notify.TaskStore)
	if ws, ok := s.Store.(webhooks); ok && isTS && isRC && isSC {
		return struct {
			*store
			rateCounter
			sessionCounter
			taskStore
			webhookStore
		}{s, r, n, taskStore{ts, s.c}, webhookStore{ws, s.c}}
	}
	if isTS && isRC && isSC {
		return struct {
			*store
			rateCounter
			sessionCounter
			taskStore
		}{s, r, n, taskStore{ts, s.c}}
	}
	switch {
	case isRC && isSC:
		return struct {
			*store
			rateCounter
			sessionCounter
		}{s, r, n}
	case isRC:
		return struct {
			*store
			rateCounter
		}{s, r}
	case isSC:
		return struct {
			*store
			sessionCounter
		}{s, n}
	}
	return s
}

// store counts the requests of the notify.Store it embeds; it overrides
// every method of notify.Store but Close. close, when set, replaces
// Close.
type store struct {
	notify.Store
	c     *Counter
	close func() error
}

// SharedKey implements notify.SharedKeys for every counted store: it
// passes the call on to the inner store, or returns errors.ErrUnsupported
// when that has none.
func (s *store) SharedKey(ctx context.Context, name string, value []byte) ([]byte, error) {
	sk, ok := s.Store.(notify.SharedKeys)
	if !ok {
		return nil, fmt.Errorf("storecount: the store keeps no shared keys: %w", errors.ErrUnsupported)
	}
	s.c.add("SharedKey")
	return sk.SharedKey(ctx, name, value)
}

// IdleSessions implements notify.SessionReclaimer for every counted
// store: it passes the call on to the inner store, or returns
// errors.ErrUnsupported when that has none.
func (s *store) IdleSessions(ctx context.Context, principal string, expiresBy time.Time, limit int) ([]string, error) {
	sr, ok := s.Store.(notify.SessionReclaimer)
	if !ok {
		return nil, fmt.Errorf("storecount: the store reclaims no sessions: %w", errors.ErrUnsupported)
	}
	s.c.add("IdleSessions")
	return sr.IdleSessions(ctx, principal, expiresBy, limit)
}

// PrincipalProfiles implements notify.ProfileLister for every counted
// store: it passes the call on to the inner store, or returns
// errors.ErrUnsupported when that has none.
func (s *store) PrincipalProfiles(ctx context.Context, principal string, match []byte, limit int) ([]*notify.Session, error) {
	pl, ok := s.Store.(notify.ProfileLister)
	if !ok {
		return nil, fmt.Errorf("storecount: the store lists no profiles: %w", errors.ErrUnsupported)
	}
	s.c.add("PrincipalProfiles")
	return pl.PrincipalProfiles(ctx, principal, match, limit)
}

// TopicHead implements notify.TopicHeads for every counted store: it
// passes the call on to the inner store, or returns errors.ErrUnsupported
// when that has none (the caller then lists the topics).
func (s *store) TopicHead(ctx context.Context, topic string) (int64, error) {
	th, ok := s.Store.(notify.TopicHeads)
	if !ok {
		return 0, fmt.Errorf("storecount: the store reads no topic heads: %w", errors.ErrUnsupported)
	}
	s.c.add("TopicHead")
	return th.TopicHead(ctx, topic)
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

func (s *store) Changes(ctx context.Context, cursor string) ([]string, string, error) {
	s.c.add("Changes")
	return s.Store.Changes(ctx, cursor)
}

// rateCounter counts notify.RateCounter requests.
type rateCounter struct {
	rc notify.RateCounter
	c  *Counter
}

func (r rateCounter) CountInWindow(ctx context.Context, key string, window, n int64, expires time.Time) (int64, error) {
	r.c.add("CountInWindow")
	return r.rc.CountInWindow(ctx, key, window, n, expires)
}

// sessionCounter counts notify.SessionCounter requests.
type sessionCounter struct {
	sc notify.SessionCounter
	c  *Counter
}

func (n sessionCounter) CountSessions(ctx context.Context, principal string, limit int) (int, error) {
	n.c.add("CountSessions")
	return n.sc.CountSessions(ctx, principal, limit)
}

// taskStore counts notify.TaskStore requests.
type taskStore struct {
	ts notify.TaskStore
	c  *Counter
}

func (t taskStore) CreateTask(ctx context.Context, task *notify.Task) error {
	t.c.add("CreateTask")
	return t.ts.CreateTask(ctx, task)
}

func (t taskStore) GetTask(ctx context.Context, principal, id string) (*notify.Task, error) {
	t.c.add("GetTask")
	return t.ts.GetTask(ctx, principal, id)
}

func (t taskStore) UpdateTask(ctx context.Context, task *notify.Task) error {
	t.c.add("UpdateTask")
	return t.ts.UpdateTask(ctx, task)
}

func (t taskStore) CountTasks(ctx context.Context, principal string, limit int) (notify.TaskCount, error) {
	t.c.add("CountTasks")
	return t.ts.CountTasks(ctx, principal, limit)
}

// webhooks are the webhook subscription methods of both stores.
type webhooks interface {
	CreateWebhook(ctx context.Context, w *notify.WebhookSubscription, max int) error
	GetWebhook(ctx context.Context, topic, id string) (*notify.WebhookSubscription, error)
	UpdateWebhook(ctx context.Context, w *notify.WebhookSubscription) error
	DeleteWebhook(ctx context.Context, w *notify.WebhookSubscription) error
	TopicWebhooks(ctx context.Context, topic, after string, limit int) ([]*notify.WebhookSubscription, string, error)
}

// webhookStore counts webhook subscription requests.
type webhookStore struct {
	ws webhooks
	c  *Counter
}

func (w webhookStore) CreateWebhook(ctx context.Context, sub *notify.WebhookSubscription, max int) error {
	w.c.add("CreateWebhook")
	return w.ws.CreateWebhook(ctx, sub, max)
}

func (w webhookStore) GetWebhook(ctx context.Context, topic, id string) (*notify.WebhookSubscription, error) {
	w.c.add("GetWebhook")
	return w.ws.GetWebhook(ctx, topic, id)
}

func (w webhookStore) UpdateWebhook(ctx context.Context, sub *notify.WebhookSubscription) error {
	w.c.add("UpdateWebhook")
	return w.ws.UpdateWebhook(ctx, sub)
}

func (w webhookStore) DeleteWebhook(ctx context.Context, sub *notify.WebhookSubscription) error {
	w.c.add("DeleteWebhook")
	return w.ws.DeleteWebhook(ctx, sub)
}

func (w webhookStore) TopicWebhooks(ctx context.Context, topic, after string, limit int) ([]*notify.WebhookSubscription, string, error) {
	w.c.add("TopicWebhooks")
	return w.ws.TopicWebhooks(ctx, topic, after, limit)
}

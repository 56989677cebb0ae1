// Package dynamostore implements notify.Store on one DynamoDB table with
// string keys pk and sk and the TTL attribute expiresAt.
//
// # Table layout
//
// Every id that becomes part of a key is escaped ('%' and '#' as %25 and
// %23) so that '#' separates key parts unambiguously; a part longer than
// 400 bytes is replaced by "%h" and its SHA-256, so that any id fits in
// DynamoDB's key limits (the original is kept in an attribute where a
// reader needs it).
//
//	pk              sk                  item
//	S#<session>     #                   session (profile, version, notified hashes, delivered)
//	S#<session>     #u#<uri>            subscription of the session to uri
//	S#<session>     #h#g                head of the GET stream (notify.SessionStream)
//	S#<session>     h#<stream>          head of another stream: last sequence number
//	S#<session>     e#<stream>#<seq>    event (seq zero-padded to 20 digits)
//	S#<session>     i#<key>             Append idempotency key
//	S#<session>     m#<key>             mailbox message
//	U#<uri>         <session>           subscriber index entry
//	T               <topic>             topic head: last seq, updated time
//	T#<topic>       <seq>               topic event
//	T#<topic>       m#<message id>      topic message id (idempotency)
//	R               <kind>              registry items and hash
//	R               #hashes             every registry's hash, for RegistryHashes
//	R               m#<kind>#<msg id>   registry message id (idempotency)
//	K               <name>              shared key (notify.SharedKeys)
//	C#<10 s bucket> <nanos>#<token>     change feed item (shard 0): sessions that changed
//	C#<bucket>#<i>  <nanos>#<token>     change feed item of shard i (Options.FeedShards)
//
// Everything a session owns shares its partition, so DeleteSession finds it
// with one Query; the session item, its subscriptions and the head of its
// GET stream share the sk prefix "#", so GetSession is one Query, which
// for a session of a few KB is one read unit: the whole poll of an idle
// stream.
//
// # Expiry
//
// Items that expire carry exp (Unix nanoseconds; readers and conditions
// compare it with Options.Now) and expiresAt (Unix seconds, rounded up; for
// DynamoDB's TTL, which deletes items up to days late). Readers ignore
// expired items. Stream heads (so that sequence numbers never restart),
// subscriptions and registries do not expire: they go with their session
// (DeleteSession, or CreateSession replacing an expired session), or live
// forever. When DynamoDB's TTL removes an expired session item that nobody
// deleted, its heads and subscription markers stay behind, small and
// unread (session ids are random and never reused); Subscribers deletes
// the index entries of such sessions when it meets them.
//
// # Requests
//
// Per call, in the common case: CreateSession one TransactWriteItems (with
// its principal's index entry); CountSessions one Query (one BatchGetItem
// more at the limit); GetSession one Query; Append one
// TransactWriteItems (one more per lost race); ReadEvents one BatchGetItem
// when nothing or up to three events are new, else one more Query;
// UpdateSession, MarkDelivered, PutMessage, Subscribe, Unsubscribe,
// AppendTopicEvent one write each; GetMessage, ReadTopicEvents, Topics,
// GetRegistry, RegistryHashes one read each; Subscribers one Query and one
// BatchGetItem per 100 subscribers; ApplyRegistry one GetItem and one
// TransactWriteItems; DeleteSession one UpdateItem, one Query, one
// BatchWriteItem per 25 items and one DeleteItem; Changes one Query per
// shard (Options.FeedShards) of each partition of the change feed it spans
// (usually one). The transactions
// of an Append to a SessionStream log and of an AppendEach carry one
// change feed item more, and a DeleteSession puts one (see changes.go).
// Counter counts them.
//
// # Atomicity and retries
//
// Every operation that can race is one conditional write or one
// TransactWriteItems. Sequence numbers come from a head item updated with
// the condition "seq = the value I assumed", in the same transaction as the
// events, so they are gap-free; the assumed value comes from a per-Store
// cache and, after a lost race, from the cancelled transaction's
// ReturnValuesOnConditionCheckFailure, so a warm Append is one request.
//
// Every conditional write also stores a random token of the call that
// made it. When the SDK retries a write whose first attempt reached DynamoDB
// but whose response was lost, the retry fails its condition against the
// call's own earlier write; the token tells that apart from a real conflict,
// so the call reports success (for Append, after at most one extra read).
// An error therefore means the SDK gave up (throttling, 5xx, network,
// context); the write may or may not have happened, as with any database.
// Callers that need exactly-once Append pass an IdempotencyKey and retry.
//
// SDK errors are returned wrapped, never as notify sentinels.
package dynamostore

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/mcpush/mcpush/pkg/notify"
)

// API is the part of *dynamodb.Client that a Store uses. Tests and servers
// inject a client (or a wrapper such as Counter) through it.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Defaults for Options (notify's, shared by every store).
const (
	DefaultEventTTL      = notify.DefaultEventTTL
	DefaultTopicEventTTL = notify.DefaultTopicEventTTL
)

// Options configures a Store: the options every store takes (as in
// notify.StoreOptions) and the change feed's shards. The zero value (or a
// nil *Options) gives the defaults.
type Options struct {
	// Now returns the current time. It decides session expiry and the
	// expiry of stored records. Nil means time.Now.
	Now func() time.Time
	// EventTTL is how long stream-log events, mailbox messages and
	// idempotency keys (of Append and of ApplyRegistry) are kept.
	// Zero means DefaultEventTTL.
	EventTTL time.Duration
	// TopicEventTTL is how long topic events, with the message ids that
	// make AppendTopicEvent idempotent, are kept. Zero means
	// DefaultTopicEventTTL.
	TopicEventTTL time.Duration
	// FeedShards is the number of partition keys (K) that the change
	// feed (Changes) spreads each 10 s window over: each takes about
	// 1/K of the deployment's changes, and a read of the feed costs K
	// Queries (see changes.go and docs/costs.md). Every Store on one
	// table must use the same value. Zero means DefaultFeedShards; at
	// most MaxFeedShards.
	FeedShards int
}

// CheckOptions reports whether o's values are in their bounds: New panics
// on those CheckOptions refuses.
func CheckOptions(o *Options) error {
	if o != nil && (o.FeedShards < 0 || o.FeedShards > MaxFeedShards) {
		return fmt.Errorf("%w: %d feed shards: want 1 to %d (0: the default, %d)", notify.ErrInvalid, o.FeedShards, MaxFeedShards, DefaultFeedShards)
	}
	return nil
}

// Store is a notify.Store on one DynamoDB table.
//
// A Store is safe for concurrent use by many goroutines, and any number of
// Stores, in one process or many, may share a table. It does not own the
// client; Close does nothing.
type Store struct {
	api      API
	table    *string
	now      func() time.Time
	eventTTL time.Duration
	topicTTL time.Duration
	// feedShards is the change feed's K (Options.FeedShards).
	feedShards int
	// feedLead is how far ahead its change feed items are stamped
	// (transactChange).
	feedLead leadEstimate

	// seqs caches the last known sequence number of stream and topic
	// heads, so that a warm Append guesses the head right the first time.
	// A wrong guess costs one more request, never correctness.
	seqs seqCache
	// writers queues this Store's own writers of one head (stream, topic,
	// registry), so that they do not race each other through DynamoDB:
	// only writers in other processes (or other Stores) do.
	writers keyedMutex
}

var _ notify.Store = (*Store)(nil)

// New returns a Store on table through api. The table must exist (see
// CreateTable). A nil opts means the defaults. It panics on options that
// CheckOptions refuses (a programming error: callers that take them from
// configuration check them first).
func New(api API, table string, opts *Options) *Store {
	if err := CheckOptions(opts); err != nil {
		panic(err)
	}
	var so notify.StoreOptions
	shards := DefaultFeedShards
	if opts != nil {
		so = notify.StoreOptions{Now: opts.Now, EventTTL: opts.EventTTL, TopicEventTTL: opts.TopicEventTTL}
		if opts.FeedShards > 0 {
			shards = opts.FeedShards
		}
	}
	o := so.WithDefaults()
	s := &Store{
		api:        api,
		table:      aws.String(table),
		now:        o.Now,
		eventTTL:   o.EventTTL,
		topicTTL:   o.TopicEventTTL,
		feedShards: shards,
	}
	return s
}

// Close implements notify.Store. It does nothing: the client belongs to the
// caller.
func (s *Store) Close() error { return nil }

// Attribute names.
const (
	attrPK        = "pk"
	attrSK        = "sk"
	attrExpiresAt = "expiresAt" // TTL, Unix seconds
	attrExp       = "exp"       // precise expiry, Unix nanoseconds
	attrTok       = "tok"       // token of the call that wrote the item
	attrData      = "d"
	attrSeq       = "seq"
)

// Key parts.
const (
	metaSK     = "#"
	markerPref = "#u#"
	getHeadSK  = "#h#g"
	topicsPK   = "T"
	registryPK = "R"
	hashesSK   = "#hashes"
	maxKeyPart = 400
)

var keyEscaper = strings.NewReplacer("%", "%25", "#", "%23")

// part escapes s for use in a key, hashing it when long.
func part(s string) string {
	e := keyEscaper.Replace(s)
	if len(e) > maxKeyPart {
		sum := sha256.Sum256([]byte(s))
		return "%h" + hex.EncodeToString(sum[:])
	}
	return e
}

func pad(seq int64) string { return fmt.Sprintf("%020d", seq) }

func sessPK(id string) string    { return "S#" + part(id) }
func markerSK(uri string) string { return markerPref + part(uri) }
func headSK(stream string) string {
	if stream == notify.SessionStream {
		return getHeadSK
	}
	return "h#" + part(stream)
}
func eventSK(stream string, seq int64) string { return "e#" + part(stream) + "#" + pad(seq) }
func idemSK(key string) string                { return "i#" + part(key) }
func msgSK(key string) string                 { return "m#" + part(key) }
func subPK(uri string) string                 { return "U#" + part(uri) }
func topicPK(topic string) string             { return "T#" + part(topic) }
func topicMsgSK(id string) string             { return "m#" + part(id) }
func regMsgSK(kind, id string) string         { return "m#" + kind + "#" + part(id) }

// item is one DynamoDB item.
type item = map[string]types.AttributeValue

func key(pk, sk string) item {
	return item{attrPK: avS(pk), attrSK: avS(sk)}
}

func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func avN(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
func avB(v []byte) types.AttributeValue {
	if v == nil {
		v = []byte{}
	}
	return &types.AttributeValueMemberB{Value: v}
}
func avBool(v bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: v} }

func getS(it item, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(it item, name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err == nil {
			return n
		}
	}
	return 0
}

// getB returns a binary attribute, nil when absent and non-nil when
// present (even if empty).
func getB(it item, name string) []byte {
	if v, ok := it[name].(*types.AttributeValueMemberB); ok {
		if v.Value == nil {
			return []byte{}
		}
		return v.Value
	}
	return nil
}

func getBool(it item, name string) bool {
	v, ok := it[name].(*types.AttributeValueMemberBOOL)
	return ok && v.Value
}

// live reports whether an item exists and has not expired at now (Unix
// nanoseconds). Items without exp never expire.
func live(it item, now int64) bool {
	if len(it) == 0 {
		return false
	}
	if _, ok := it[attrExp]; !ok {
		return true
	}
	return getN(it, attrExp) > now
}

// expiry returns the exp and expiresAt attributes for an item that expires
// at t.
func expiry(t time.Time) (exp, ttl types.AttributeValue) {
	n := toNanos(t)
	secs := n / 1e9
	if n%1e9 > 0 {
		secs++
	}
	return avN(n), avN(secs)
}

func setExpiry(it item, t time.Time) item {
	it[attrExp], it[attrExpiresAt] = expiry(t)
	return it
}

// Times are stored as notify.UnixNanos.
func toNanos(t time.Time) int64   { return notify.UnixNanos(t) }
func fromNanos(n int64) time.Time { return notify.FromUnixNanos(n) }

// newToken returns a random token identifying one call's writes.
func newToken() string {
	var b [16]byte
	crand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// attempts counts the HTTP attempts the SDK makes for one call, so that a
// failed condition can be recognised as possibly caused by the call's own
// earlier attempt. Clients that are not *dynamodb.Client ignore it and
// count nothing.
type attempts struct{ n atomic.Int32 }

func (a *attempts) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("mcpushCountAttempts",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				a.n.Add(1)
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	})
}

// retried reports whether the SDK sent the request more than once.
func (a *attempts) retried() bool { return a.n.Load() > 1 }

// Cancellation reason codes of TransactWriteItems.
const (
	reasonNone        = "None"
	reasonCondition   = "ConditionalCheckFailed"
	reasonConflict    = "TransactionConflict"
	reasonThrottling  = "ThrottlingError"
	reasonProvisioned = "ProvisionedThroughputExceeded"
)

// cancellation is a TransactionCanceledException's reasons, by item.
type cancellation []types.CancellationReason

// asCancellation returns the reasons of a cancelled transaction.
func asCancellation(err error) (cancellation, bool) {
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		return nil, false
	}
	return cancellation(tc.CancellationReasons), true
}

// failed reports whether item i failed its condition, and its old value.
func (c cancellation) failed(i int) (bool, item) {
	if i >= len(c) {
		return false, nil
	}
	return aws.ToString(c[i].Code) == reasonCondition, c[i].Item
}

// transient reports whether the transaction was cancelled only by
// conflicts with other transactions or by throttling (worth retrying), as
// opposed to a failed condition or a validation error.
func (c cancellation) transient() bool {
	seen := false
	for _, r := range c {
		switch aws.ToString(r.Code) {
		case "", reasonNone:
		case reasonConflict, reasonThrottling, reasonProvisioned:
			seen = true
		default:
			return false
		}
	}
	return seen
}

// conditionFailedErr returns a ConditionalCheckFailedException's old item.
func conditionFailed(err error) (bool, item) {
	var cf *types.ConditionalCheckFailedException
	if !errors.As(err, &cf) {
		return false, nil
	}
	return true, cf.Item
}

// backoff sleeps before retry number n (from 1) of a lost race.
func backoff(ctx context.Context, n int) error {
	d := time.Duration(1<<min(n, 6)) * time.Millisecond
	d = d/2 + rand.N(d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// maxRaces bounds the retries of one call after lost races. A writer that
// lost a race to a counter (stream head, topic head, registry version)
// retries at once from the value the cancelled transaction returned; after
// ten losses in a row it sleeps a few milliseconds between tries.
const maxRaces = 500

// seqCache remembers the last sequence number seen per head.
type seqCache struct {
	mu sync.Mutex
	m  map[string]int64
}

func (c *seqCache) get(k string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *seqCache) set(k string, v int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= 10000 {
		c.m = make(map[string]int64)
	}
	c.m[k] = v
}

func (c *seqCache) forget(prefix string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if strings.HasPrefix(k, prefix) {
			delete(c.m, k)
		}
	}
}

// keyedMutex is a set of mutexes by key, created on demand.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	ch   chan struct{} // holds a token while locked
	refs int           // holders and waiters
}

// lock locks k's mutex, or gives up when ctx is done. On success the
// caller must call the returned unlock.
func (km *keyedMutex) lock(ctx context.Context, k string) (unlock func(), err error) {
	km.mu.Lock()
	if km.m == nil {
		km.m = make(map[string]*keyedEntry)
	}
	e := km.m[k]
	if e == nil {
		e = &keyedEntry{ch: make(chan struct{}, 1)}
		km.m[k] = e
	}
	e.refs++
	km.mu.Unlock()
	release := func() {
		km.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(km.m, k)
		}
		km.mu.Unlock()
	}
	select {
	case e.ch <- struct{}{}:
		return func() { <-e.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// wrap adds context to a non-nil *errp, keeping it inspectable with
// errors.Is and errors.As, and marks a throttled, unreachable or timed-out
// call notify.ErrUnavailable (see unavailable).
func wrap(errp *error, format string, args ...any) {
	if *errp != nil {
		*errp = fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), unavailable(*errp))
	}
}

// unavailable marks err notify.ErrUnavailable when the SDK's own retry
// policy calls it transient (throttling, 5xx, a connection or timeout
// error) or when the SDK gave up retrying it: the same call may succeed
// later.
func unavailable(err error) error {
	switch {
	case err == nil, errors.Is(err, notify.ErrUnavailable), errors.Is(err, context.Canceled):
		return err
	}
	var maxAttempts *retry.MaxAttemptsError
	if errors.As(err, &maxAttempts) || errors.Is(err, context.DeadlineExceeded) ||
		retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary ||
		retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary {
		return fmt.Errorf("%w: %w", notify.ErrUnavailable, err)
	}
	return err
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", notify.ErrInvalid, fmt.Sprintf(format, args...))
}

func tooLarge(what string, n, limit int) error {
	return fmt.Errorf("%w: %s is %d bytes, limit %d", notify.ErrTooLarge, what, n, limit)
}

// consistent is ConsistentRead: every read in this package is strongly
// consistent, because another instance may have written just before.
var consistent = aws.Bool(true)

// batchGet reads keys (at most 100) with strongly consistent reads,
// retrying unprocessed keys. It returns the items found.
func (s *Store) batchGet(ctx context.Context, keys []item, projection string, names map[string]string) ([]item, error) {
	var out []item
	for n := 0; len(keys) > 0; n++ {
		if n > 0 {
			if err := backoff(ctx, n); err != nil {
				return nil, err
			}
		}
		ka := types.KeysAndAttributes{Keys: keys, ConsistentRead: consistent}
		if projection != "" {
			ka.ProjectionExpression = aws.String(projection)
			ka.ExpressionAttributeNames = names
		}
		res, err := s.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems: map[string]types.KeysAndAttributes{*s.table: ka},
		})
		if err != nil {
			return nil, err
		}
		out = append(out, res.Responses[*s.table]...)
		keys = res.UnprocessedKeys[*s.table].Keys
		if n > maxRaces {
			return nil, errors.New("BatchGetItem: keys left unprocessed")
		}
	}
	return out, nil
}

// sessionMetas reads the session items of ids (at most 100: one
// BatchGetItem) with projection (all attributes when ""), by session id;
// a session without one is not in the map.
func (s *Store) sessionMetas(ctx context.Context, ids []string, projection string, names map[string]string) (map[string]item, error) {
	keys := make([]item, len(ids))
	for i, id := range ids {
		keys[i] = key(sessPK(id), metaSK)
	}
	metas, err := s.batchGet(ctx, keys, projection, names)
	if err != nil {
		return nil, err
	}
	byPK := make(map[string]item, len(metas))
	for _, m := range metas {
		byPK[getS(m, attrPK)] = m
	}
	found := make(map[string]item, len(metas))
	for _, id := range ids {
		if m, ok := byPK[sessPK(id)]; ok {
			found[id] = m
		}
	}
	return found, nil
}

// queryItems runs a Query to its last page and returns its items.
func (s *Store) queryItems(ctx context.Context, in *dynamodb.QueryInput) ([]item, error) {
	var items []item
	for {
		res, err := s.api.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		items = append(items, res.Items...)
		if len(res.LastEvaluatedKey) == 0 {
			return items, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// queryIDs runs a Query to its last page and returns the attrSID of every
// item.
func (s *Store) queryIDs(ctx context.Context, in *dynamodb.QueryInput) ([]string, error) {
	items, err := s.queryItems(ctx, in)
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = getS(it, attrSID)
	}
	return ids, err
}

// batchDelete deletes keys, 25 per request, retrying unprocessed ones.
func (s *Store) batchDelete(ctx context.Context, keys []item) error {
	reqs := make([]types.WriteRequest, len(keys))
	for i, k := range keys {
		reqs[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}}
	}
	return s.batchWrite(ctx, reqs)
}

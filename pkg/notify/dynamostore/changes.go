package dynamostore

import (
	"context"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/pkg/notify"
)

// The change feed (Store.Changes) is a time-ordered set of small items in
// partitions of changeBucket each, split into Options.FeedShards shards
// (K) so that no partition key takes every change of the deployment:
//
//	pk                  sk                  item
//	C#<bucket>          <nanos>#<token>     shard 0: ids, the sessions that changed
//	C#<bucket>#<i>      <nanos>#<token>     shard i (1 ≤ i < K)
//
// A writer puts one item per change, in the shard of the FNV-1a hash of
// the smallest id it names (changeShard): an Append's session, an
// AppendEach transaction's first session, notify.RegistryChanged. It
// puts it in the transaction of the change (an Append to a SessionStream
// log, an AppendEach, an ApplyRegistry), or after it (a DeleteSession),
// with its own clock. Shard 0 keeps the key of the unsharded feed, so a
// reader still reads what a writer of before the sharding puts.
//
// A reader queries the K shards of the partitions from changeOverlap
// before its previous read's start (K Queries, or 2K when the window
// spans two partitions; at most maxShardQueries at a time): items that
// became visible late, or that a writer with a slower clock stamped
// earlier, are still read; the cursor carries the tokens read within the
// overlap, so that none is reported twice. A write that may have
// committed more than the overlap after its item's stamp (the SDK
// retried it, or it was slower than this Store's recent transactions: the
// stamp leads by their time) puts the item again, stamped after the commit
// (transactChange). A deleter that dies between the deletion and
// its put loses the hint; the stream learns of it at its own next check.
//
// Every process of a deployment (the servers and the ingest) must use the
// same K: a reader reads shards 0 to K-1 only, and misses the changes a
// writer with a larger K puts beyond them (its streams learn of them at
// their own check). docs/configuration.md (MCPUSH_FEED_SHARDS) says how
// to change K.
const (
	changeBucket  = 10 * time.Second
	changeOverlap = time.Second
	changePK      = "C#"
	attrIDs       = "ids"
	// maxCursorTokens bounds the tokens a cursor carries; past it, some
	// items of the overlap may be reported again (a spurious wake-up).
	maxCursorTokens = 500
	// maxShardQueries bounds the shard Queries a Changes call has in
	// flight.
	maxShardQueries = 16
)

// Bounds of Options.FeedShards.
const (
	// DefaultFeedShards is the change feed's shards when
	// Options.FeedShards is zero: two partition keys per 10 s window,
	// each taking half the deployment's changes, for two Queries per read
	// of the feed (docs/costs.md).
	DefaultFeedShards = 2
	// MaxFeedShards bounds Options.FeedShards: 512 shards take 100,000
	// single appends a second at 400 write units a second each.
	MaxFeedShards = 512
)

// changePartition is the key of shard of the feed's partition bucket.
func changePartition(bucket int64, shard int) string {
	pk := changePK + strconv.FormatInt(bucket, 10)
	if shard > 0 {
		pk += "#" + strconv.Itoa(shard)
	}
	return pk
}

// changeShard returns the shard of a change feed item naming ids, sorted:
// the FNV-1a hash of the first, modulo the Store's shards.
func (s *Store) changeShard(ids []string) int {
	if s.feedShards <= 1 || len(ids) == 0 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(ids[0]))
	return int(h.Sum32() % uint32(s.feedShards))
}

// changeItem is the change feed item naming ids, stamped at: a Put in
// the transaction of the change it reports (transactChange), so that it
// commits with it, or alone (recordChange).
func (s *Store) changeItem(at time.Time, ids []string) *types.Put {
	n := toNanos(at)
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	it := key(changePartition(n/int64(changeBucket), s.changeShard(ids)), pad(n)+"#"+newToken()[:12])
	it[attrIDs] = &types.AttributeValueMemberSS{Value: ids}
	setExpiry(it, at.Add(notify.ChangeFeedTTL))
	return &types.Put{TableName: s.table, Item: it}
}

// recordChange puts a change feed item naming ids after a change that is
// not one transaction (DeleteSession), or again after a transaction that
// may have committed late (transactChange), stamped feedLead ahead as a
// transaction's is. Best effort: the change itself has
// happened, and a stream whose hint is lost learns of it at its own
// check.
func (s *Store) recordChange(ctx context.Context, ids ...string) {
	if len(ids) == 0 {
		return
	}
	// A put that itself took long may have become visible after a
	// reader's window passed its stamp: put again, a few times at most.
	for range 3 {
		stamp, lead := s.feedStamp()
		var at attempts
		began := time.Now()
		_, err := s.api.PutItem(context.WithoutCancel(ctx), &dynamodb.PutItemInput{TableName: s.table, Item: s.changeItem(stamp, ids).Item}, at.option)
		took := time.Since(began)
		if !at.retried() {
			s.feedLead.observe(took)
		}
		if err != nil || !at.retried() && took < lead+changeOverlap {
			return
		}
	}
}

// transactChange runs a transaction of items and, when ids are given, of
// the change feed item naming them (last, after items: cancellation
// reasons are read by the order of items). The item is stamped feedLead
// ahead of now: a transaction that commits within feedLead plus
// changeOverlap of its start is then read by every reader, whose window
// reaches changeOverlap back from its previous read (changes.go). When
// the item may have become visible after a reader's window had moved past
// its stamp, it records the change again, stamped after the call: when
// the SDK sent the transaction more than once (every attempt carries the
// first stamp, and an earlier attempt may have committed, however the
// call ends), or it succeeded after feedLead plus changeOverlap or more.
// The reader's next window holds the new item; without it the streams of
// ids would learn of their change only at their own check.
func (s *Store) transactChange(ctx context.Context, items []types.TransactWriteItem, at *attempts, ids []string) (*dynamodb.TransactWriteItemsOutput, error) {
	stamp, lead := s.feedStamp()
	if len(ids) > 0 {
		items = append(items[:len(items):len(items)], types.TransactWriteItem{Put: s.changeItem(stamp, ids)})
	}
	began := time.Now()
	out, err := s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, at.option)
	took := time.Since(began)
	if !at.retried() {
		s.feedLead.observe(took)
	}
	if len(ids) > 0 && (at.retried() || err == nil && took >= lead+changeOverlap) {
		s.recordChange(ctx, ids...)
	}
	return out, err
}

// feedStamp returns the stamp of a change feed item written now, feedLead
// ahead but within now's partition (a reader reads a later partition only
// once its own clock reaches it, which would delay the item), and the
// lead it has.
func (s *Store) feedStamp() (time.Time, time.Duration) {
	now := s.now()
	stamp := now.Add(s.feedLead.get())
	if n := toNanos(now); toNanos(stamp)/int64(changeBucket) != n/int64(changeBucket) {
		stamp = fromNanos((n/int64(changeBucket)+1)*int64(changeBucket) - 1)
	}
	return stamp, stamp.Sub(now)
}

// maxFeedLead bounds how far ahead of its start a transaction stamps its
// change feed item (leadEstimate): readers read the items stamped ahead
// again at each poll until their window passes them.
const maxFeedLead = 4 * time.Second

// leadEstimate is how long this Store's feed writes take: the time of the
// slowest recent one, less an eighth of the time since (a 2 s write
// weighs for 16 s); twice that, at most maxFeedLead, is the lead of change
// feed stamps, so that a write twice as slow as the slowest recent one
// plus changeOverlap needs no re-record.
// On DynamoDB a few tens of milliseconds; on a busy moto a second or
// more, which would otherwise re-record the change of nearly every
// transaction. Safe for concurrent use.
type leadEstimate struct {
	mu   sync.Mutex
	peak time.Duration
	at   time.Time
}

func (l *leadEstimate) get() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return min(2*l.decayed(time.Now()), maxFeedLead)
}

func (l *leadEstimate) decayed(now time.Time) time.Duration {
	return max(0, l.peak-now.Sub(l.at)/8)
}

// observe takes in the time of one write that the SDK sent once.
func (l *leadEstimate) observe(took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if took >= l.decayed(now) {
		l.peak, l.at = min(took, maxFeedLead), now
	}
}

// Changes implements notify.Store: one Query per shard of each partition
// the window spans (usually one partition).
func (s *Store) Changes(ctx context.Context, cursor string) (_ notify.ChangeSet, next string, err error) {
	defer wrap(&err, "dynamostore: Changes(%q)", clip(cursor))
	start := toNanos(s.now())
	if cursor == "" {
		// From the end: what the overlap holds now is old news.
		_, next, err := s.changes(ctx, start, start, nil)
		return notify.ChangeSet{}, next, err
	}
	from, seen, err := parseChangeCursor(cursor)
	if err != nil {
		return notify.ChangeSet{}, "", err
	}
	ids, next, err := s.changes(ctx, start, from, seen)
	return notify.ChangesOf(ids), next, err
}

// feedRead is what a read of the feed gathered from one shard, or from
// all of them.
type feedRead struct {
	ids         []string
	tokens      []string // of the items within the overlap of start
	overflow    bool     // more than notify.MaxChangesRead ids
	overflowReg bool     // notify.RegistryChanged among the ids past the overflow
}

// add takes the ids of an item in.
func (r *feedRead) add(ids []string) {
	if r.overflow {
		r.overflowReg = r.overflowReg || slices.Contains(ids, notify.RegistryChanged)
		return
	}
	r.ids = append(r.ids, ids...)
	if len(r.ids) > 2*notify.MaxChangesRead {
		r.ids = slices.Compact(slices.Sorted(slices.Values(r.ids)))
		r.overflow = len(r.ids) > notify.MaxChangesRead
	}
}

// merge adds what o gathered to r.
func (r *feedRead) merge(o *feedRead) {
	r.add(o.ids)
	r.overflow = r.overflow || o.overflow
	r.overflowReg = r.overflowReg || o.overflowReg
	r.tokens = append(r.tokens, o.tokens[:min(len(o.tokens), maxCursorTokens-len(r.tokens))]...)
}

// changes reads the feed from changeOverlap before from, skipping the
// items whose tokens are in seen.
func (s *Store) changes(ctx context.Context, start, from int64, seen map[string]bool) (ids []string, next string, err error) {
	low := from - int64(changeOverlap)
	// Up to start's partition: an item a writer with a faster clock
	// stamped in a later one is read once start reaches it.
	var pks []string
	for b := low / int64(changeBucket); b <= start/int64(changeBucket); b++ {
		for shard := range s.feedShards {
			pks = append(pks, changePartition(b, shard))
		}
	}
	reads := make([]feedRead, len(pks))
	errs := make([]error, len(pks))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxShardQueries)
	for i, pk := range pks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = s.readShard(ctx, pk, low, start, seen, &reads[i])
		})
	}
	wg.Wait()
	var all feedRead
	for i := range reads {
		if errs[i] != nil {
			return nil, "", errs[i]
		}
		all.merge(&reads[i])
	}
	ids = slices.Compact(slices.Sorted(slices.Values(all.ids)))
	if all.overflow || len(ids) > notify.MaxChangesRead {
		// More than one call returns, and the window cannot be split
		// (its items interleave across writers' clocks): the reader
		// takes all its sessions as changed, rather than some missing
		// their change until their own check.
		reg := all.overflowReg || slices.Contains(ids, notify.RegistryChanged)
		ids = []string{notify.ChangesOverflow}
		if reg {
			ids = append(ids, notify.RegistryChanged)
		}
	}
	return ids, strconv.FormatInt(start, 10) + "|" + strings.Join(all.tokens, ","), nil
}

// readShard reads the items of partition key pk stamped after low into r,
// skipping those whose tokens are in seen, and keeps the tokens of those
// within the overlap of start.
func (s *Store) readShard(ctx context.Context, pk string, low, start int64, seen map[string]bool, r *feedRead) error {
	var e expr
	in := &dynamodb.QueryInput{
		TableName:      s.table,
		ConsistentRead: consistent,
		KeyConditionExpression: aws.String(e.n(attrPK) + " = " + e.v(avS(pk)) +
			" AND " + e.n(attrSK) + " > " + e.v(avS(pad(low)))),
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
	overlap := pad(start - int64(changeOverlap))
	for {
		res, err := s.api.Query(ctx, in)
		if err != nil {
			return err
		}
		for _, it := range res.Items {
			sk := getS(it, attrSK)
			if len(sk) <= 21 {
				continue // not a feed item
			}
			tok := sk[21:]
			if sk >= overlap && len(r.tokens) < maxCursorTokens {
				r.tokens = append(r.tokens, tok)
			}
			if seen[tok] {
				continue
			}
			if ss, ok := it[attrIDs].(*types.AttributeValueMemberSS); ok {
				r.add(ss.Value)
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// parseChangeCursor splits a cursor "<nanos>[|<token>,...]".
func parseChangeCursor(c string) (int64, map[string]bool, error) {
	t, toks, _ := strings.Cut(c, "|")
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, nil, invalid("malformed cursor")
	}
	seen := map[string]bool{}
	if toks != "" {
		for _, tok := range strings.Split(toks, ",") {
			seen[tok] = true
		}
	}
	return n, seen, nil
}

// clip shortens a cursor for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

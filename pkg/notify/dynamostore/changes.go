package dynamostore

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/pkg/notify"
)

// The change feed (Store.Changes) is a time-ordered set of small items in
// partitions of changeBucket each:
//
//	pk                  sk                  item
//	C#<bucket>          <nanos>#<token>     ids: the sessions that changed
//
// A writer puts one in the transaction of the change (an Append to a
// SessionStream log, an AppendEach), or after it (a DeleteSession), with
// its own clock.
// A reader queries the partitions from changeOverlap before its previous
// read's start: items that became visible late, or that a writer with a
// slower clock stamped earlier, are still read; the cursor carries the
// tokens read within the overlap, so that none is reported twice. A
// write that may have committed more than the overlap after its item's
// stamp (the SDK retried it, or it was slow) puts the item again, stamped
// after the commit (transactChange). A deleter that dies between the deletion
// and its put loses the hint; the stream learns of it at its own next
// check.
const (
	changeBucket  = 10 * time.Second
	changeOverlap = time.Second
	changePK      = "C#"
	attrIDs       = "ids"
	// maxCursorTokens bounds the tokens a cursor carries; past it, some
	// items of the overlap may be reported again (a spurious wake-up).
	maxCursorTokens = 500
)

// changeItem is the change feed item naming ids, written at now: a Put
// in the transaction of the change it reports (Append, AppendEach), so
// that it commits with it, or alone (recordChange).
func (s *Store) changeItem(now time.Time, ids []string) *types.Put {
	n := toNanos(now)
	it := key(changePK+strconv.FormatInt(n/int64(changeBucket), 10), pad(n)+"#"+newToken()[:12])
	it[attrIDs] = &types.AttributeValueMemberSS{Value: slices.Compact(slices.Sorted(slices.Values(ids)))}
	setExpiry(it, now.Add(notify.ChangeFeedTTL))
	return &types.Put{TableName: s.table, Item: it}
}

// recordChange puts a change feed item naming ids after a change that is
// not one transaction (DeleteSession). Best effort: the change itself has
// happened, and a stream whose hint is lost learns of it at its own
// check.
func (s *Store) recordChange(ctx context.Context, ids ...string) {
	if len(ids) == 0 {
		return
	}
	// A put that itself took long may have become visible after a
	// reader's window passed its stamp: put again, a few times at most.
	for range 3 {
		began := time.Now()
		_, err := s.api.PutItem(context.WithoutCancel(ctx), &dynamodb.PutItemInput{TableName: s.table, Item: s.changeItem(s.now(), ids).Item})
		if err != nil || time.Since(began) < changeOverlap {
			return
		}
	}
}

// transactChange runs a transaction whose items include the change feed
// item naming ids, and records their change again, stamped after the
// call, when that item may have become visible after a reader's window
// (changeOverlap before its previous read) had moved past its stamp: when
// the SDK sent the transaction more than once (every attempt carries the
// first stamp, and an earlier attempt may have committed, however the
// call ends), or it succeeded after changeOverlap or more. The reader's
// next window holds the new item; without it the streams of ids would
// learn of their change only at their own check. No ids: no record.
func (s *Store) transactChange(ctx context.Context, items []types.TransactWriteItem, at *attempts, ids []string) (*dynamodb.TransactWriteItemsOutput, error) {
	began := time.Now()
	out, err := s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, at.option)
	if at.retried() || err == nil && time.Since(began) >= changeOverlap {
		s.recordChange(ctx, ids...)
	}
	return out, err
}

// Changes implements notify.Store: one Query per partition the window
// spans (usually one).
func (s *Store) Changes(ctx context.Context, cursor string) (ids []string, next string, err error) {
	defer wrap(&err, "dynamostore: Changes(%q)", clip(cursor))
	start := toNanos(s.now())
	if cursor == "" {
		// From the end: what the overlap holds now is old news.
		_, next, err := s.changes(ctx, start, start, nil)
		return nil, next, err
	}
	from, seen, err := parseChangeCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	return s.changes(ctx, start, from, seen)
}

// changes reads the feed from changeOverlap before from, skipping the
// items whose tokens are in seen.
func (s *Store) changes(ctx context.Context, start, from int64, seen map[string]bool) (ids []string, next string, err error) {
	low := from - int64(changeOverlap)
	var newSeen []string
	overflow, overflowReg := false, false
	keep := func(sk string) bool { return sk >= pad(start-int64(changeOverlap)) }
	// Up to start's partition: an item a writer with a faster clock
	// stamped in a later one is read once start reaches it.
	for b := low / int64(changeBucket); b <= start/int64(changeBucket); b++ {
		var e expr
		in := &dynamodb.QueryInput{
			TableName:      s.table,
			ConsistentRead: consistent,
			KeyConditionExpression: aws.String(e.n(attrPK) + " = " + e.v(avS(changePK+strconv.FormatInt(b, 10))) +
				" AND " + e.n(attrSK) + " > " + e.v(avS(pad(low)))),
		}
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
		for {
			res, err := s.api.Query(ctx, in)
			if err != nil {
				return nil, "", err
			}
			for _, it := range res.Items {
				sk := getS(it, attrSK)
				if keep(sk) && len(newSeen) < maxCursorTokens {
					newSeen = append(newSeen, sk[21:])
				}
				if seen[sk[21:]] {
					continue
				}
				if ss, ok := it[attrIDs].(*types.AttributeValueMemberSS); ok && overflow {
					overflowReg = overflowReg || slices.Contains(ss.Value, notify.RegistryChanged)
				} else if ok {
					ids = append(ids, ss.Value...)
					if len(ids) > 2*notify.MaxChangesRead {
						ids = slices.Compact(slices.Sorted(slices.Values(ids)))
						overflow = len(ids) > notify.MaxChangesRead
					}
				}
			}
			if len(res.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = res.LastEvaluatedKey
		}
	}
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	if overflow || len(ids) > notify.MaxChangesRead {
		// More than one call returns, and the window cannot be split
		// (its items interleave across writers' clocks): the reader
		// takes all its sessions as changed, rather than some missing
		// their change until their own check.
		reg := overflowReg || slices.Contains(ids, notify.RegistryChanged)
		ids = []string{notify.ChangesOverflow}
		if reg {
			ids = append(ids, notify.RegistryChanged)
		}
	}
	return ids, strconv.FormatInt(start, 10) + "|" + strings.Join(newSeen, ","), nil
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

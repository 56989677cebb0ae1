package dynamostore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/pkg/notify"
)

// Append implements notify.Store with one TransactWriteItems in the common
// case: the update of the stream head from the sequence number this Store
// last saw to the new one, the events, a check that the session is live
// (an update of its notified hash with opts.NotifiedHash), and the
// idempotency key with opts.IdempotencyKey. A head that moved (another
// writer) costs one more transaction, with the head's value taken from the
// cancelled one.
//
// notify.CheckAppend's limits make one Append fit one transaction:
// notify.MaxAppendBatch events and three bookkeeping items fit DynamoDB's
// 100 items, and notify.MaxAppendBytes plus the session item and the
// items' keys fit its 4 MB.
func (s *Store) Append(ctx context.Context, sessionID, streamID string, data [][]byte, opts *notify.AppendOptions) (lastSeq int64, appended bool, err error) {
	defer wrap(&err, "dynamostore: Append(%q, %q)", sessionID, streamID)
	if err := notify.CheckAppend(sessionID, streamID, data, opts); err != nil {
		return 0, false, err
	}
	var (
		idemKey string
		cas     *notify.HashCAS
	)
	if opts != nil {
		idemKey, cas = opts.IdempotencyKey, opts.NotifiedHash
	}

	var changed []string // the change feed's ids, on the session stream
	if streamID == notify.SessionStream {
		changed = []string{sessionID}
	}
	pk := sessPK(sessionID)
	cacheKey := pk + "|" + headSK(streamID)
	n := int64(len(data))
	tok := newToken()
	unlock, err := s.writers.lock(ctx, cacheKey)
	if err != nil {
		return 0, false, err
	}
	defer unlock()
	old := s.seqs.get(cacheKey)
	for race := 1; ; race++ {
		now := s.now()
		nowN := toNanos(now)
		items := s.appendItems(pk, streamID, data, old, tok, now, idemKey, cas)
		// The change feed's item, if any, commits with the events
		// (transactChange adds it last).
		var at attempts
		_, err := s.transactChange(ctx, items, &at, changed)
		if err == nil {
			s.seqs.set(cacheKey, old+n)
			return old + n, true, nil
		}
		c, ok := asCancellation(err)
		if !ok {
			return 0, false, err
		}

		// Did this call's own earlier attempt (retried by the SDK after
		// its response was lost) succeed?
		headFailed, head := c.failed(0)
		if headFailed && getS(head, attrTok) == tok {
			last := getN(head, attrSeq)
			s.seqs.set(cacheKey, last)
			return last, true, nil
		}
		if idemKey != "" {
			if failed, it := c.failed(2); failed && getS(it, attrTok) == tok {
				return getN(it, attrSeq), true, nil
			}
		}
		if at.retried() {
			mine, err := s.appendedBy(ctx, pk, streamID, old+1, tok)
			if err != nil {
				return 0, false, fmt.Errorf("checking a retried append: %w", err)
			}
			if mine {
				s.seqs.set(cacheKey, old+n)
				return old + n, true, nil
			}
		}

		if failed, meta := c.failed(1); failed {
			if cas == nil || !live(meta, nowN) {
				return 0, false, notify.ErrNotFound
			}
			return 0, false, nil // the notified hash is not cas.Old
		}
		if idemKey != "" {
			if failed, _ := c.failed(2); failed {
				return 0, false, nil // done before
			}
		}
		switch {
		case race >= maxRaces:
			return 0, false, fmt.Errorf("%w: %w", errTooManyRaces, err)
		case headFailed:
			// Another writer moved the head: retry from its value.
			old = getN(head, attrSeq)
			s.seqs.set(cacheKey, old)
			if race > 10 {
				if err := backoff(ctx, 2); err != nil {
					return 0, false, err
				}
			}
		case c.transient():
			if err := backoff(ctx, race); err != nil {
				return 0, false, err
			}
		default:
			return 0, false, err
		}
	}
}

// appendItems returns the transaction of one Append attempt that assumes
// the stream head is at old. Its item order is fixed: head, session,
// idempotency key (if any), events.
func (s *Store) appendItems(pk, streamID string, data [][]byte, old int64, tok string, now time.Time, idemKey string, cas *notify.HashCAS) []types.TransactWriteItem {
	nowN := toNanos(now)
	last := old + int64(len(data))
	items := make([]types.TransactWriteItem, 0, 3+len(data))

	var h expr
	headCond := h.counterIs(attrSeq, old)
	items = append(items, types.TransactWriteItem{Update: &types.Update{
		TableName:                           s.table,
		Key:                                 key(pk, headSK(streamID)),
		UpdateExpression:                    aws.String("SET " + h.n(attrSeq) + " = " + h.v(avN(last)) + ", " + h.n(attrTok) + " = " + h.v(avS(tok))),
		ConditionExpression:                 aws.String(headCond),
		ExpressionAttributeNames:            h.namesOrNil(),
		ExpressionAttributeValues:           h.valuesOrNil(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}})

	if cas == nil {
		items = append(items, types.TransactWriteItem{ConditionCheck: s.liveCheck(pk, nowN)})
	} else {
		var e expr
		path := e.n(attrHashes) + "." + e.n(cas.Registry)
		cond := e.live(nowN) + " AND "
		if cas.Old == "" {
			cond += "(attribute_not_exists(" + path + ") OR " + path + " = " + e.v(avS("")) + ")"
		} else {
			cond += path + " = " + e.v(avS(cas.Old))
		}
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName:                           s.table,
			Key:                                 key(pk, metaSK),
			UpdateExpression:                    aws.String("SET " + path + " = " + e.v(avS(cas.New))),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            e.namesOrNil(),
			ExpressionAttributeValues:           e.valuesOrNil(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
	}

	expires := now.Add(s.eventTTL)
	if idemKey != "" {
		it := setExpiry(key(pk, idemSK(idemKey)), expires)
		it[attrSeq] = avN(last)
		it[attrTok] = avS(tok)
		var e expr
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:                           s.table,
			Item:                                it,
			ConditionExpression:                 aws.String(e.absent(nowN)),
			ExpressionAttributeNames:            e.namesOrNil(),
			ExpressionAttributeValues:           e.valuesOrNil(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
	}

	for i, d := range data {
		seq := old + 1 + int64(i)
		it := setExpiry(key(pk, eventSK(streamID, seq)), expires)
		it[attrSeq] = avN(seq)
		if d != nil {
			it[attrData] = avB(d)
		}
		it[attrTok] = avS(tok)
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: s.table, Item: it}})
	}
	return items
}

// appendedBy reports whether the event at seq was written by the call with
// token tok.
func (s *Store) appendedBy(ctx context.Context, pk, streamID string, seq int64, tok string) (bool, error) {
	var p expr
	res, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                s.table,
		Key:                      key(pk, eventSK(streamID, seq)),
		ConsistentRead:           consistent,
		ProjectionExpression:     aws.String(p.n(attrTok)),
		ExpressionAttributeNames: p.namesOrNil(),
	})
	if err != nil {
		return false, err
	}
	return getS(res.Item, attrTok) == tok, nil
}

// probeEvents is how many events after the reader's position ReadEvents
// fetches along with the session and the head, so that a reader that
// polls often gets its few new events in one request.
const probeEvents = 3

// ReadEvents implements notify.Store. It makes one BatchGetItem of the
// session item, the stream head and the next few events: enough when the
// session is gone (notify.ErrNotFound), when there is nothing new (the
// idle poll) and when at most three events are new. Otherwise it adds one
// Query for the events. A limit below 1 is refused with notify.ErrInvalid.
func (s *Store) ReadEvents(ctx context.Context, sessionID, streamID string, after int64, limit int) (_ []notify.Event, err error) {
	defer wrap(&err, "dynamostore: ReadEvents(%q, %q, %d, %d)", sessionID, streamID, after, limit)
	if err := notify.CheckRead(sessionID, streamID, limit); err != nil {
		return nil, err
	}
	after = max(after, 0)
	if after == math.MaxInt64 {
		return nil, nil
	}
	pk := sessPK(sessionID)
	probes := int64(min(limit, probeEvents))
	keys := []item{key(pk, metaSK), key(pk, headSK(streamID))}
	for i := int64(1); i <= probes && after+i > 0; i++ {
		keys = append(keys, key(pk, eventSK(streamID, after+i)))
	}
	var p expr
	proj := p.n(attrPK) + ", " + p.n(attrSK) + ", " + p.n(attrExp) + ", " + p.n(attrSeq) + ", " + p.n(attrData)
	items, err := s.batchGet(ctx, keys, proj, p.namesOrNil())
	if err != nil {
		return nil, err
	}
	bySK := make(map[string]item, len(items))
	for _, it := range items {
		bySK[getS(it, attrSK)] = it
	}
	now := toNanos(s.now())
	if !live(bySK[metaSK], now) {
		return nil, notify.ErrNotFound
	}
	last := getN(bySK[headSK(streamID)], attrSeq)
	if last <= after {
		return nil, nil
	}
	want := min(int64(limit), last-after)
	var events []notify.Event
	for i := int64(1); i <= want && i <= probes; i++ {
		it, ok := bySK[eventSK(streamID, after+i)]
		if !ok || !live(it, now) {
			break
		}
		events = append(events, notify.Event{Seq: after + i, Data: getB(it, attrData)})
	}
	if int64(len(events)) == want {
		return events, nil
	}
	return s.queryEvents(ctx, pk, streamID, after, limit, now)
}

// queryEvents returns up to limit live events of a stream after seq.
func (s *Store) queryEvents(ctx context.Context, pk, streamID string, after int64, limit int, now int64) ([]notify.Event, error) {
	var e expr
	in := &dynamodb.QueryInput{
		TableName:      s.table,
		ConsistentRead: consistent,
		KeyConditionExpression: aws.String(e.n(attrPK) + " = " + e.v(avS(pk)) + " AND " + e.n(attrSK) + " BETWEEN " +
			e.v(avS(eventSK(streamID, after+1))) + " AND " + e.v(avS(eventSK(streamID, math.MaxInt64)))),
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
	var events []notify.Event
	for len(events) < limit {
		in.Limit = aws.Int32(int32(min(limit-len(events), 1000)))
		res, err := s.api.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range res.Items {
			if live(it, now) {
				events = append(events, notify.Event{Seq: getN(it, attrSeq), Data: getB(it, attrData)})
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	return events, nil
}

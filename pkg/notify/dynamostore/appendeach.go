package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/pkg/notify"
)

// A subscription marker's notify.Position (AppendEach).
const (
	attrPos   = "pos"
	attrSince = "snc"
)

// eachAppend is one session's part of an AppendEach: what to append, and
// the stream head and subscription position it is believed to be at.
type eachAppend struct {
	sess  *notify.Session
	pk    string
	data  [][]byte
	old   int64
	pos   notify.Position
	bytes int
}

// AppendEach implements notify.Store with BatchGetItem requests (two for
// 50 sessions) of the sessions' items, SessionStream heads and
// subscription markers (the profiles and positions pick sees, and the
// heads the events follow), then TransactWriteItems that each carry the
// appends of as many sessions as fit in 100 items and MaxAppendBytes: for
// each session the head's update, a check that the session is live, the
// update of the marker's position (conditional on the position read) and
// the events. Twenty sessions that each get two events fit one
// transaction, so 50 sessions cost two reads and three transactions. A
// session whose head or position moved meanwhile costs its transaction
// one more try, from the values the cancelled one returned; a session
// that is gone, unsubscribed or already at upTo is dropped from it.
func (s *Store) AppendEach(ctx context.Context, ids []string, uri string, upTo int64, pick func(*notify.Session, notify.Position) [][]byte) (appended []string, err error) {
	defer wrap(&err, "dynamostore: AppendEach(%d sessions, %q, %d)", len(ids), uri, upTo)
	ids, err = notify.CheckAppendEach(ids, uri, upTo)
	if err != nil {
		return nil, err
	}
	keys := make([]item, 0, 3*len(ids))
	for _, id := range ids {
		pk := sessPK(id)
		keys = append(keys, key(pk, metaSK), key(pk, getHeadSK), key(pk, markerSK(uri)))
	}
	var items []item
	for chunk := range slices.Chunk(keys, 100) {
		got, err := s.batchGet(ctx, chunk, "", nil)
		if err != nil {
			return nil, err
		}
		items = append(items, got...)
	}
	byKey := make(map[[2]string]item, len(items))
	for _, it := range items {
		byKey[[2]string{getS(it, attrPK), getS(it, attrSK)}] = it
	}
	now := toNanos(s.now())
	var todo []*eachAppend
	for _, id := range ids {
		pk := sessPK(id)
		meta := byKey[[2]string{pk, metaSK}]
		marker, subscribed := byKey[[2]string{pk, markerSK(uri)}]
		if !live(meta, now) || !subscribed || getN(marker, attrPos) >= upTo {
			continue
		}
		a := &eachAppend{sess: sessionOf(id, meta), pk: pk, old: getN(byKey[[2]string{pk, getHeadSK}], attrSeq), pos: positionOf(marker)}
		ok, err := a.pick(pick)
		if err != nil {
			return nil, err
		}
		if ok {
			todo = append(todo, a)
		}
	}

	var errs []error
	for len(todo) > 0 {
		n, size, bytes := 0, 0, 0
		for n < len(todo) {
			items := 3 + len(todo[n].data)
			// One item of the transaction is the change feed's.
			if n > 0 && (size+items+1 > maxTransactItems || bytes+todo[n].bytes > notify.MaxAppendBytes) {
				break
			}
			size += items
			bytes += todo[n].bytes
			n++
		}
		done, err := s.appendGroup(ctx, uri, upTo, pick, todo[:n])
		appended = append(appended, done...)
		if err != nil {
			errs = append(errs, err)
		}
		todo = todo[n:]
	}
	order := make(map[string]int, len(ids))
	for i, id := range ids {
		order[id] = i
	}
	slices.SortFunc(appended, func(a, b string) int { return order[a] - order[b] })
	return appended, errors.Join(errs...)
}

// pick sets a's data to what pick returns at its position, and reports
// whether there is any.
func (a *eachAppend) pick(pick func(*notify.Session, notify.Position) [][]byte) (bool, error) {
	a.data = pick(a.sess, a.pos)
	if a.data == nil {
		return false, nil
	}
	if err := notify.CheckAppend(a.sess.ID, notify.SessionStream, a.data, nil); err != nil {
		return false, err
	}
	a.bytes = 0
	for _, d := range a.data {
		a.bytes += len(d)
	}
	return true, nil
}

// appendGroup appends the group, in one transaction unless a session's
// events grow when pick is asked again: that session goes in a
// transaction of its own afterwards. It returns the ids appended to.
func (s *Store) appendGroup(ctx context.Context, uri string, upTo int64, pick func(*notify.Session, notify.Position) [][]byte, group []*eachAppend) ([]string, error) {
	done, later, err := s.appendOnce(ctx, uri, upTo, pick, group)
	for err == nil && len(later) > 0 {
		var ids []string
		ids, _, err = s.appendOnce(ctx, uri, upTo, pick, later[:1]) // alone, it fits
		done, later = append(done, ids...), later[1:]
	}
	return done, err
}

// appendOnce appends the group in one transaction, retried from the heads
// and positions its cancellations report and without the sessions they
// rule out. It returns the ids appended to, and the sessions whose events
// pick made larger on a retry (in a group of more than one), left for
// later.
func (s *Store) appendOnce(ctx context.Context, uri string, upTo int64, pick func(*notify.Session, notify.Position) [][]byte, group []*eachAppend) (done []string, later []*eachAppend, err error) {
	tok := newToken()
	group = slices.Clone(group)
	for race := 1; len(group) > 0; race++ {
		now := s.now()
		var (
			items []types.TransactWriteItem
			first = make([]int, len(group)) // index of each session's head item
		)
		for i, a := range group {
			first[i] = len(items)
			its := s.appendItems(a.pk, notify.SessionStream, a.data, a.old, tok, now, "", nil)
			items = append(items, its[:2]...)
			items = append(items, s.positionUpdate(a.pk, uri, a.pos.At, upTo, tok))
			items = append(items, its[2:]...)
		}
		ids := make([]string, len(group))
		for i, a := range group {
			ids[i] = a.sess.ID
		}
		// transactChange adds the change feed's item, last.
		var at attempts
		_, err := s.transactChange(ctx, items, &at, ids)
		if err == nil {
			return s.appendedGroup(group), later, nil
		}
		c, ok := asCancellation(err)
		if !ok {
			return nil, nil, err
		}
		var (
			keep  []*eachAppend
			moved bool
		)
		for i, a := range group {
			headFailed, head := c.failed(first[i])
			metaFailed, _ := c.failed(first[i] + 1)
			posFailed, marker := c.failed(first[i] + 2)
			switch {
			case headFailed && getS(head, attrTok) == tok, posFailed && getS(marker, attrTok) == tok && getN(marker, attrPos) == upTo:
				// This call's own earlier attempt, retried by the SDK,
				// wrote the whole transaction.
				return s.appendedGroup(group), later, nil
			case metaFailed, posFailed && (len(marker) == 0 || getN(marker, attrPos) >= upTo):
				// Gone, unsubscribed, or at upTo already.
			case posFailed:
				a.pos = positionOf(marker)
				if headFailed {
					a.old = getN(head, attrSeq)
				}
				items, bytes := len(a.data), a.bytes
				ok, err := a.pick(pick)
				switch {
				case err != nil:
					return nil, nil, err
				case !ok:
				case len(group) > 1 && (len(a.data) > items || a.bytes > bytes):
					later = append(later, a) // may not fit this transaction any more
				default:
					moved = true
					keep = append(keep, a)
				}
			case headFailed:
				a.old = getN(head, attrSeq)
				moved = true
				keep = append(keep, a)
			default:
				keep = append(keep, a)
			}
		}
		switch {
		case race >= maxRaces:
			return nil, nil, fmt.Errorf("%w: %w", errTooManyRaces, err)
		case len(keep) < len(group) || moved:
			if race > 10 {
				if err := backoff(ctx, 2); err != nil {
					return nil, nil, err
				}
			}
		case c.transient():
			if err := backoff(ctx, race); err != nil {
				return nil, nil, err
			}
		default:
			return nil, nil, err
		}
		group = keep
	}
	return nil, later, nil
}

// positionUpdate moves the position of session pk's subscription to uri
// from at to upTo, if it is subscribed and at at.
func (s *Store) positionUpdate(pk, uri string, at, upTo int64, tok string) types.TransactWriteItem {
	var e expr
	cond := "attribute_exists(" + e.n(attrPK) + ") AND "
	if at == 0 {
		cond += "(attribute_not_exists(" + e.n(attrPos) + ") OR " + e.n(attrPos) + " = " + e.v(avN(0)) + ")"
	} else {
		cond += e.n(attrPos) + " = " + e.v(avN(at))
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                           s.table,
		Key:                                 key(pk, markerSK(uri)),
		UpdateExpression:                    aws.String("SET " + e.n(attrPos) + " = " + e.v(avN(upTo)) + ", " + e.n(attrTok) + " = " + e.v(avS(tok))),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            e.namesOrNil(),
		ExpressionAttributeValues:           e.valuesOrNil(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// positionOf returns a subscription marker's position.
func positionOf(marker item) notify.Position {
	return notify.Position{At: getN(marker, attrPos), Since: fromNanos(getN(marker, attrSince))}
}

// appendedGroup records the new heads of a group written in one
// transaction and returns its ids.
func (s *Store) appendedGroup(group []*eachAppend) []string {
	ids := make([]string, len(group))
	for i, a := range group {
		ids[i] = a.sess.ID
		s.seqs.set(a.pk+"|"+getHeadSK, a.old+int64(len(a.data)))
	}
	return ids
}

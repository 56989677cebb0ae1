package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/pkg/notify"
)

// eachAppend is one session's part of an AppendEach: what to append, and
// the head it is believed to be at.
type eachAppend struct {
	id, pk string
	data   [][]byte
	old    int64
	bytes  int
}

// AppendEach implements notify.Store with one BatchGetItem of the
// sessions' items and SessionStream heads (the profiles pick sees, and the
// heads the events follow), then TransactWriteItems that each carry the
// appends of as many sessions as fit in 100 items and MaxAppendBytes:
// for each session, the items of one Append with an idempotency key
// (head, live check, key, events). Twenty sessions that each get two
// events fit one transaction, so 50 sessions cost one read and three
// transactions. A session whose head moved meanwhile costs its
// transaction one more try from the head the cancelled one returned; a
// session that is gone or already has the key is dropped from it.
func (s *Store) AppendEach(ctx context.Context, ids []string, idemKey string, pick func(*notify.Session) [][]byte) (appended []string, err error) {
	defer wrap(&err, "dynamostore: AppendEach(%d sessions, %q)", len(ids), idemKey)
	ids, err = notify.CheckAppendEach(ids, idemKey)
	if err != nil {
		return nil, err
	}
	keys := make([]item, 0, 2*len(ids))
	for _, id := range ids {
		keys = append(keys, key(sessPK(id), metaSK), key(sessPK(id), getHeadSK))
	}
	items, err := s.batchGet(ctx, keys, "", nil)
	if err != nil {
		return nil, err
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
		if !live(meta, now) {
			continue
		}
		data := pick(sessionOf(id, meta))
		if data == nil {
			continue
		}
		if err := notify.CheckAppend(id, notify.SessionStream, data, nil); err != nil {
			return nil, err
		}
		a := &eachAppend{id: id, pk: pk, data: data, old: getN(byKey[[2]string{pk, getHeadSK}], attrSeq)}
		for _, d := range data {
			a.bytes += len(d)
		}
		todo = append(todo, a)
	}

	var errs []error
	for len(todo) > 0 {
		n, size := 0, 0
		for n < len(todo) {
			items := 3 + len(todo[n].data)
			if n > 0 && (size+items > maxTransactItems || sumBytes(todo[:n+1]) > notify.MaxAppendBytes) {
				break
			}
			size += items
			n++
		}
		done, err := s.appendGroup(ctx, idemKey, todo[:n])
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

func sumBytes(group []*eachAppend) int {
	n := 0
	for _, a := range group {
		n += a.bytes
	}
	return n
}

// appendGroup appends the group in one transaction, retried from the heads
// and without the sessions its cancellations report. It returns the ids
// appended to.
func (s *Store) appendGroup(ctx context.Context, idemKey string, group []*eachAppend) ([]string, error) {
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
			items = append(items, s.appendItems(a.pk, notify.SessionStream, a.data, a.old, tok, now, idemKey, nil)...)
		}
		var at attempts
		_, err := s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, at.option)
		if err == nil {
			return s.appendedGroup(group), nil
		}
		c, ok := asCancellation(err)
		if !ok {
			return nil, err
		}
		var (
			keep  []*eachAppend
			moved bool
		)
		for i, a := range group {
			headFailed, head := c.failed(first[i])
			metaFailed, _ := c.failed(first[i] + 1)
			keyFailed, prior := c.failed(first[i] + 2)
			switch {
			case headFailed && getS(head, attrTok) == tok, keyFailed && getS(prior, attrTok) == tok:
				// This call's own earlier attempt, retried by the SDK,
				// wrote the whole transaction.
				return s.appendedGroup(group), nil
			case metaFailed, keyFailed:
				// Gone, or appended to with this key before.
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
			return nil, fmt.Errorf("%w: %w", errTooManyRaces, err)
		case len(keep) < len(group) || moved:
			if race > 10 {
				if err := backoff(ctx, 2); err != nil {
					return nil, err
				}
			}
		case c.transient():
			if err := backoff(ctx, race); err != nil {
				return nil, err
			}
		default:
			return nil, err
		}
		group = keep
	}
	return nil, nil
}

// appendedGroup records the new heads of a group written in one
// transaction and returns its ids.
func (s *Store) appendedGroup(group []*eachAppend) []string {
	ids := make([]string, len(group))
	for i, a := range group {
		ids[i] = a.id
		s.seqs.set(a.pk+"|"+getHeadSK, a.old+int64(len(a.data)))
	}
	return ids
}

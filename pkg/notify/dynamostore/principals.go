package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mcpush/mcpush/pkg/notify"
)

var _ notify.SessionCounter = (*Store)(nil)

// attrSessExp is the session expiry (Unix nanoseconds) an index entry of
// principalPK last saw. It is a hint, not the entry's own expiry (attrExp,
// which live() reads, and the TTL attribute are not set): a session's idle
// expiry moves with every touch, and the entry must not vanish before the
// session does.
const attrSessExp = "sx"

// principalPK is the partition of a principal's session index: one item
// per session (sk: the escaped session id), written in the transaction
// that creates the session and deleted with the session's other items.
func principalPK(principal string) string { return "P#" + part(principal) }

// principalQuery is the Query of principal's index entries, with the
// attributes attrs.
func (s *Store) principalQuery(principal string, attrs ...string) *dynamodb.QueryInput {
	var e expr
	proj := make([]string, len(attrs))
	for i, a := range attrs {
		proj[i] = e.n(a)
	}
	in := &dynamodb.QueryInput{
		TableName:              s.table,
		ConsistentRead:         consistent,
		KeyConditionExpression: aws.String(e.n(attrPK) + " = " + e.v(avS(principalPK(principal)))),
		ProjectionExpression:   aws.String(strings.Join(proj, ", ")),
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
	return in
}

// principalEntry is the index entry of session id, whose expiry is at
// least exp (Unix nanoseconds).
func principalEntry(principal, id string, exp int64) item {
	it := key(principalPK(principal), part(id))
	it[attrSID] = avS(id)
	it[attrSessExp] = avN(exp)
	return it
}

// principalPut is the transaction write that adds sess to the index of
// its principal.
func (s *Store) principalPut(sess *notify.Session) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{TableName: s.table,
		Item: principalEntry(sess.Principal, sess.ID, toNanos(sess.ExpiresAt))}}
}

// CountSessions implements notify.SessionCounter with one Query of the
// principal's index: an entry whose recorded session expiry is still
// ahead is a live session (DeleteSession removes its entry). Only entries
// whose recorded expiry has passed, and only while the count is under
// limit, cost one BatchGetItem (per 100) of their session items: a
// session whose expiry was extended counts, and its entry's expiry is
// brought up to date; the entry of an expired or vanished session is
// deleted, best effort. So the index of a principal holds about its live
// sessions, and a count is one read unless sessions outlived their first
// expiry or expired without DeleteSession since the last count.
func (s *Store) CountSessions(ctx context.Context, principal string, limit int) (n int, err error) {
	defer wrap(&err, "dynamostore: CountSessions(%.64q, %d)", principal, limit)
	ids, err := s.principalSessions(ctx, principal, limit)
	return len(ids), err
}

var _ notify.ProfileLister = (*Store)(nil)

// PrincipalProfiles implements notify.ProfileLister: one Query of the
// principal's index (every entry, whatever expiry it recorded), then the
// session items, one BatchGetItem per 100, until limit live ones that
// match are read (the match is applied to the listen state of the items
// read: every session of the principal costs its read). It writes no entry's recorded expiry (CountSessions does): a
// session that outlived it costs no write here, only its read. The
// entries of sessions found expired or gone are deleted, best effort.
func (s *Store) PrincipalProfiles(ctx context.Context, principal string, match notify.ListenMatch, limit int) (out []*notify.Session, err error) {
	defer wrap(&err, "dynamostore: PrincipalProfiles(%.64q, %+.64v, %d)", principal, match, limit)
	if err := notify.CheckProfiles(principal, match, limit); err != nil {
		return nil, err
	}
	pk := principalPK(principal)
	in := s.principalQuery(principal, attrSID)
	ids, err := s.queryIDs(ctx, in)
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	now := toNanos(s.now())
	var gone []types.WriteRequest
	for chunk := range slices.Chunk(ids, 100) {
		if len(out) >= limit {
			break
		}
		found, err := s.sessionMetas(ctx, chunk, "", nil)
		if err != nil {
			return nil, err
		}
		for _, id := range chunk {
			if m := found[id]; live(m, now) && getS(m, attrPrincipal) == principal {
				if p := sessionOf(id, m); match.Matches(p.Listen) {
					out = append(out, p)
				}
			} else {
				// Expired sessions never come back, and ids are not
				// reused: the entry can go.
				gone = append(gone, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: key(pk, part(id))}})
			}
		}
	}
	_ = s.batchWrite(ctx, gone) // best effort, as in principalSessions
	return out[:min(len(out), limit)], nil
}

// principalSessions returns up to limit live sessions of principal, as
// CountSessions describes.
func (s *Store) principalSessions(ctx context.Context, principal string, limit int) (ids []string, err error) {
	if err := notify.CheckCountSessions(principal, limit); err != nil {
		return nil, err
	}
	pk := principalPK(principal)
	now := toNanos(s.now())
	in := s.principalQuery(principal, attrSID, attrSessExp)
	var stale []string // entries whose recorded expiry has passed
	for {
		res, err := s.api.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range res.Items {
			if getN(it, attrSessExp) > now {
				ids = append(ids, getS(it, attrSID))
			} else {
				stale = append(stale, getS(it, attrSID))
			}
		}
		if len(ids) >= limit {
			return ids[:limit], nil
		}
		if len(res.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	var writes []types.WriteRequest
	for chunk := range slices.Chunk(stale, 100) {
		if len(ids) >= limit {
			break
		}
		var p expr
		found, err := s.sessionMetas(ctx, chunk, p.n(attrPK)+", "+p.n(attrExp)+", "+p.n(attrPrincipal), p.namesOrNil())
		if err != nil {
			return nil, err
		}
		for _, id := range chunk {
			m := found[id]
			if live(m, now) && getS(m, attrPrincipal) == principal {
				ids = append(ids, id)
				writes = append(writes, types.WriteRequest{PutRequest: &types.PutRequest{Item: principalEntry(principal, id, getN(m, attrExp))}})
			} else {
				// Expired sessions never come back, and ids are not
				// reused: the entry can go.
				writes = append(writes, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: key(pk, part(id))}})
			}
		}
	}
	// Best effort: a failure leaves entries that the next count reads
	// again. A refreshed entry whose session is deleted meanwhile is
	// deleted by a later count.
	_ = s.batchWrite(ctx, writes)
	return ids[:min(len(ids), limit)], nil
}

// batchWrite runs write requests, 25 per BatchWriteItem, retrying
// unprocessed ones.
func (s *Store) batchWrite(ctx context.Context, reqs []types.WriteRequest) error {
	for chunk := range slices.Chunk(reqs, 25) {
		for n := 0; len(chunk) > 0; n++ {
			if n > 0 {
				if err := backoff(ctx, n); err != nil {
					return err
				}
				if n > maxRaces {
					return errors.New("BatchWriteItem: items left unprocessed")
				}
			}
			res, err := s.api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
				RequestItems: map[string][]types.WriteRequest{*s.table: chunk},
			})
			if err != nil {
				return err
			}
			chunk = res.UnprocessedItems[*s.table]
		}
	}
	return nil
}

var _ notify.SessionReclaimer = (*Store)(nil)

// IdleSessions implements notify.SessionReclaimer: one Query of the
// principal's index, then, least recently extended first (by the expiry
// its entry recorded) and for at most notify.MaxIdleSessionScan sessions,
// one Query of two items of the session's partition: a session holds
// nothing when its partition has its session item alone (subscriptions,
// stream heads and events, idempotency keys and mailbox messages are all
// items of it).
func (s *Store) IdleSessions(ctx context.Context, principal string, expiresBy time.Time, limit int) (ids []string, err error) {
	defer wrap(&err, "dynamostore: IdleSessions(%.64q, %d)", principal, limit)
	if err := notify.CheckCountSessions(principal, limit); err != nil {
		return nil, err
	}
	now, by := toNanos(s.now()), toNanos(expiresBy)
	in := s.principalQuery(principal, attrSID, attrSessExp)
	type entry struct {
		id  string
		exp int64
	}
	items, err := s.queryItems(ctx, in)
	if err != nil {
		return nil, err
	}
	entries := make([]entry, len(items))
	for i, it := range items {
		entries[i] = entry{getS(it, attrSID), getN(it, attrSessExp)}
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.exp, b.exp) })
	scanned := 0
	for _, en := range entries {
		if len(ids) >= limit || scanned >= notify.MaxIdleSessionScan {
			break
		}
		if en.exp <= now || en.exp > by {
			// Expired or extended (CountSessions brings the entry up to
			// date), or extended past expiresBy.
			continue
		}
		scanned++
		var p expr
		q := &dynamodb.QueryInput{
			TableName:              s.table,
			ConsistentRead:         consistent,
			KeyConditionExpression: aws.String(p.n(attrPK) + " = " + p.v(avS(sessPK(en.id)))),
			ProjectionExpression:   aws.String(p.n(attrSK) + ", " + p.n(attrExp) + ", " + p.n(attrPrincipal)),
			Limit:                  aws.Int32(2),
		}
		q.ExpressionAttributeNames, q.ExpressionAttributeValues = p.namesOrNil(), p.valuesOrNil()
		res, err := s.api.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		if it := res.Items; len(it) == 1 && getS(it[0], attrSK) == metaSK && live(it[0], now) &&
			getN(it[0], attrExp) <= by && getS(it[0], attrPrincipal) == principal {
			ids = append(ids, en.id)
		}
	}
	return ids, nil
}

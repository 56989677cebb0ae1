package dynamostore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/pkg/notify"
)

// Topic item attributes.
const (
	attrName       = "name"
	attrUpdatedAt  = "upd"
	attrMessageID  = "mid"
	attrReceivedAt = "rcv"
)

// AppendTopicEvent implements notify.Store with one TransactWriteItems in
// the common case: the update of the topic head, the event, and the
// message id (a conditional put, which makes a repeated message id cancel
// the transaction). A repeated message id costs one more GetItem, for the
// original event. A message id whose event has expired may be used again.
// Topic.UpdatedAt is the store's clock at the latest append.
func (s *Store) AppendTopicEvent(ctx context.Context, topic, messageID string, receivedAt time.Time, data json.RawMessage) (ev notify.TopicEvent, created bool, err error) {
	defer wrap(&err, "dynamostore: AppendTopicEvent(%q, %q)", topic, messageID)
	if err := notify.CheckTopicEvent(topic, messageID, data); err != nil {
		return ev, false, err
	}
	headKey := key(topicsPK, part(topic))
	cacheKey := topicsPK + "|" + part(topic)
	pk := topicPK(topic)
	tok := newToken()
	unlock, err := s.writers.lock(ctx, cacheKey)
	if err != nil {
		return ev, false, err
	}
	defer unlock()
	old := s.seqs.get(cacheKey)
	for race := 1; ; race++ {
		now := s.now()
		nowN := toNanos(now)
		seq := old + 1
		expires := now.Add(s.topicTTL)

		var h expr
		headCond := h.counterIs(attrSeq, old)
		headSet := strings.Join([]string{
			h.n(attrName) + " = " + h.v(avS(topic)),
			h.n(attrSeq) + " = " + h.v(avN(seq)),
			h.n(attrUpdatedAt) + " = " + h.v(avN(nowN)),
			h.n(attrTok) + " = " + h.v(avS(tok)),
		}, ", ")

		event := setExpiry(key(pk, pad(seq)), expires)
		event[attrSeq] = avN(seq)
		event[attrMessageID] = avS(messageID)
		event[attrReceivedAt] = avN(toNanos(receivedAt))
		if data != nil {
			event[attrData] = avB(data)
		}

		msg := setExpiry(key(pk, topicMsgSK(messageID)), expires)
		msg[attrSeq] = avN(seq)
		msg[attrReceivedAt] = avN(toNanos(receivedAt))
		msg[attrTok] = avS(tok)
		var m expr

		items := []types.TransactWriteItem{
			{Update: &types.Update{
				TableName:                           s.table,
				Key:                                 headKey,
				UpdateExpression:                    aws.String("SET " + headSet),
				ConditionExpression:                 aws.String(headCond),
				ExpressionAttributeNames:            h.namesOrNil(),
				ExpressionAttributeValues:           h.valuesOrNil(),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}},
			{Put: &types.Put{
				TableName:                           s.table,
				Item:                                msg,
				ConditionExpression:                 aws.String(m.absent(nowN)),
				ExpressionAttributeNames:            m.namesOrNil(),
				ExpressionAttributeValues:           m.valuesOrNil(),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}},
			{Put: &types.Put{TableName: s.table, Item: event}},
		}
		ev = notify.TopicEvent{Topic: topic, Seq: seq, MessageID: messageID, ReceivedAt: fromNanos(toNanos(receivedAt)), Data: data}

		var at attempts
		_, err := s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, at.option)
		if err == nil {
			s.seqs.set(cacheKey, seq)
			return ev, true, nil
		}
		c, ok := asCancellation(err)
		if !ok {
			return notify.TopicEvent{}, false, err
		}
		if failed, old := c.failed(1); failed {
			ev.Seq = getN(old, attrSeq)
			if getS(old, attrTok) == tok {
				// This call's own earlier attempt, retried by the SDK.
				s.seqs.set(cacheKey, max(s.seqs.get(cacheKey), ev.Seq))
				return ev, true, nil
			}
			orig, err := s.topicEvent(ctx, topic, ev.Seq, nowN)
			if err != nil {
				return notify.TopicEvent{}, false, fmt.Errorf("reading the original event: %w", err)
			}
			if orig == nil {
				// Expired meanwhile: report what the message id recorded.
				orig = &notify.TopicEvent{Topic: topic, Seq: ev.Seq, MessageID: messageID, ReceivedAt: fromNanos(getN(old, attrReceivedAt))}
			}
			return *orig, false, nil
		}
		headFailed, head := c.failed(0)
		switch {
		case race >= maxRaces:
			return notify.TopicEvent{}, false, fmt.Errorf("%w: %w", errTooManyRaces, err)
		case headFailed:
			old = getN(head, attrSeq)
			s.seqs.set(cacheKey, old)
			if race > 10 {
				if err := backoff(ctx, 2); err != nil {
					return notify.TopicEvent{}, false, err
				}
			}
		case c.transient():
			if err := backoff(ctx, race); err != nil {
				return notify.TopicEvent{}, false, err
			}
		default:
			return notify.TopicEvent{}, false, err
		}
	}
}

// topicEvent reads one live topic event, nil if there is none.
func (s *Store) topicEvent(ctx context.Context, topic string, seq, now int64) (*notify.TopicEvent, error) {
	res, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      s.table,
		Key:            key(topicPK(topic), pad(seq)),
		ConsistentRead: consistent,
	})
	if err != nil {
		return nil, err
	}
	if !live(res.Item, now) {
		return nil, nil
	}
	ev := topicEventOf(topic, res.Item)
	return &ev, nil
}

func topicEventOf(topic string, it item) notify.TopicEvent {
	return notify.TopicEvent{
		Topic:      topic,
		Seq:        getN(it, attrSeq),
		MessageID:  getS(it, attrMessageID),
		ReceivedAt: fromNanos(getN(it, attrReceivedAt)),
		Data:       getB(it, attrData),
	}
}

// ReadTopicEvents implements notify.Store with one Query (more only when
// expired events fill its pages). A limit below 1 is refused with
// notify.ErrInvalid.
func (s *Store) ReadTopicEvents(ctx context.Context, topic string, after int64, limit int) (_ []notify.TopicEvent, err error) {
	defer wrap(&err, "dynamostore: ReadTopicEvents(%q, %d, %d)", topic, after, limit)
	if err := notify.CheckTopicRead(topic, limit); err != nil {
		return nil, err
	}
	after = max(after, 0)
	if after == math.MaxInt64 {
		return nil, nil
	}
	var e expr
	in := &dynamodb.QueryInput{
		TableName:      s.table,
		ConsistentRead: consistent,
		KeyConditionExpression: aws.String(e.n(attrPK) + " = " + e.v(avS(topicPK(topic))) + " AND " + e.n(attrSK) + " BETWEEN " +
			e.v(avS(pad(after+1))) + " AND " + e.v(avS(pad(math.MaxInt64)))),
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
	now := toNanos(s.now())
	var events []notify.TopicEvent
	for len(events) < limit {
		in.Limit = aws.Int32(int32(min(limit-len(events), 1000)))
		res, err := s.api.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range res.Items {
			if live(it, now) {
				events = append(events, topicEventOf(topic, it))
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	return events, nil
}

// Topics implements notify.Store with one Query of the topic heads.
func (s *Store) Topics(ctx context.Context) (_ []notify.Topic, err error) {
	defer wrap(&err, "dynamostore: Topics")
	var e expr
	in := &dynamodb.QueryInput{
		TableName:              s.table,
		ConsistentRead:         consistent,
		KeyConditionExpression: aws.String(e.n(attrPK) + " = " + e.v(avS(topicsPK))),
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
	var topics []notify.Topic
	for {
		res, err := s.api.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range res.Items {
			topics = append(topics, notify.Topic{
				Name:      getS(it, attrName),
				LastSeq:   getN(it, attrSeq),
				UpdatedAt: fromNanos(getN(it, attrUpdatedAt)),
			})
		}
		if len(res.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	slices.SortFunc(topics, func(a, b notify.Topic) int { return strings.Compare(a.Name, b.Name) })
	return topics, nil
}

// TopicHead implements notify.TopicHeads with one GetItem of the topic's
// head.
func (s *Store) TopicHead(ctx context.Context, topic string) (_ int64, err error) {
	defer wrap(&err, "dynamostore: TopicHead(%q)", topic)
	if err := notify.CheckTopicRead(topic, 1); err != nil {
		return 0, err
	}
	res, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      s.table,
		Key:            key(topicsPK, part(topic)),
		ConsistentRead: consistent,
	})
	if err != nil {
		return 0, err
	}
	return getN(res.Item, attrSeq), nil
}

var _ notify.TopicHeads = (*Store)(nil)

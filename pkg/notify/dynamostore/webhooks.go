package dynamostore

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Webhook subscriptions (notify.WebhookSubscription). A topic's
// subscriptions are the items of one partition, webhookPK(topic) (sk: the
// escaped id), so the ingest finds them all with one Query per 1 MB page;
// a principal's are indexed in webhookPrincipalPK(principal), one small
// item each with the subscription's expiry, which CreateWebhook counts
// with one Query (Select COUNT). Both items carry the TTL attribute of a
// subscription that expires, so DynamoDB deletes them after it lapses.

// Attributes of a subscription item: its version and its id (the sort
// key is the escaped id).
const (
	attrWebhookVer   = "wv"
	attrWebhookID    = "wi"
	attrWebhookTopic = "wt" // of an index entry
)

func webhookPK(topic string) string              { return "W#" + part(topic) }
func webhookPrincipalPK(principal string) string { return "WP#" + part(principal) }
func webhookIndexSK(topic, id string) string     { return part(topic) + "#" + part(id) }

func webhookItem(w *notify.WebhookSubscription, body []byte, version int64) item {
	it := key(webhookPK(w.Topic), part(w.ID))
	it[attrData] = avB(body)
	it[attrWebhookVer] = avN(version)
	it[attrWebhookID] = avS(w.ID)
	if !w.ExpiresAt.IsZero() {
		setExpiry(it, w.ExpiresAt)
	}
	return it
}

// webhookIndexBucket is the granularity of an index entry's expiry: the
// entry of a subscription that expires at t expires at the end of the
// 6-hour bucket after t's (indexExpiry), so a subscription refreshed
// every hour rewrites its entry once every 6 hours, not at every
// refresh. The entry of a lapsed subscription therefore lives on for up
// to 12 hours: CreateWebhook counts entries, and only when they reach the
// bound reads the subscriptions themselves (countLiveWebhooks).
const webhookIndexBucket = 6 * time.Hour

// indexExpiry is the expiry of the index entry of a subscription that
// expires at t (zero: none).
func indexExpiry(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Truncate(webhookIndexBucket).Add(2 * webhookIndexBucket)
}

func webhookIndexItem(w *notify.WebhookSubscription) item {
	it := key(webhookPrincipalPK(w.Principal), webhookIndexSK(w.Topic, w.ID))
	it[attrWebhookID] = avS(w.ID)
	it[attrWebhookTopic] = avS(w.Topic)
	if exp := indexExpiry(w.ExpiresAt); !exp.IsZero() {
		setExpiry(it, exp)
	}
	return it
}

// CreateWebhook stores a new webhook subscription with Version 1:
// ErrExists when (topic, id) holds a live one, notify.ErrLimit when its
// principal already has max live ones. One Query (Select COUNT) of the
// principal's index, then one TransactWriteItems of the subscription
// (conditional on its absence) and its index item. The count is read
// before the write: principals racing their own creates may pass max by
// the number of creates in flight.
func (s *Store) CreateWebhook(ctx context.Context, w *notify.WebhookSubscription, max int) (err error) {
	defer wrap(&err, "dynamostore: CreateWebhook(%.64q)", w.ID)
	body, err := notify.CheckWebhook(w)
	if err != nil {
		return err
	}
	now := toNanos(s.now())
	n, err := s.countWebhooks(ctx, w.Principal, now, max)
	if err != nil {
		return err
	}
	if n >= max {
		// Entries outlive lapsed subscriptions by up to 12 h: count
		// the live subscriptions themselves.
		if n, err = s.countLiveWebhooks(ctx, w.Principal, now, max); err != nil {
			return err
		}
		if n >= max {
			return notify.ErrLimit
		}
	}
	var e expr
	cond := e.absent(now)
	_, err = s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: s.table, Item: webhookItem(w, body, 1), ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: e.namesOrNil(), ExpressionAttributeValues: e.valuesOrNil()}},
		{Put: &types.Put{TableName: s.table, Item: webhookIndexItem(w)}},
	}})
	if c, ok := asCancellation(err); ok {
		if failed, _ := c.failed(0); failed {
			return notify.ErrExists
		}
	}
	if err != nil {
		return err
	}
	w.Version = 1
	return nil
}

// CountWebhooks returns the number of principal's live webhook
// subscriptions, at most limit (the bound CreateWebhook enforces, read
// without a write): one Query of the principal's index partition (with
// Select COUNT), and, when that reaches limit, the subscriptions
// themselves, as CreateWebhook counts.
func (s *Store) CountWebhooks(ctx context.Context, principal string, limit int) (_ int, err error) {
	defer wrap(&err, "dynamostore: CountWebhooks")
	if principal == "" || limit < 1 {
		return 0, notify.ErrInvalid
	}
	now := toNanos(s.now())
	n, err := s.countWebhooks(ctx, principal, now, limit)
	if err != nil || n < limit {
		return n, err
	}
	return s.countLiveWebhooks(ctx, principal, now, limit)
}

// countWebhooks counts principal's live index items, no further than
// limit.
func (s *Store) countWebhooks(ctx context.Context, principal string, now int64, limit int) (int, error) {
	var e expr
	in := &dynamodb.QueryInput{
		TableName:              s.table,
		ConsistentRead:         consistent,
		KeyConditionExpression: aws.String(e.n(attrPK) + " = " + e.v(avS(webhookPrincipalPK(principal)))),
		FilterExpression:       aws.String("attribute_not_exists(" + e.n(attrExp) + ") OR " + e.n(attrExp) + " > " + e.v(avN(now))),
		Select:                 types.SelectCount,
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
	n := 0
	for {
		res, err := s.api.Query(ctx, in)
		if err != nil {
			return 0, err
		}
		n += int(res.Count)
		if n >= limit || len(res.LastEvaluatedKey) == 0 {
			return min(n, limit), nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// GetWebhook returns the live webhook subscription (topic, id) with one
// strongly consistent GetItem: ErrNotFound when there is none or it
// expired.
func (s *Store) GetWebhook(ctx context.Context, topic, id string) (_ *notify.WebhookSubscription, err error) {
	defer wrap(&err, "dynamostore: GetWebhook(%.64q)", id)
	if topic == "" || id == "" {
		return nil, notify.ErrInvalid
	}
	res, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: key(webhookPK(topic), part(id)), ConsistentRead: consistent})
	if err != nil {
		return nil, err
	}
	if !live(res.Item, toNanos(s.now())) {
		return nil, notify.ErrNotFound
	}
	return notify.DecodeWebhook(topic, id, getN(res.Item, attrWebhookVer), getB(res.Item, attrData))
}

// UpdateWebhook writes w if the stored Version still equals w.Version,
// and then increments w.Version: ErrConflict when it changed, ErrNotFound
// when the subscription is gone or expired. One PutItem conditional on
// the version; when the expiry moved to another 6-hour bucket (a refresh,
// about once every 6 hours), one more PutItem of the principal's index
// entry, so that it lapses after the subscription.
func (s *Store) UpdateWebhook(ctx context.Context, w *notify.WebhookSubscription) (err error) {
	defer wrap(&err, "dynamostore: UpdateWebhook(%.64q)", w.ID)
	body, err := notify.CheckWebhook(w)
	if err != nil {
		return err
	}
	now := toNanos(s.now())
	var e expr
	cond := "attribute_exists(" + e.n(attrPK) + ") AND (attribute_not_exists(" + e.n(attrExp) + ") OR " + e.n(attrExp) + " > " + e.v(avN(now)) + ") AND " +
		e.n(attrWebhookVer) + " = " + e.v(avN(w.Version))
	res, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           s.table,
		Item:                                webhookItem(w, body, w.Version+1),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            e.namesOrNil(),
		ExpressionAttributeValues:           e.valuesOrNil(),
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if failed, old := conditionFailed(err); failed {
		if live(old, now) {
			return notify.ErrConflict
		}
		return notify.ErrNotFound
	}
	if err != nil {
		return err
	}
	w.Version++
	var oldExp int64
	if _, ok := res.Attributes[attrExp]; ok {
		oldExp = getN(res.Attributes, attrExp)
	}
	if toNanos(indexExpiry(fromNanos(oldExp))) != toNanos(indexExpiry(w.ExpiresAt)) {
		_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: webhookIndexItem(w)})
	}
	return err
}

// DeleteWebhook deletes the live webhook subscription (w.Topic, w.ID)
// and its index item (of w.Principal) with one TransactWriteItems:
// ErrNotFound when there is none.
func (s *Store) DeleteWebhook(ctx context.Context, w *notify.WebhookSubscription) (err error) {
	defer wrap(&err, "dynamostore: DeleteWebhook(%.64q)", w.ID)
	if w.Topic == "" || w.ID == "" || w.Principal == "" {
		return notify.ErrInvalid
	}
	var e expr
	cond := "attribute_exists(" + e.n(attrPK) + ") AND (attribute_not_exists(" + e.n(attrExp) + ") OR " + e.n(attrExp) + " > " + e.v(avN(toNanos(s.now()))) + ")"
	_, err = s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: s.table, Key: key(webhookPK(w.Topic), part(w.ID)), ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: e.namesOrNil(), ExpressionAttributeValues: e.valuesOrNil()}},
		{Delete: &types.Delete{TableName: s.table, Key: key(webhookPrincipalPK(w.Principal), webhookIndexSK(w.Topic, w.ID))}},
	}})
	if c, ok := asCancellation(err); ok {
		if failed, _ := c.failed(0); failed {
			return notify.ErrNotFound
		}
	}
	return err
}

// TopicWebhooks returns up to limit live webhook subscriptions of topic
// after the page token after ("" from the first), in key order, and the
// token of the next page ("" after the last): one strongly consistent
// Query of the topic's partition (Limit limit; expired items are
// filtered out, so a page may hold fewer than limit while more follow).
func (s *Store) TopicWebhooks(ctx context.Context, topic, after string, limit int) (_ []*notify.WebhookSubscription, next string, err error) {
	defer wrap(&err, "dynamostore: TopicWebhooks(%.64q)", topic)
	if err := notify.CheckWebhookPage(topic, limit); err != nil {
		return nil, "", err
	}
	var e expr
	in := &dynamodb.QueryInput{
		TableName:              s.table,
		ConsistentRead:         consistent,
		KeyConditionExpression: aws.String(e.n(attrPK) + " = " + e.v(avS(webhookPK(topic)))),
		Limit:                  aws.Int32(int32(limit)),
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
	if after != "" {
		in.ExclusiveStartKey = key(webhookPK(topic), after)
	}
	res, err := s.api.Query(ctx, in)
	if err != nil {
		return nil, "", err
	}
	now := toNanos(s.now())
	out := make([]*notify.WebhookSubscription, 0, len(res.Items))
	for _, it := range res.Items {
		if !live(it, now) {
			continue
		}
		w, err := notify.DecodeWebhook(topic, getS(it, attrWebhookID), getN(it, attrWebhookVer), getB(it, attrData))
		if err != nil {
			return nil, "", err
		}
		out = append(out, w)
	}
	if len(res.LastEvaluatedKey) > 0 {
		next = getS(res.LastEvaluatedKey, attrSK)
	}
	return out, next, nil
}

// countLiveWebhooks counts principal's live subscriptions, no further
// than limit: one Query of the index, one BatchGetItem per 100 entries
// of the subscription items (their expiry is the truth); the entries of
// subscriptions gone are deleted, best effort.
func (s *Store) countLiveWebhooks(ctx context.Context, principal string, now int64, limit int) (int, error) {
	var e expr
	in := &dynamodb.QueryInput{
		TableName:              s.table,
		ConsistentRead:         consistent,
		KeyConditionExpression: aws.String(e.n(attrPK) + " = " + e.v(avS(webhookPrincipalPK(principal)))),
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
	entries, err := s.queryItems(ctx, in)
	if err != nil {
		return 0, err
	}
	n := 0
	var stale []item
	for start := 0; start < len(entries); start += 100 {
		var batch []item
		for _, en := range entries[start:min(start+100, len(entries))] {
			if getS(en, attrWebhookID) == "" || getS(en, attrWebhookTopic) == "" {
				n++ // an entry written before entries named their subscription: counted
				continue
			}
			batch = append(batch, en)
		}
		if len(batch) == 0 {
			continue
		}
		keys := make([]item, len(batch))
		for i, en := range batch {
			keys[i] = key(webhookPK(getS(en, attrWebhookTopic)), part(getS(en, attrWebhookID)))
		}
		subs, err := s.batchGet(ctx, keys, "", nil)
		if err != nil {
			return 0, err
		}
		alive := map[string]bool{}
		for _, it := range subs {
			if live(it, now) {
				alive[getS(it, attrPK)+"\x00"+getS(it, attrSK)] = true
			}
		}
		for i, en := range batch {
			if alive[getS(keys[i], attrPK)+"\x00"+getS(keys[i], attrSK)] {
				n++
			} else {
				stale = append(stale, key(getS(en, attrPK), getS(en, attrSK)))
			}
		}
	}
	if len(stale) > 0 {
		s.batchDelete(ctx, stale) // best effort: a later count retries
	}
	return min(n, limit), nil
}

// webhookVerifiedPK is the partition of a verified callback's item.
func webhookVerifiedPK(key string) string { return "WV#" + part(key) }

// PutWebhookVerified records that the callback of key (opaque to the
// store) passed verification, until until (a later call replaces it):
// one PutItem, which DynamoDB's TTL removes after until.
func (s *Store) PutWebhookVerified(ctx context.Context, k string, until time.Time) (err error) {
	defer wrap(&err, "dynamostore: PutWebhookVerified")
	if err := notify.CheckVerifiedKey(k); err != nil {
		return err
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: setExpiry(key(webhookVerifiedPK(k), "v"), until)})
	return err
}

// WebhookVerified reports whether key's verification is recorded and
// has not expired: one strongly consistent GetItem.
func (s *Store) WebhookVerified(ctx context.Context, k string) (_ bool, err error) {
	defer wrap(&err, "dynamostore: WebhookVerified")
	if err := notify.CheckVerifiedKey(k); err != nil {
		return false, err
	}
	res, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: key(webhookVerifiedPK(k), "v"), ConsistentRead: consistent})
	if err != nil {
		return false, err
	}
	return live(res.Item, toNanos(s.now())), nil
}

package dynamostore

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mcpush/mcpush/pkg/notify"
)

var _ notify.TaskStore = (*Store)(nil)

// Attributes of a task item.
const (
	attrTaskVer = "tv"
	// attrTaskLive is Task.LiveUntil in Unix nanoseconds, 0 once the
	// status is terminal (items written before it held 1 while not
	// terminal: those no longer count).
	attrTaskLive = "tl"
	// attrTaskBytes is the size of the record (attrData), for CountTasks.
	attrTaskBytes = "tb"
)

// taskPK is the partition of a principal's tasks, one item per task (sk:
// the escaped task id): a task is found only under its principal, and
// CountTasks is one Query of the partition.
func taskPK(principal string) string { return "J#" + part(principal) }

func taskItem(t *notify.Task, body []byte, version int64) item {
	it := key(taskPK(t.Principal), part(t.ID))
	it[attrData] = avB(body)
	it[attrTaskVer] = avN(version)
	live := int64(0)
	if !notify.TaskTerminal(t.Status) {
		live = toNanos(t.LiveUntil())
	}
	it[attrTaskLive] = avN(live)
	it[attrTaskBytes] = avN(int64(len(body)))
	return setExpiry(it, t.ExpiresAt)
}

// CreateTask implements notify.TaskStore with one conditional PutItem.
func (s *Store) CreateTask(ctx context.Context, t *notify.Task) (err error) {
	defer wrap(&err, "dynamostore: CreateTask(%.64q)", t.ID)
	body, err := notify.CheckTask(t)
	if err != nil {
		return err
	}
	var e expr
	cond := e.absent(toNanos(s.now()))
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 s.table,
		Item:                      taskItem(t, body, 1),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  e.namesOrNil(),
		ExpressionAttributeValues: e.valuesOrNil(),
	})
	if failed, _ := conditionFailed(err); failed {
		return notify.ErrExists
	}
	if err != nil {
		return err
	}
	t.Version = 1
	return nil
}

// GetTask implements notify.TaskStore with one strongly consistent
// GetItem.
func (s *Store) GetTask(ctx context.Context, principal, id string) (_ *notify.Task, err error) {
	defer wrap(&err, "dynamostore: GetTask(%.64q)", id)
	if id == "" {
		return nil, notify.ErrInvalid
	}
	res, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      s.table,
		Key:            key(taskPK(principal), part(id)),
		ConsistentRead: consistent,
	})
	if err != nil {
		return nil, err
	}
	if !live(res.Item, toNanos(s.now())) {
		return nil, notify.ErrNotFound
	}
	return notify.DecodeTask(principal, id, getN(res.Item, attrTaskVer), getB(res.Item, attrData))
}

// UpdateTask implements notify.TaskStore with one PutItem conditional on
// the version.
func (s *Store) UpdateTask(ctx context.Context, t *notify.Task) (err error) {
	defer wrap(&err, "dynamostore: UpdateTask(%.64q)", t.ID)
	body, err := notify.CheckTask(t)
	if err != nil {
		return err
	}
	var e expr
	cond := e.live(toNanos(s.now())) + " AND " + e.n(attrTaskVer) + " = " + e.v(avN(t.Version))
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           s.table,
		Item:                                taskItem(t, body, t.Version+1),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            e.namesOrNil(),
		ExpressionAttributeValues:           e.valuesOrNil(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if failed, old := conditionFailed(err); failed {
		if live(old, toNanos(s.now())) {
			return notify.ErrConflict
		}
		return notify.ErrNotFound
	}
	if err != nil {
		return err
	}
	t.Version++
	return nil
}

// CountTasks implements notify.TaskStore with one Query of the
// principal's task partition (more pages only past 1 MB of tasks, which
// the bound on a principal's stored task bytes keeps few), reading each
// unexpired item's LiveUntil (live when after now) and record size.
func (s *Store) CountTasks(ctx context.Context, principal string, limit int) (c notify.TaskCount, err error) {
	defer wrap(&err, "dynamostore: CountTasks(%.64q, %d)", principal, limit)
	if err := notify.CheckCountTasks(principal, limit); err != nil {
		return c, err
	}
	var e expr
	now := toNanos(s.now())
	in := &dynamodb.QueryInput{
		TableName:              s.table,
		ConsistentRead:         consistent,
		KeyConditionExpression: aws.String(e.n(attrPK) + " = " + e.v(avS(taskPK(principal)))),
		FilterExpression:       aws.String(e.n(attrExp) + " > " + e.v(avN(now))),
		ProjectionExpression:   aws.String(e.n(attrTaskLive) + ", " + e.n(attrTaskBytes)),
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
	for {
		res, err := s.api.Query(ctx, in)
		if err != nil {
			return notify.TaskCount{}, err
		}
		for _, it := range res.Items {
			if getN(it, attrTaskLive) > now {
				c.Live++
			}
			c.Bytes += getN(it, attrTaskBytes)
		}
		if len(res.LastEvaluatedKey) == 0 {
			c.Live = min(c.Live, limit)
			return c, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

package dynamostore

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/mcpush/mcpush/pkg/notify"
)

var _ notify.SharedKeys = (*Store)(nil)

// sharedKeysPK is the partition of SharedKey's items.
const sharedKeysPK = "K"

// SharedKey implements notify.SharedKeys with one GetItem when name is
// stored, else one conditional PutItem (attribute_not_exists), and one
// more GetItem when another process won the put.
func (s *Store) SharedKey(ctx context.Context, name string, value []byte) (_ []byte, err error) {
	defer wrap(&err, "dynamostore: SharedKey(%q)", name)
	if err := notify.CheckSharedKey(name, value); err != nil {
		return nil, err
	}
	k := key(sharedKeysPK, part(name))
	get := func() ([]byte, error) {
		res, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: k, ConsistentRead: consistent})
		if err != nil {
			return nil, err
		}
		return getB(res.Item, attrData), nil
	}
	if v, err := get(); err != nil || v != nil {
		return v, err
	}
	it := key(sharedKeysPK, part(name))
	it[attrData] = avB(value)
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           s.table,
		Item:                it,
		ConditionExpression: aws.String("attribute_not_exists(" + attrPK + ")"),
	})
	if failed, _ := conditionFailed(err); failed {
		return get()
	}
	if err != nil {
		return nil, err
	}
	return value, nil
}

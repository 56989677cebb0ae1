package dynamostore

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mcpush/mcpush/pkg/notify"
)

var _ notify.RateCounter = (*Store)(nil)

func ratePK(key string) string { return "Q#" + part(key) }

// CountInWindow implements notify.RateCounter with one UpdateItem (ADD)
// on the item of (key, window), which DynamoDB's TTL removes after
// expires.
func (s *Store) CountInWindow(ctx context.Context, name string, window, delta int64, expires time.Time) (n int64, err error) {
	defer wrap(&err, "dynamostore: CountInWindow(%.64q, %d)", name, window)
	if err := notify.CheckRateKey(name, delta); err != nil {
		return 0, err
	}
	var e expr
	exp, ttl := expiry(expires)
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table,
		Key:       key(ratePK(name), pad(window)),
		UpdateExpression: aws.String("ADD " + e.n(attrSeq) + " " + e.v(avN(delta)) +
			" SET " + e.n(attrExp) + " = " + e.v(exp) + ", " + e.n(attrExpiresAt) + " = " + e.v(ttl)),
		ExpressionAttributeNames:  e.namesOrNil(),
		ExpressionAttributeValues: e.valuesOrNil(),
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, err
	}
	return getN(out.Attributes, attrSeq), nil
}

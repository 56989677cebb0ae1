package dynamostore_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// strictAPI refuses requests that DynamoDB refuses but moto accepts: an
// ExpressionAttributeNames or ExpressionAttributeValues entry that no
// expression of the request uses (moto checks only names), or an empty
// placeholder map.
type strictAPI struct{ dynamostore.API }

var placeholder = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// checkPlaceholders checks one request's (or one transaction item's)
// placeholders against its expressions.
func checkPlaceholders(names map[string]string, values map[string]types.AttributeValue, exprs ...*string) error {
	if names != nil && len(names) == 0 || values != nil && len(values) == 0 {
		return fmt.Errorf("strictAPI: empty placeholder map")
	}
	used := make(map[string]bool)
	for _, e := range exprs {
		for _, p := range placeholder.FindAllString(aws.ToString(e), -1) {
			used[p] = true
		}
	}
	var unused []string
	for n := range names {
		if !used[n] {
			unused = append(unused, n)
		}
	}
	for v := range values {
		if !used[v] {
			unused = append(unused, v)
		}
	}
	for p := range used {
		_, n := names[p]
		_, v := values[p]
		if !n && !v {
			return fmt.Errorf("strictAPI: placeholder %s is not defined", p)
		}
	}
	if len(unused) > 0 {
		return fmt.Errorf("strictAPI: unused placeholders %s", strings.Join(unused, ", "))
	}
	return nil
}

func (s strictAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := checkPlaceholders(in.ExpressionAttributeNames, nil, in.ProjectionExpression); err != nil {
		return nil, err
	}
	return s.API.GetItem(ctx, in, optFns...)
}

func (s strictAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	for _, ka := range in.RequestItems {
		if err := checkPlaceholders(ka.ExpressionAttributeNames, nil, ka.ProjectionExpression); err != nil {
			return nil, err
		}
	}
	return s.API.BatchGetItem(ctx, in, optFns...)
}

func (s strictAPI) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if err := checkPlaceholders(in.ExpressionAttributeNames, in.ExpressionAttributeValues,
		in.KeyConditionExpression, in.FilterExpression, in.ProjectionExpression); err != nil {
		return nil, err
	}
	return s.API.Query(ctx, in, optFns...)
}

func (s strictAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := checkPlaceholders(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ConditionExpression); err != nil {
		return nil, err
	}
	return s.API.PutItem(ctx, in, optFns...)
}

func (s strictAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := checkPlaceholders(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.UpdateExpression, in.ConditionExpression); err != nil {
		return nil, err
	}
	return s.API.UpdateItem(ctx, in, optFns...)
}

func (s strictAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := checkPlaceholders(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ConditionExpression); err != nil {
		return nil, err
	}
	return s.API.DeleteItem(ctx, in, optFns...)
}

func (s strictAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, it := range in.TransactItems {
		var err error
		switch {
		case it.ConditionCheck != nil:
			c := it.ConditionCheck
			err = checkPlaceholders(c.ExpressionAttributeNames, c.ExpressionAttributeValues, c.ConditionExpression)
		case it.Put != nil:
			c := it.Put
			err = checkPlaceholders(c.ExpressionAttributeNames, c.ExpressionAttributeValues, c.ConditionExpression)
		case it.Delete != nil:
			c := it.Delete
			err = checkPlaceholders(c.ExpressionAttributeNames, c.ExpressionAttributeValues, c.ConditionExpression)
		case it.Update != nil:
			c := it.Update
			err = checkPlaceholders(c.ExpressionAttributeNames, c.ExpressionAttributeValues, c.UpdateExpression, c.ConditionExpression)
		}
		if err != nil {
			return nil, err
		}
	}
	return s.API.TransactWriteItems(ctx, in, optFns...)
}

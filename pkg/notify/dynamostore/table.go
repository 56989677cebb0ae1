package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableAPI is the part of *dynamodb.Client that CreateTable uses.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ TableAPI = (*dynamodb.Client)(nil)

// CreateTable creates the table a Store needs, if it does not exist: string
// keys pk (partition) and sk (sort), on-demand billing, and TTL on the
// attribute expiresAt. It waits until the table is active. It is
// idempotent and safe to call from several processes at once. It is meant
// for local use; in AWS the deployment template owns the table.
func CreateTable(ctx context.Context, api TableAPI, table string) (err error) {
	defer wrap(&err, "dynamostore: CreateTable(%q)", table)
	_, err = api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return err
	}
	for {
		res, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return err
		}
		if res.Table != nil && res.Table.TableStatus == types.TableStatusActive {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	ttl, err := api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return err
	}
	if d := ttl.TimeToLiveDescription; d != nil {
		switch d.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if aws.ToString(d.AttributeName) != attrExpiresAt {
				return fmt.Errorf("TTL is on attribute %q, want %q", aws.ToString(d.AttributeName), attrExpiresAt)
			}
			return nil
		}
	}
	_, err = api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attrExpiresAt),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		// Another process may have enabled it meanwhile (DynamoDB refuses
		// to enable it twice).
		again, derr := api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		if derr == nil && again.TimeToLiveDescription != nil &&
			aws.ToString(again.TimeToLiveDescription.AttributeName) == attrExpiresAt {
			return nil
		}
		return err
	}
	return nil
}

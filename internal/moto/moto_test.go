package moto

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

func TestStartShared(t *testing.T) {
	a, b := Start(t), Start(t)
	if a != b {
		t.Errorf("Start returned %q, then %q; want one shared server", a, b)
	}
	if _, err := NewClient(t.Context(), a).ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("ListTables: %v", err)
	}
}

// fakeTB records how fail ended a test.
type fakeTB struct {
	testing.TB
	skipped, failed bool
}

func (f *fakeTB) Helper()                  {}
func (f *fakeTB) Skipf(string, ...any)     { f.skipped = true }
func (f *fakeTB) Fatalf(string, ...any)    { f.failed = true }
func (f *fakeTB) Logf(string, ...any)      {}
func (f *fakeTB) Errorf(string, ...any)    {}
func (f *fakeTB) Name() string             { return "fake" }
func (f *fakeTB) Cleanup(func())           {}
func (f *fakeTB) Context() context.Context { return context.Background() }

func TestFail(t *testing.T) {
	tests := []struct {
		name                 string
		missing, ci          bool
		wantSkipped, wantErr bool
	}{
		{"missing outside CI skips", true, false, true, false},
		{"missing under CI fails", true, true, false, true},
		{"broken fails", false, false, false, true},
		{"broken under CI fails", false, true, false, true},
	}
	for _, tt := range tests {
		var got fakeTB
		fail(&got, errors.New("boom"), tt.missing, tt.ci)
		if got.skipped != tt.wantSkipped || got.failed != tt.wantErr {
			t.Errorf("%s: skipped %t, failed %t; want %t, %t", tt.name, got.skipped, got.failed, tt.wantSkipped, tt.wantErr)
		}
	}
}

func TestTableNames(t *testing.T) {
	tests := []struct {
		body string
		want []string
	}{
		{`{"TableName":"a","Key":{}}`, []string{"a"}},
		{`{"RequestItems":{"a":{},"b":{}}}`, []string{"a", "b"}},
		{`{"TransactItems":[{"Put":{"TableName":"a"}},{"ConditionCheck":{"TableName":"b"}}]}`, []string{"a", "b"}},
		{`{}`, nil},
		{`not json`, nil},
	}
	for _, tt := range tests {
		got := tableNames([]byte(tt.body))
		slices.Sort(got)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("tableNames(%s) mismatch (-want +got):\n%s", tt.body, diff)
		}
	}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int) types.AttributeValue    { return &types.AttributeValueMemberN{Value: strconv.Itoa(v)} }

func createTable(t *testing.T, c *dynamodb.Client, name string) {
	t.Helper()
	_, err := c.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFeatures checks the moto behaviour that pkg/notify/dynamostore
// relies on.
func TestFeatures(t *testing.T) {
	ctx := t.Context()
	c := NewClient(ctx, Start(t))
	const table = "features"
	createTable(t, c, table)
	k := func(pk, sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": s(pk), "sk": s(sk)}
	}

	// TTL settings.
	if _, err := c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expiresAt"), Enabled: aws.Bool(true)}}); err != nil {
		t.Fatalf("UpdateTimeToLive: %v", err)
	}
	ttl, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil || ttl.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
		t.Fatalf("DescribeTimeToLive = %+v, %v; want ENABLED", ttl, err)
	}

	// Empty strings, empty binaries and empty maps as attributes.
	meta := k("s", "#")
	meta["nh"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}
	meta["e"] = s("")
	meta["b"] = &types.AttributeValueMemberB{Value: []byte{}}
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: meta}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}

	// A failed PutItem condition returns the old item.
	_, err = c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: k("s", "#"),
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) || ccf.Item["e"] == nil {
		t.Errorf("PutItem(existing): got %v, want ConditionalCheckFailedException with the old item", err)
	}

	// A transaction: head counter, a nested-path CAS, a check on a missing
	// item. The cancellation reasons come per item, with old items.
	tx := func(old int, hash string) error {
		_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{TableName: aws.String(table), Key: k("s", "h#x"),
				UpdateExpression:                    aws.String("SET #seq = :new"),
				ConditionExpression:                 aws.String("attribute_not_exists(#pk) OR #seq = :old"),
				ExpressionAttributeNames:            map[string]string{"#seq": "seq", "#pk": "pk"},
				ExpressionAttributeValues:           map[string]types.AttributeValue{":new": n(old + 1), ":old": n(old)},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
			{Update: &types.Update{TableName: aws.String(table), Key: k("s", "#"),
				UpdateExpression:                    aws.String("SET nh.#k = :new"),
				ConditionExpression:                 aws.String("attribute_not_exists(nh.#k) OR nh.#k = :old"),
				ExpressionAttributeNames:            map[string]string{"#k": "tools"},
				ExpressionAttributeValues:           map[string]types.AttributeValue{":new": s(hash + "'"), ":old": s(hash)},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
			{Put: &types.Put{TableName: aws.String(table), Item: k("s", fmt.Sprintf("e#x#%d", old+1))}},
		}})
		return err
	}
	if err := tx(0, ""); err != nil {
		t.Fatalf("first transaction: %v", err)
	}
	err = tx(0, "")
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		t.Fatalf("repeated transaction: got %v, want TransactionCanceledException", err)
	}
	var codes []string
	for _, r := range tc.CancellationReasons {
		codes = append(codes, aws.ToString(r.Code))
	}
	if diff := cmp.Diff([]string{"ConditionalCheckFailed", "ConditionalCheckFailed", "None"}, codes); diff != "" {
		t.Errorf("cancellation reasons mismatch (-want +got):\n%s", diff)
	}
	if len(tc.CancellationReasons) == 3 {
		if v, ok := tc.CancellationReasons[0].Item["seq"].(*types.AttributeValueMemberN); !ok || v.Value != "1" {
			t.Errorf("reason 0 item = %v, want the head with seq 1", tc.CancellationReasons[0].Item)
		}
	}
	// Nothing of the cancelled transaction was written.
	if res, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: k("s", "e#x#1"), ConsistentRead: aws.Bool(true)}); err != nil || len(res.Item) == 0 {
		t.Errorf("GetItem(first event) = %v, %v", res, err)
	}

	// A cancelled transaction writes nothing, even when its first items
	// passed their conditions (moto runs them in order and rolls back).
	_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": s("s"), "sk": s("h#x"), "seq": n(99)}}},
		{Put: &types.Put{TableName: aws.String(table), Item: k("s", "new")}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: k("none", "#"),
			ConditionExpression: aws.String("attribute_exists(pk)")}},
	}})
	if !errors.As(err, &tc) {
		t.Fatalf("transaction with a failing check: got %v, want TransactionCanceledException", err)
	}
	head, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: k("s", "h#x"), ConsistentRead: aws.Bool(true)})
	if v, ok := head.Item["seq"].(*types.AttributeValueMemberN); err != nil || !ok || v.Value != "1" {
		t.Errorf("after a cancelled transaction: head = %v, %v; want seq 1", head.Item, err)
	}
	if res, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: k("s", "new"), ConsistentRead: aws.Bool(true)}); err != nil || len(res.Item) != 0 {
		t.Errorf("after a cancelled transaction: new item = %v, %v; want none", res.Item, err)
	}

	// A condition check on a missing item fails with an empty old item.
	_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: k("none", "#"),
			ConditionExpression:                 aws.String("attribute_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
		{Put: &types.Put{TableName: aws.String(table), Item: k("none", "x")}},
	}})
	if !errors.As(err, &tc) || aws.ToString(tc.CancellationReasons[0].Code) != "ConditionalCheckFailed" || len(tc.CancellationReasons[0].Item) != 0 {
		t.Errorf("ConditionCheck(missing): got %v, want ConditionalCheckFailed without an item", err)
	}
}

// TestSerialized checks that concurrent read-modify-write transactions
// through the proxy neither lose nor duplicate an update (moto_server
// alone does both).
func TestSerialized(t *testing.T) {
	ctx := t.Context()
	c := NewClient(ctx, Start(t))
	const table = "serialized"
	createTable(t, c, table)
	var (
		mu   sync.Mutex
		wins = map[int]int{}
		wg   sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for range 10 {
				get, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
					Key: map[string]types.AttributeValue{"pk": s("h"), "sk": s("h")}, ConsistentRead: aws.Bool(true)})
				if err != nil {
					t.Error(err)
					return
				}
				old := 0
				if v, ok := get.Item["seq"].(*types.AttributeValueMemberN); ok {
					old, _ = strconv.Atoi(v.Value)
				}
				_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
					{Update: &types.Update{TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": s("h"), "sk": s("h")},
						UpdateExpression:          aws.String("SET seq = :new"),
						ConditionExpression:       aws.String("attribute_not_exists(seq) OR seq = :old"),
						ExpressionAttributeValues: map[string]types.AttributeValue{":new": n(old + 1), ":old": n(old)}}},
					{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": s("e"), "sk": s(fmt.Sprintf("%08d", old+1))}}},
				}})
				if err == nil {
					mu.Lock()
					wins[old+1]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	q, err := c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("e")}})
	if err != nil {
		t.Fatal(err)
	}
	for seq, n := range wins {
		if n != 1 {
			t.Errorf("seq %d: %d transactions succeeded, want 1", seq, n)
		}
	}
	if len(q.Items) != len(wins) {
		t.Errorf("%d events stored, %d transactions succeeded", len(q.Items), len(wins))
	}
}

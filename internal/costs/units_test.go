package costs

import (
	"context"
	"math"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// meter adds up the DynamoDB on-demand request units of the requests it
// sees, by DynamoDB's published rules (Developer Guide, "Read/write
// capacity mode"): a strongly consistent read costs one RRU per 4 KB,
// per item for GetItem and BatchGetItem (an item that is not there still
// costs one) and over the summed size of the items for Query; a write
// costs one WRU per KB of the item, per item for BatchWriteItem, and
// TransactWriteItems twice that for each of its items, the condition
// checks included. An update is billed by the larger of the item before
// and after, a delete and a condition check by the item's size.
//
// Sizes come from what the requests and answers carry: the items written,
// and the items read as returned. The meter remembers the size of every
// item it saw written or read (by key), so that an update, a delete or a
// condition check is billed by the item's size rather than its key. It
// approximates in three places: an update's new size is taken as the
// larger of the item's remembered size and its key with the new values; a
// projected read (ProjectionExpression) looks smaller than DynamoDB bills
// (for GetItem and BatchGetItem each small item rounds up to 4 KB anyway;
// this package's Query reads are not projected); and an item the meter
// never saw is billed by its key.
type meter struct {
	mu       sync.Mutex
	rru, wru float64
	sizes    map[string]int // item key -> last known size
}

func (m *meter) reset() {
	m.mu.Lock()
	m.rru, m.wru = 0, 0
	m.mu.Unlock()
}

// units returns the request units counted since the last reset.
func (m *meter) units() (rru, wru float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rru, m.wru
}

// middleware meters every DynamoDB operation once, with its final answer
// (a cancelled transaction is metered as if it wrote: DynamoDB bills the
// capacity a failed transaction consumed).
func (m *meter) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("mcpushMeter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			m.mu.Lock()
			if m.sizes == nil {
				m.sizes = make(map[string]int)
			}
			r, w := requestUnits(m.sizes, in.Parameters, out.Result)
			m.rru += r
			m.wru += w
			m.mu.Unlock()
			return out, md, err
		}), middleware.After)
}

// itemKey names an item by its key attributes (pk and sk).
func itemKey(it map[string]types.AttributeValue) string {
	s := func(name string) string {
		if v, ok := it[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	return s("pk") + "\x00" + s("sk")
}

// requestUnits returns the units of one request with its response (nil
// when it failed), and updates sizes, the known item sizes by key.
func requestUnits(sizes map[string]int, in, out any) (rru, wru float64) {
	seen := func(it map[string]types.AttributeValue) int {
		n := itemSize(it)
		sizes[itemKey(it)] = n
		return n
	}
	// known is the size to bill for an item that key names: the larger
	// of what the meter knows and extra (its key and new values).
	known := func(key map[string]types.AttributeValue, extra int) int {
		return max(sizes[itemKey(key)], extra)
	}
	update := func(key map[string]types.AttributeValue, values map[string]types.AttributeValue) int {
		n := known(key, itemSize(key)+valuesSize(values))
		sizes[itemKey(key)] = n
		return n
	}
	remove := func(key map[string]types.AttributeValue) int {
		n := known(key, itemSize(key))
		delete(sizes, itemKey(key))
		return n
	}
	switch in := in.(type) {
	case *dynamodb.GetItemInput:
		if o, ok := out.(*dynamodb.GetItemOutput); ok && o != nil && o.Item != nil {
			return readUnits(seen(o.Item)), 0
		}
		return 1, 0
	case *dynamodb.BatchGetItemInput:
		keys, found := 0, 0
		for _, ka := range in.RequestItems {
			keys += len(ka.Keys)
		}
		if o, ok := out.(*dynamodb.BatchGetItemOutput); ok && o != nil {
			for _, items := range o.Responses {
				for _, it := range items {
					rru += readUnits(seen(it))
					found++
				}
			}
			for _, ka := range o.UnprocessedKeys {
				keys -= len(ka.Keys)
			}
		}
		return rru + float64(max(keys-found, 0)), 0
	case *dynamodb.QueryInput:
		size := 0
		if o, ok := out.(*dynamodb.QueryOutput); ok && o != nil {
			for _, it := range o.Items {
				size += seen(it)
			}
		}
		return readUnits(size), 0
	case *dynamodb.PutItemInput:
		return 0, writeUnits(max(known(in.Item, 0), seen(in.Item)))
	case *dynamodb.UpdateItemInput:
		return 0, writeUnits(update(in.Key, in.ExpressionAttributeValues))
	case *dynamodb.DeleteItemInput:
		return 0, writeUnits(remove(in.Key))
	case *dynamodb.BatchWriteItemInput:
		for _, reqs := range in.RequestItems {
			for _, r := range reqs {
				switch {
				case r.PutRequest != nil:
					wru += writeUnits(max(known(r.PutRequest.Item, 0), seen(r.PutRequest.Item)))
				case r.DeleteRequest != nil:
					wru += writeUnits(remove(r.DeleteRequest.Key))
				}
			}
		}
		return 0, wru
	case *dynamodb.TransactWriteItemsInput:
		for _, ti := range in.TransactItems {
			switch {
			case ti.Put != nil:
				wru += 2 * writeUnits(max(known(ti.Put.Item, 0), seen(ti.Put.Item)))
			case ti.Update != nil:
				wru += 2 * writeUnits(update(ti.Update.Key, ti.Update.ExpressionAttributeValues))
			case ti.Delete != nil:
				wru += 2 * writeUnits(remove(ti.Delete.Key))
			case ti.ConditionCheck != nil:
				wru += 2 * writeUnits(known(ti.ConditionCheck.Key, itemSize(ti.ConditionCheck.Key)))
			}
		}
		return 0, wru
	}
	return 0, 0
}

// readUnits is the strongly consistent read units of size bytes: one per
// 4 KB, at least one.
func readUnits(size int) float64 { return math.Max(1, math.Ceil(float64(size)/4096)) }

// writeUnits is the write units of an item of size bytes: one per KB, at
// least one.
func writeUnits(size int) float64 { return math.Max(1, math.Ceil(float64(size)/1024)) }

// itemSize is an item's size as DynamoDB counts it: the lengths of its
// attribute names and values.
func itemSize(it map[string]types.AttributeValue) int {
	n := 0
	for name, v := range it {
		n += len(name) + valueSize(v)
	}
	return n
}

func valuesSize(vals map[string]types.AttributeValue) int {
	n := 0
	for _, v := range vals {
		n += valueSize(v)
	}
	return n
}

// valueSize is an attribute value's size: strings and binaries their
// length, numbers about one byte per two digits plus one, booleans and
// nulls one byte, lists and maps three bytes plus their elements (and one
// byte each).
func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for name, e := range v.Value {
			n += 1 + len(name) + valueSize(e)
		}
		return n
	}
	return 0
}

func numberSize(s string) int {
	digits := 0
	for _, c := range s {
		if c >= '0' && c <= '9' {
			digits++
		}
	}
	return (digits+1)/2 + 1
}

// TestMeter pins the unit rules on requests of known size.
func TestMeter(t *testing.T) {
	s := func(n int) types.AttributeValue {
		return &types.AttributeValueMemberS{Value: string(make([]byte, n))}
	}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"}, "sk": &types.AttributeValueMemberS{Value: "k"}}
	big := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"}, "sk": &types.AttributeValueMemberS{Value: "b"}, "d": s(5000)}
	bigKey := map[string]types.AttributeValue{"pk": big["pk"], "sk": big["sk"]}
	for _, c := range []struct {
		name     string
		in, out  any
		rru, wru float64
	}{
		{"GetItem of nothing", &dynamodb.GetItemInput{Key: key}, &dynamodb.GetItemOutput{}, 1, 0},
		{"GetItem of 5 KB", &dynamodb.GetItemInput{Key: key}, &dynamodb.GetItemOutput{Item: big}, 2, 0},
		{"BatchGetItem of 3 keys, one 5 KB item found", &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			"t": {Keys: []map[string]types.AttributeValue{key, key, key}}}},
			&dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{"t": {big}}}, 4, 0},
		{"Query of two 5 KB items", &dynamodb.QueryInput{}, &dynamodb.QueryOutput{Items: []map[string]types.AttributeValue{big, big}}, 3, 0},
		{"PutItem of 5 KB", &dynamodb.PutItemInput{Item: big}, nil, 0, 5},
		{"UpdateItem", &dynamodb.UpdateItemInput{Key: key, ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: "12345"}}}, nil, 0, 1},
		{"BatchWriteItem", &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"t": {
			{PutRequest: &types.PutRequest{Item: big}}, {DeleteRequest: &types.DeleteRequest{Key: key}}}}}, nil, 0, 6},
		{"TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{Item: big}}, {ConditionCheck: &types.ConditionCheck{Key: key}}, {Update: &types.Update{Key: key}}}}, nil, 0, 14},
	} {
		r, w := requestUnits(map[string]int{}, c.in, c.out)
		if r != c.rru || w != c.wru {
			t.Errorf("%s: %g RRU, %g WRU; want %g, %g", c.name, r, w, c.rru, c.wru)
		}
	}
	// Remembered sizes: an update, a condition check and a delete of the
	// 5 KB item written before are billed by its size.
	sizes := map[string]int{}
	for _, c := range []struct {
		name string
		in   any
		wru  float64
	}{
		{"Put", &dynamodb.PutItemInput{Item: big}, 5},
		{"Update", &dynamodb.UpdateItemInput{Key: bigKey}, 5},
		{"ConditionCheck", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{ConditionCheck: &types.ConditionCheck{Key: bigKey}}}}, 10},
		{"Delete", &dynamodb.DeleteItemInput{Key: bigKey}, 5},
		{"Delete again", &dynamodb.DeleteItemInput{Key: bigKey}, 1},
	} {
		if _, w := requestUnits(sizes, c.in, nil); w != c.wru {
			t.Errorf("%s after a 5 KB put: %g WRU, want %g", c.name, w, c.wru)
		}
	}
	if got := numberSize(strconv.Itoa(123456789)); got != 6 {
		t.Errorf("numberSize(123456789) = %d, want 6", got)
	}
}

package dynamostore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/pkg/notify"
)

// Registry item attributes.
const (
	attrItems = "items"
	attrHash  = "hash"
)

// ApplyRegistry implements notify.Store with one GetItem of the registry
// and one TransactWriteItems: the registry item (all its items in one
// DynamoDB item, conditional on the version read), its hash in the
// RegistryHashes item, and the message id (a conditional put). A registry
// whose items would exceed notify.MaxItemBytes is refused with
// notify.ErrTooLarge. A repeated message id costs one more GetItem, for the
// registry to return.
func (s *Store) ApplyRegistry(ctx context.Context, kind, op string, items map[string]json.RawMessage, messageID string) (reg *notify.Registry, applied bool, err error) {
	defer wrap(&err, "dynamostore: ApplyRegistry(%q, %q, %q)", kind, op, messageID)
	if err := notify.CheckRegistryChange(kind, op, items, messageID); err != nil {
		return nil, false, err
	}
	tok := newToken()
	unlock, err := s.writers.lock(ctx, registryPK+"|"+kind)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	for race := 1; ; race++ {
		cur, err := s.readRegistry(ctx, kind)
		if err != nil {
			return nil, false, err
		}
		next, err := notify.ApplyOp(cur.Items, op, items)
		if err != nil {
			return nil, false, err
		}
		blob := encodeItems(next)
		if len(blob) > notify.MaxItemBytes {
			return nil, false, tooLarge(kind+" registry", len(blob), notify.MaxItemBytes)
		}
		hash := notify.HashItems(next)
		now := s.now()
		nowN := toNanos(now)

		regItem := key(registryPK, kind)
		regItem[attrItems] = avB(blob)
		regItem[attrHash] = avS(hash)
		regItem[attrVersion] = avN(cur.version + 1)
		regItem[attrTok] = avS(tok)
		var r expr
		regCond := r.counterIs(attrVersion, cur.version)
		var h expr
		msg := setExpiry(key(registryPK, regMsgSK(kind, messageID)), now.Add(s.eventTTL))
		msg[attrTok] = avS(tok)
		var m expr
		tx := []types.TransactWriteItem{
			{Put: &types.Put{
				TableName:                           s.table,
				Item:                                regItem,
				ConditionExpression:                 aws.String(regCond),
				ExpressionAttributeNames:            r.namesOrNil(),
				ExpressionAttributeValues:           r.valuesOrNil(),
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
			{Update: &types.Update{
				TableName:                 s.table,
				Key:                       key(registryPK, hashesSK),
				UpdateExpression:          aws.String("SET " + h.n(kind) + " = " + h.v(avS(hash))),
				ExpressionAttributeNames:  h.namesOrNil(),
				ExpressionAttributeValues: h.valuesOrNil(),
			}},
		}
		var at attempts
		_, err = s.transactChange(ctx, tx, &at, []string{notify.RegistryChanged})
		if err == nil {
			return &notify.Registry{Kind: kind, Hash: hash, Items: next}, true, nil
		}
		c, ok := asCancellation(err)
		if !ok {
			return nil, false, err
		}
		if failed, old := c.failed(1); failed {
			// Applied before: by this call's own earlier attempt (retried
			// by the SDK) or by an earlier call. Report the registry as it
			// is now.
			now, err := s.readRegistry(ctx, kind)
			if err != nil {
				return nil, false, err
			}
			return &now.Registry, getS(old, attrTok) == tok, nil
		}
		failed, _ := c.failed(0)
		switch {
		case race >= maxRaces:
			return nil, false, fmt.Errorf("%w: %w", errTooManyRaces, err)
		case failed:
			// Changed since we read it: read it again.
			if race > 10 {
				if err := backoff(ctx, 2); err != nil {
					return nil, false, err
				}
			}
		case c.transient():
			if err := backoff(ctx, race); err != nil {
				return nil, false, err
			}
		default:
			return nil, false, err
		}
	}
}

// storedRegistry is a registry with the version of its item.
type storedRegistry struct {
	notify.Registry
	version int64
}

func (s *Store) readRegistry(ctx context.Context, kind string) (*storedRegistry, error) {
	res, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      s.table,
		Key:            key(registryPK, kind),
		ConsistentRead: consistent,
	})
	if err != nil {
		return nil, err
	}
	r := &storedRegistry{Registry: notify.Registry{Kind: kind, Items: map[string]json.RawMessage{}}}
	if len(res.Item) == 0 {
		return r, nil
	}
	if r.Items, err = decodeItems(getB(res.Item, attrItems)); err != nil {
		return nil, fmt.Errorf("decoding the %s registry: %w", kind, err)
	}
	r.Hash = getS(res.Item, attrHash)
	r.version = getN(res.Item, attrVersion)
	return r, nil
}

// GetRegistry implements notify.Store with one GetItem.
func (s *Store) GetRegistry(ctx context.Context, kind string) (_ *notify.Registry, err error) {
	defer wrap(&err, "dynamostore: GetRegistry(%q)", kind)
	if !notify.ValidRegistry(kind) {
		return nil, invalid("registry kind %q", kind)
	}
	r, err := s.readRegistry(ctx, kind)
	if err != nil {
		return nil, err
	}
	return &r.Registry, nil
}

// RegistryHashes implements notify.Store with one GetItem of the item that
// ApplyRegistry keeps every registry's hash in.
func (s *Store) RegistryHashes(ctx context.Context) (_ map[string]string, err error) {
	defer wrap(&err, "dynamostore: RegistryHashes")
	res, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      s.table,
		Key:            key(registryPK, hashesSK),
		ConsistentRead: consistent,
	})
	if err != nil {
		return nil, err
	}
	hashes := make(map[string]string)
	for name, v := range res.Item {
		if v, ok := v.(*types.AttributeValueMemberS); ok && notify.ValidRegistry(name) {
			hashes[name] = v.Value
		}
	}
	return hashes, nil
}

// encodeItems encodes registry items verbatim: for each key in sorted
// order, the uvarint length of the key, the key, the uvarint length of the
// item and the item.
func encodeItems(items map[string]json.RawMessage) []byte {
	keys := make([]string, 0, len(items))
	size := 0
	for k, v := range items {
		keys = append(keys, k)
		size += len(k) + len(v) + 2*binary.MaxVarintLen32
	}
	slices.Sort(keys)
	b := make([]byte, 0, size)
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(items[k])))
		b = append(b, items[k]...)
	}
	return b
}

func decodeItems(b []byte) (map[string]json.RawMessage, error) {
	items := make(map[string]json.RawMessage)
	next := func() ([]byte, error) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return nil, errCorrupt
		}
		v := b[w : w+int(n)]
		b = b[w+int(n):]
		return v, nil
	}
	for len(b) > 0 {
		k, err := next()
		if err != nil {
			return nil, err
		}
		v, err := next()
		if err != nil {
			return nil, err
		}
		items[string(k)] = json.RawMessage(slices.Clone(v))
	}
	return items, nil
}

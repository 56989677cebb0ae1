package notify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
)

// MaxItemBytes is the largest value (event data, message, registry
// contents) any Store accepts in one item. DynamoDB items are limited to
// 400 KB including keys and attributes; every implementation refuses a
// larger value with ErrTooLarge so that behaviour does not depend on the
// store.
const MaxItemBytes = 350 * 1024

// MaxAppendBatch is the most values one Append may carry (a DynamoDB
// transaction holds at most 100 items, a few of which are bookkeeping).
const MaxAppendBatch = 25

// MaxAppendBytes is the most bytes of data one Append may carry in all
// (a DynamoDB transaction holds at most 4 MB, the session item included);
// a larger Append is ErrTooLarge and stores nothing.
const MaxAppendBytes = 3 << 20

// ValidRegistry reports whether kind names a registry.
func ValidRegistry(kind string) bool {
	switch kind {
	case RegistryTools, RegistryResources, RegistryPrompts, RegistryEvents:
		return true
	}
	return false
}

// HashItems returns the content hash of a registry's items: hex SHA-256
// over the keys in sorted order and each item's compacted JSON. The hash
// of an empty registry is "". Every Store uses this function, so hashes
// agree across implementations and processes.
func HashItems(items map[string]json.RawMessage) string {
	if len(items) == 0 {
		return ""
	}
	keys := make([]string, 0, len(items))
	for k := range items {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	var buf bytes.Buffer
	for _, k := range keys {
		buf.Reset()
		if err := json.Compact(&buf, items[k]); err != nil {
			buf.Reset()
			buf.Write(items[k])
		}
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, buf.Len())
		h.Write(buf.Bytes())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ApplyOp returns the items that result from applying op to cur. It does
// not modify cur. It is the one definition of put/delete/replace that
// every Store uses.
func ApplyOp(cur map[string]json.RawMessage, op string, items map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	next := make(map[string]json.RawMessage, len(cur)+len(items))
	switch op {
	case OpPut:
		for k, v := range cur {
			next[k] = v
		}
		for k, v := range items {
			next[k] = v
		}
	case OpDelete:
		for k, v := range cur {
			if _, gone := items[k]; !gone {
				next[k] = v
			}
		}
	case OpReplace:
		for k, v := range items {
			next[k] = v
		}
	default:
		return nil, fmt.Errorf("%w: registry op %q (want put, delete or replace)", ErrInvalid, op)
	}
	return next, nil
}

package dynamostore

import (
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// expr collects the placeholders of one request's expressions. DynamoDB
// refuses unused placeholders, so names and values are added only as they
// are used. The zero value is ready to use.
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

// n returns the placeholder of attribute name (which must be
// alphanumeric).
func (e *expr) n(name string) string {
	if e.names == nil {
		e.names = make(map[string]string)
	}
	e.names["#"+name] = name
	return "#" + name
}

// v returns a placeholder for value.
func (e *expr) v(value types.AttributeValue) string {
	if e.values == nil {
		e.values = make(map[string]types.AttributeValue)
	}
	p := ":v" + strconv.Itoa(len(e.values))
	e.values[p] = value
	return p
}

// live returns a condition that the item exists and has not expired at
// now (Unix nanoseconds).
func (e *expr) live(now int64) string {
	return "attribute_exists(" + e.n(attrPK) + ") AND " + e.n(attrExp) + " > " + e.v(avN(now))
}

// absent returns a condition that the item does not exist or has expired
// at now, so that an expired item may be replaced.
func (e *expr) absent(now int64) string {
	return "attribute_not_exists(" + e.n(attrPK) + ") OR " + e.n(attrExp) + " <= " + e.v(avN(now))
}

// counterIs returns a condition that the counter attribute name equals n,
// where 0 means that the item does not exist.
func (e *expr) counterIs(name string, n int64) string {
	if n == 0 {
		return "attribute_not_exists(" + e.n(attrPK) + ")"
	}
	return e.n(name) + " = " + e.v(avN(n))
}

func (e *expr) namesOrNil() map[string]string {
	if len(e.names) == 0 {
		return nil
	}
	return e.names
}

func (e *expr) valuesOrNil() map[string]types.AttributeValue {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}

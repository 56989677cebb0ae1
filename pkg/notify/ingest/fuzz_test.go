package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// FuzzParse checks that Parse never panics, that its errors are
// *ParseErrors of the two documented kinds, and that what it accepts is
// valid, compact, within the size limit, and a fixed point: wrapping the
// result in an envelope and parsing again gives the same result. The seed
// corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, topicARN, message string) {
		msg, err := Parse(topicARN, message)
		if err != nil {
			pe, ok := errors.AsType[*ParseError](err)
			if !ok {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			if !errors.Is(err, ErrInvalidMessage) && !errors.Is(err, notify.ErrTooLarge) {
				t.Fatalf("error %v wraps neither ErrInvalidMessage nor ErrTooLarge", err)
			}
			if pe.Msg == "" {
				t.Fatalf("error %v has no message", err)
			}
			return
		}
		switch msg.Type {
		case TypeEvent:
			checkEvent(t, topicARN, msg)
		case TypeRegistry:
			checkRegistry(t, msg)
		default:
			t.Fatalf("Parse returned type %q", msg.Type)
		}
	})
}

func checkCompact(t *testing.T, what string, b []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("%s is not JSON: %v: %q", what, err, b)
	}
	if !bytes.Equal(buf.Bytes(), b) {
		t.Fatalf("%s is not compact: %q", what, b)
	}
}

func checkEvent(t *testing.T, topicARN string, msg *Message) {
	if !ValidTopic(msg.Topic) {
		t.Fatalf("invalid topic %q", msg.Topic)
	}
	if msg.FromTopicARN && !strings.HasSuffix(topicARN, msg.Topic) {
		t.Fatalf("topic %q is not the end of the ARN %q", msg.Topic, topicARN)
	}
	if len(msg.Data) > notify.MaxItemBytes {
		t.Fatalf("data of %d bytes accepted", len(msg.Data))
	}
	checkCompact(t, "data", msg.Data)
	if msg.Items != nil || msg.Registry != "" || msg.Op != "" {
		t.Fatalf("event with registry fields: %+v", msg)
	}
	env, err := json.Marshal(map[string]any{"type": "event", "topic": msg.Topic, "data": msg.Data})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("", string(env))
	if err != nil {
		t.Fatalf("re-parsing the event in an envelope: %v", err)
	}
	// json.Marshal escapes HTML characters; compare the values.
	if again.Topic != msg.Topic || !jsonEqual(again.Data, msg.Data) {
		t.Fatalf("envelope round trip changed the event: %+v -> %+v", msg, again)
	}
}

func checkRegistry(t *testing.T, msg *Message) {
	if !notify.ValidRegistry(msg.Registry) {
		t.Fatalf("registry %q", msg.Registry)
	}
	if _, err := notify.ApplyOp(nil, msg.Op, msg.Items); err != nil {
		t.Fatalf("op %q: %v", msg.Op, err)
	}
	if len(msg.Items) == 0 && msg.Op != notify.OpReplace {
		t.Fatalf("op %s with no items", msg.Op)
	}
	b, err := marshal(msg.Items)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > notify.MaxItemBytes {
		t.Fatalf("items of %d bytes accepted", len(b))
	}
	items := make([]json.RawMessage, 0, len(msg.Items))
	for _, k := range slices.Sorted(maps.Keys(msg.Items)) {
		if k == "" {
			t.Fatal("empty item key")
		}
		checkCompact(t, "item "+k, msg.Items[k])
		items = append(items, msg.Items[k])
	}
	env, err := marshal(map[string]any{"type": "registry", "registry": msg.Registry, "op": msg.Op, "items": items})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("", string(env))
	if err != nil {
		t.Fatalf("re-parsing the canonical items: %v\n%s", err, env)
	}
	if diff := cmp.Diff(msg, again); diff != "" {
		t.Fatalf("canonical items are not a fixed point (-first +again):\n%s", diff)
	}
}

// jsonEqual reports whether a and b hold the same JSON value, comparing
// numbers by their text (data may hold numbers beyond float64).
func jsonEqual(a, b []byte) bool {
	decode := func(b []byte) (any, error) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		err := dec.Decode(&v)
		return v, err
	}
	x, errX := decode(a)
	y, errY := decode(b)
	return errX == nil && errY == nil && cmp.Equal(x, y)
}

// FuzzEventItem: an events registry item, whatever its bytes, is either
// refused with a *ParseError or accepted in a canonical form that is a
// fixed point of Parse, that the server's decoder (notify.DecodeEventItem)
// accepts as is, defaults filled in, and whose schemas are objects of
// type "object".
func FuzzEventItem(f *testing.F) {
	for _, seed := range []string{
		`{"name":"order.created"}`,
		`{"name":"order.created","topic":"orders","description":"d","delivery":["webhook","poll"],"inputSchema":{"type":"object","properties":{"region":{"type":"string"}}},"payloadSchema":{"type":"object"}}`,
		`{"name":"e","delivery":null,"inputSchema":null}`,
		`{"name":"e","inputSchema":{"type":"object","properties":{"n":{"type":"integer","minimum":1e400}}}}`,
		`{"name":"e","inputSchema":{"type":"object","$defs":{"a":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a"}}}}`,
		`{"name":"e","inputSchema":{"type":"object","pattern":"(a+)+$"}}`,
		`{"name":"e","topic":"","delivery":["push","push"]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, item string) {
		msg, err := Parse("", `{"type":"registry","registry":"events","op":"put","items":[`+item+`]}`)
		if err != nil {
			if _, ok := errors.AsType[*ParseError](err); !ok {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			return
		}
		checkRegistry(t, msg)
		for name, raw := range msg.Items {
			e, err := notify.DecodeEventItem(raw)
			if err != nil {
				t.Fatalf("the server refuses an accepted item %s: %v", raw, err)
			}
			if e.Name != name || e.Topic == "" || len(e.Delivery) == 0 || len(e.InputSchema) == 0 || len(e.PayloadSchema) == 0 {
				t.Fatalf("accepted item %s lacks a default: %+v", raw, e)
			}
			if again, _ := marshal(e); !bytes.Equal(again, raw) {
				t.Fatalf("accepted item %s is not stored with its defaults (%s)", raw, again)
			}
		}
	})
}

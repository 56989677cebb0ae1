package ingest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
)

const testARN = "arn:aws:sns:us-east-1:123456789012:orders"

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestParseEvent(t *testing.T) {
	for _, tc := range []struct {
		name string
		arn  string
		msg  string
		want *Message
	}{
		{"envelope", testARN, `{"type":"event","topic":"deploys","data":{"service":"api","version":"1.2.3"}}`,
			&Message{Type: TypeEvent, Topic: "deploys", Data: raw(`{"service":"api","version":"1.2.3"}`)}},
		{"envelope data is compacted, member order kept", testARN, "{\n  \"data\": [1, 2,\t3],\n  \"topic\": \"a.b-c_D9\",\n  \"type\": \"event\"\n}",
			&Message{Type: TypeEvent, Topic: "a.b-c_D9", Data: raw(`[1,2,3]`)}},
		{"envelope with null data", testARN, `{"type":"event","topic":"t","data":null}`,
			&Message{Type: TypeEvent, Topic: "t", Data: raw(`null`)}},
		{"envelope with string data keeps HTML characters", testARN, `{"type":"event","topic":"t","data":"<a & b>"}`,
			&Message{Type: TypeEvent, Topic: "t", Data: raw(`"<a & b>"`)}},
		{"envelope keeps big numbers exactly", testARN, `{"type":"event","topic":"t","data":12345678901234567890123.5e-3}`,
			&Message{Type: TypeEvent, Topic: "t", Data: raw(`12345678901234567890123.5e-3`)}},
		{"topic of 128 characters", testARN, `{"type":"event","topic":"` + strings.Repeat("x", 128) + `","data":1}`,
			&Message{Type: TypeEvent, Topic: strings.Repeat("x", 128), Data: raw(`1`)}},
		{"plain text", testARN, `Deploy of api 1.2.3 finished`,
			&Message{Type: TypeEvent, Topic: "orders", Data: raw(`"Deploy of api 1.2.3 finished"`), FromTopicARN: true}},
		{"plain text with quotes, HTML and newlines", testARN, "say \"hi\" <b>\n&",
			&Message{Type: TypeEvent, Topic: "orders", Data: raw(`"say \"hi\" <b>\n&"`), FromTopicARN: true}},
		{"empty message", testARN, ``,
			&Message{Type: TypeEvent, Topic: "orders", Data: raw(`""`), FromTopicARN: true}},
		{"text that starts with a bracket", testARN, `[WARN] disk almost full`,
			&Message{Type: TypeEvent, Topic: "orders", Data: raw(`"[WARN] disk almost full"`), FromTopicARN: true}},
		{"JSON without type", testARN, `{"AlarmName": "cpu-high", "NewStateValue": "ALARM"}`,
			&Message{Type: TypeEvent, Topic: "orders", Data: raw(`{"AlarmName":"cpu-high","NewStateValue":"ALARM"}`), FromTopicARN: true}},
		{"JSON whose type is not a string", testARN, `{"type": 7, "x": true}`,
			&Message{Type: TypeEvent, Topic: "orders", Data: raw(`{"type":7,"x":true}`), FromTopicARN: true}},
		{"JSON whose type is null", testARN, `{"type":null}`,
			&Message{Type: TypeEvent, Topic: "orders", Data: raw(`{"type":null}`), FromTopicARN: true}},
		{"type matches case-sensitively", testARN, `{"Type":"event","topic":"x"}`,
			&Message{Type: TypeEvent, Topic: "orders", Data: raw(`{"Type":"event","topic":"x"}`), FromTopicARN: true}},
		{"array", testARN, ` [1, {"type":"event"}] `,
			&Message{Type: TypeEvent, Topic: "orders", Data: raw(`[1,{"type":"event"}]`), FromTopicARN: true}},
		{"number", testARN, `42`,
			&Message{Type: TypeEvent, Topic: "orders", Data: raw(`42`), FromTopicARN: true}},
		{"JSON string", testARN, `"hello"`,
			&Message{Type: TypeEvent, Topic: "orders", Data: raw(`"hello"`), FromTopicARN: true}},
		{"JSON null", testARN, `null`,
			&Message{Type: TypeEvent, Topic: "orders", Data: raw(`null`), FromTopicARN: true}},
		{"FIFO topic", "arn:aws:sns:eu-west-1:123456789012:orders.fifo", `x`,
			&Message{Type: TypeEvent, Topic: "orders.fifo", Data: raw(`"x"`), FromTopicARN: true}},
		{"bare topic name as ARN", "alarms", `x`,
			&Message{Type: TypeEvent, Topic: "alarms", Data: raw(`"x"`), FromTopicARN: true}},
		{"envelope ignores the ARN", "", `{"type":"event","topic":"t","data":1}`,
			&Message{Type: TypeEvent, Topic: "t", Data: raw(`1`)}},
		{"data of exactly MaxItemBytes", testARN, `{"type":"event","topic":"t","data":"` + strings.Repeat("a", notify.MaxItemBytes-2) + `"}`,
			&Message{Type: TypeEvent, Topic: "t", Data: raw(`"` + strings.Repeat("a", notify.MaxItemBytes-2) + `"`)}},
		{"oversize before compaction, not after", testARN, `{"type":"event","topic":"t","data":[` + strings.Repeat(" ", notify.MaxItemBytes) + `1]}`,
			&Message{Type: TypeEvent, Topic: "t", Data: raw(`[1]`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.arn, tc.msg)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRegistry(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  string
		want *Message
	}{
		{"prompt put, canonical member order", `{"type":"registry","registry":"prompts","op":"put","items":[
			{"messages":[{"text":"Summarise {{topic}}","role":"user"},{"role":"assistant","text":"OK"}],
			 "arguments":[{"required":true,"name":"topic","description":"a topic"},{"name":"style","required":false}],
			 "description":"Summarise a topic","title":"Summary","name":"summarise"}]}`,
			&Message{Type: TypeRegistry, Registry: "prompts", Op: "put", Items: map[string]json.RawMessage{
				"summarise": raw(`{"name":"summarise","title":"Summary","description":"Summarise a topic",` +
					`"arguments":[{"name":"topic","description":"a topic","required":true},{"name":"style"}],` +
					`"messages":[{"role":"user","text":"Summarise {{topic}}"},{"role":"assistant","text":"OK"}]}`),
			}}},
		{"prompt with only a name, nulls are absent", `{"type":"registry","registry":"prompts","op":"put","items":[{"name":"p","title":null,"arguments":null}]}`,
			&Message{Type: TypeRegistry, Registry: "prompts", Op: "put", Items: map[string]json.RawMessage{"p": raw(`{"name":"p"}`)}}},
		{"resources put: text, blob, empty text", `{"type":"registry","registry":"resources","op":"put","items":[
			{"uri":"file:///notes.md","name":"notes","mimeType":"text/markdown; charset=utf-8","text":"# Notes <&>"},
			{"uri":"https://example.com/logo.png","name":"logo","blob":"iVBORw0KGgo=","description":"the logo"},
			{"uri":"urn:x:empty","name":"empty","text":""}]}`,
			&Message{Type: TypeRegistry, Registry: "resources", Op: "put", Items: map[string]json.RawMessage{
				"file:///notes.md":             raw(`{"uri":"file:///notes.md","name":"notes","mimeType":"text/markdown; charset=utf-8","text":"# Notes <&>"}`),
				"https://example.com/logo.png": raw(`{"uri":"https://example.com/logo.png","name":"logo","description":"the logo","blob":"iVBORw0KGgo="}`),
				"urn:x:empty":                  raw(`{"uri":"urn:x:empty","name":"empty","text":""}`),
			}}},
		{"blob with line breaks is re-encoded", `{"type":"registry","registry":"resources","op":"put","items":[{"uri":"a:b","name":"n","blob":"aGVs\nbG8="}]}`,
			&Message{Type: TypeRegistry, Registry: "resources", Op: "put", Items: map[string]json.RawMessage{
				"a:b": raw(`{"uri":"a:b","name":"n","blob":"aGVsbG8="}`)}}},
		{"resource delete needs only the uri", `{"type":"registry","registry":"resources","op":"delete","items":[{"uri":"file:///notes.md"}]}`,
			&Message{Type: TypeRegistry, Registry: "resources", Op: "delete", Items: map[string]json.RawMessage{
				"file:///notes.md": raw(`{"uri":"file:///notes.md"}`)}}},
		{"tools: disable one, re-describe another", `{"type":"registry","registry":"tools","op":"put","items":[
			{"name":"events_wait","enabled":false},{"name":"topics_list","description":"Lists topics.","enabled":true}]}`,
			&Message{Type: TypeRegistry, Registry: "tools", Op: "put", Items: map[string]json.RawMessage{
				"events_wait": raw(`{"name":"events_wait","enabled":false}`),
				"topics_list": raw(`{"name":"topics_list","enabled":true,"description":"Lists topics."}`),
			}}},
		{"tools delete", `{"type":"registry","registry":"tools","op":"delete","items":[{"name":"session_info"}]}`,
			&Message{Type: TypeRegistry, Registry: "tools", Op: "delete", Items: map[string]json.RawMessage{
				"session_info": raw(`{"name":"session_info"}`)}}},
		{"event type with only a name: every default", `{"type":"registry","registry":"events","op":"put","items":[{"name":"order.created"}]}`,
			&Message{Type: TypeRegistry, Registry: "events", Op: "put", Items: map[string]json.RawMessage{
				"order.created": raw(`{"name":"order.created","topic":"order.created","delivery":["poll","push","webhook"],"inputSchema":{"type":"object"},"payloadSchema":{"type":"object"}}`)}}},
		{"event type in full: canonical delivery order, schema members sorted, numbers as written", `{"type":"registry","registry":"events","op":"put","items":[
			{"payloadSchema":{"type":"object","properties":{"total":{"type":"number","maximum":1.50}}},"name":"order.created","topic":"orders",
			 "description":"An order <placed>","delivery":["webhook","poll"],"inputSchema":{"required":["region"],"type":"object","properties":{"region":{"type":"string"}}}}]}`,
			&Message{Type: TypeRegistry, Registry: "events", Op: "put", Items: map[string]json.RawMessage{
				"order.created": raw(`{"name":"order.created","topic":"orders","description":"An order <placed>","delivery":["poll","webhook"],` +
					`"inputSchema":{"properties":{"region":{"type":"string"}},"required":["region"],"type":"object"},` +
					`"payloadSchema":{"properties":{"total":{"maximum":1.50,"type":"number"}},"type":"object"}}`)}}},
		{"event type delete", `{"type":"registry","registry":"events","op":"delete","items":[{"name":"order.created"}]}`,
			&Message{Type: TypeRegistry, Registry: "events", Op: "delete", Items: map[string]json.RawMessage{
				"order.created": raw(`{"name":"order.created","topic":"order.created","delivery":["poll","push","webhook"],"inputSchema":{"type":"object"},"payloadSchema":{"type":"object"}}`)}}},
		{"event type and tool with access: canonical rule", `{"type":"registry","registry":"events","op":"put","items":[
			{"name":"incident.created","topic":"incidents","access":{"bind":{"team":"team"},"claims":{"cognito:groups":["oncall","sre"]},"scopes":["incidents:read"]}}]}`,
			&Message{Type: TypeRegistry, Registry: "events", Op: "put", Items: map[string]json.RawMessage{
				"incident.created": raw(`{"name":"incident.created","topic":"incidents","delivery":["poll","push","webhook"],"inputSchema":{"type":"object"},"payloadSchema":{"type":"object"},` +
					`"access":{"scopes":["incidents:read"],"claims":{"cognito:groups":["oncall","sre"]},"bind":{"team":"team"}}}`)}}},
		{"tool with access", `{"type":"registry","registry":"tools","op":"put","items":[{"name":"events_wait","access":{"claims":{"team":["a"]}}}]}`,
			&Message{Type: TypeRegistry, Registry: "tools", Op: "put", Items: map[string]json.RawMessage{
				"events_wait": raw(`{"name":"events_wait","access":{"claims":{"team":["a"]}}}`)}}},
		{"replace with no items clears", `{"type":"registry","registry":"prompts","op":"replace","items":[]}`,
			&Message{Type: TypeRegistry, Registry: "prompts", Op: "replace", Items: map[string]json.RawMessage{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(testARN, tc.msg)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	big := strings.Repeat("a", notify.MaxItemBytes)
	for _, tc := range []struct {
		name     string
		arn      string
		msg      string
		wantPath string
		wantErr  error  // ErrInvalidMessage when nil
		wantText string // a substring of the error
	}{
		// Whole messages.
		{"truncated JSON", testARN, `{"type":"event","topic":"orders","data":{"id":`, "", nil, "invalid JSON at byte"},
		{"truncated JSON without type", testARN, `{"AlarmName": "cpu`, "", nil, "invalid JSON"},
		{"trailing garbage after an object", testARN, `{"type":"event","topic":"t","data":1} x`, "", nil, "invalid JSON"},
		{"invalid UTF-8", testARN, "caf\xe9", "", nil, "UTF-8"},
		{"oversize plain text", testARN, big + "b", "", notify.ErrTooLarge, "more than"},
		{"oversize JSON without type", testARN, `["` + big + `"]`, "", notify.ErrTooLarge, "more than"},
		{"no topic in the ARN", "", "hello", "TopicArn", nil, "valid topic name"},
		{"ARN ends in a colon", "arn:aws:sns:us-east-1:123456789012:", "hello", "TopicArn", nil, "valid topic name"},
		{"ARN topic with a bad character", "arn:aws:sns:us-east-1:1:or/ders", "hello", "TopicArn", nil, "valid topic name"},
		{"ARN topic too long", "arn:aws:sns:us-east-1:1:" + strings.Repeat("t", 129), "hello", "TopicArn", nil, "valid topic name"},

		// Access rules: a malformed rule refuses the whole message.
		{"access empty", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"a"},{"name":"b","access":{}}]}`, "items[1].access", nil, "empty"},
		{"access unknown member", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"b","access":{"scope":["x"]}}]}`, "items[0].access", nil, `unknown member "scope"`},
		{"access claim without values", testARN, `{"type":"registry","registry":"tools","op":"put","items":[{"name":"events_wait","access":{"claims":{"team":[]}}}]}`, "items[0].access", nil, "access.claims.team: empty"},
		{"access not an object", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"b","access":["x"]}]}`, "items[0].access", nil, "JSON object"},

		// Envelopes.
		{"unknown type", testARN, `{"type":"alarm","topic":"t","data":1}`, "type", nil, `unknown message type "alarm"`},
		{"type in the wrong case", testARN, `{"type":"Event","topic":"t","data":1}`, "type", nil, `unknown message type "Event"`},
		{"type twice", testARN, `{"type":"event","type":"registry","topic":"t","data":1}`, "type", nil, "twice"},
		{"event without topic", testARN, `{"type":"event","data":1}`, "topic", nil, "required"},
		{"event with null topic", testARN, `{"type":"event","topic":null,"data":1}`, "topic", nil, "required"},
		{"event with numeric topic", testARN, `{"type":"event","topic":5,"data":1}`, "topic", nil, "want a string, got a number"},
		{"event with empty topic", testARN, `{"type":"event","topic":"","data":1}`, "topic", nil, "not a valid topic name"},
		{"event with a slash in the topic", testARN, `{"type":"event","topic":"a/b","data":1}`, "topic", nil, "not a valid topic name"},
		{"event with a 129-character topic", testARN, `{"type":"event","topic":"` + strings.Repeat("x", 129) + `","data":1}`, "topic", nil, "not a valid topic name"},
		{"event without data", testARN, `{"type":"event","topic":"t"}`, "data", nil, "required"},
		{"event with an unknown member", testARN, `{"type":"event","topic":"t","data":1,"subject":"s"}`, "subject", nil, "unknown field (known: data, topic, type)"},
		{"event member in the wrong case", testARN, `{"type":"event","Topic":"t","data":1}`, "Topic", nil, `did you mean "topic"`},
		{"oversize data", testARN, `{"type":"event","topic":"t","data":"` + big + `"}`, "data", notify.ErrTooLarge, "more than"},

		// Registry envelopes.
		{"unknown registry kind", testARN, `{"type":"registry","registry":"widgets","op":"put","items":[{"name":"w"}]}`, "registry", nil, `unknown registry "widgets"`},
		{"missing registry kind", testARN, `{"type":"registry","op":"put","items":[]}`, "registry", nil, "required"},
		{"unknown registry op", testARN, `{"type":"registry","registry":"tools","op":"upsert","items":[{"name":"events_wait"}]}`, "op", nil, `unknown op "upsert"`},
		{"missing op", testARN, `{"type":"registry","registry":"tools","items":[]}`, "op", nil, "required"},
		{"missing items", testARN, `{"type":"registry","registry":"tools","op":"replace"}`, "items", nil, "required"},
		{"null items", testARN, `{"type":"registry","registry":"tools","op":"replace","items":null}`, "items", nil, "required"},
		{"items not an array", testARN, `{"type":"registry","registry":"tools","op":"put","items":{"name":"events_wait"}}`, "items", nil, "want an array, got object"},
		{"empty items for put", testARN, `{"type":"registry","registry":"tools","op":"put","items":[]}`, "items", nil, "empty"},
		{"empty items for delete", testARN, `{"type":"registry","registry":"prompts","op":"delete","items":[]}`, "items", nil, "empty"},
		{"item not an object", testARN, `{"type":"registry","registry":"prompts","op":"delete","items":["p"]}`, "items[0]", nil, "want an object, got a string"},
		{"unknown registry member", testARN, `{"type":"registry","registry":"tools","op":"put","items":[],"hash":"x"}`, "hash", nil, "unknown field"},
		{"duplicate keys in one message", testARN, `{"type":"registry","registry":"prompts","op":"put","items":[{"name":"a"},{"name":"b"},{"name":"a"}]}`, "items[2]", nil, `duplicate key "a" (also items[0])`},
		{"oversize items", testARN, `{"type":"registry","registry":"resources","op":"put","items":[{"uri":"a:1","name":"n","text":"` + big[:notify.MaxItemBytes/2] + `"},{"uri":"a:2","name":"n","text":"` + big[:notify.MaxItemBytes/2] + `"}]}`, "items", notify.ErrTooLarge, "more than"},

		// Tools.
		{"unknown tool name", testARN, `{"type":"registry","registry":"tools","op":"put","items":[{"name":"rm_rf","enabled":true}]}`, "items[0].name", nil, `unknown tool "rm_rf"`},
		{"unknown tool name on delete", testARN, `{"type":"registry","registry":"tools","op":"delete","items":[{"name":"rm_rf"}]}`, "items[0].name", nil, `unknown tool "rm_rf"`},
		{"tool without name", testARN, `{"type":"registry","registry":"tools","op":"put","items":[{"enabled":false}]}`, "items[0].name", nil, "required"},
		{"tool enabled not a boolean", testARN, `{"type":"registry","registry":"tools","op":"put","items":[{"name":"events_wait","enabled":"no"}]}`, "items[0].enabled", nil, "want a boolean, got a string"},
		{"tool unknown field", testARN, `{"type":"registry","registry":"tools","op":"put","items":[{"name":"events_wait","disabled":true}]}`, "items[0].disabled", nil, "unknown field (known: access, description, enabled, name)"},

		// Resources.
		{"resource without uri", testARN, `{"type":"registry","registry":"resources","op":"put","items":[{"name":"n","text":"x"}]}`, "items[0].uri", nil, "required"},
		{"resource without name", testARN, `{"type":"registry","registry":"resources","op":"put","items":[{"uri":"file:///a","text":"x"}]}`, "items[0].name", nil, "required"},
		{"resource with a relative uri", testARN, `{"type":"registry","registry":"resources","op":"put","items":[{"uri":"notes.md","name":"n"}]}`, "items[0].uri", nil, "not an absolute URI"},
		{"resource with an unparsable uri", testARN, `{"type":"registry","registry":"resources","op":"put","items":[{"uri":"http://a b/%zz","name":"n"}]}`, "items[0].uri", nil, "not a URI"},
		{"resource in the events scheme", testARN, `{"type":"registry","registry":"resources","op":"put","items":[{"uri":"events://orders","name":"n"}]}`, "items[0].uri", nil, "reserved"},
		{"bad base64 blob", testARN, `{"type":"registry","registry":"resources","op":"put","items":[{"uri":"a:b","name":"n","blob":"not base64!"}]}`, "items[0].blob", nil, "not standard base64"},
		{"unpadded base64 blob", testARN, `{"type":"registry","registry":"resources","op":"put","items":[{"uri":"a:b","name":"n","blob":"aGVsbG8"}]}`, "items[0].blob", nil, "not standard base64"},
		{"text and blob", testARN, `{"type":"registry","registry":"resources","op":"put","items":[{"uri":"a:b","name":"n","text":"t","blob":"aGVsbG8="}]}`, "items[0]", nil, "both text and blob"},
		{"bad mime type", testARN, `{"type":"registry","registry":"resources","op":"put","items":[{"uri":"a:b","name":"n","mimeType":"text"}]}`, "items[0].mimeType", nil, "not a media type"},
		{"resource field in the wrong case", testARN, `{"type":"registry","registry":"resources","op":"put","items":[{"uri":"a:b","name":"n","mimetype":"text/plain"}]}`, "items[0].mimetype", nil, `did you mean "mimeType"`},
		{"duplicate resource uri", testARN, `{"type":"registry","registry":"resources","op":"delete","items":[{"uri":"a:b"},{"uri":"a:b"}]}`, "items[1]", nil, "duplicate key"},
		{"member twice in an item", testARN, `{"type":"registry","registry":"resources","op":"put","items":[{"uri":"a:b","name":"n","uri":"a:c"}]}`, "items[0].uri", nil, "twice"},

		// Event types.
		{"event type without name", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"topic":"orders"}]}`, "items[0].name", nil, "required"},
		{"event type name with a space", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"order created"}]}`, "items[0].name", nil, "not a valid event type name"},
		{"event type name too long", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"` + strings.Repeat("e", 129) + `"}]}`, "items[0].name", nil, "not a valid event type name"},
		{"event type with a bad topic", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","topic":"a/b"}]}`, "items[0].topic", nil, "not a valid topic name"},
		{"event type with an unknown delivery mode", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","delivery":["poll","sse"]}]}`, "items[0].delivery[1]", nil, `unknown delivery mode "sse"`},
		{"event type with a delivery mode twice", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","delivery":["poll","poll"]}]}`, "items[0].delivery[1]", nil, "named twice"},
		{"event type with no delivery mode", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","delivery":[]}]}`, "items[0].delivery", nil, "empty"},
		{"event type delivery not an array", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","delivery":"poll"}]}`, "items[0].delivery", nil, "want an array"},
		{"event type schema not an object", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","inputSchema":true}]}`, "items[0].inputSchema", nil, "want a JSON Schema object"},
		{"event type schema of another type", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","payloadSchema":{"type":"string"}}]}`, "items[0].payloadSchema", nil, `must be "object"`},
		{"event type schema without a type", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","inputSchema":{"properties":{}}}]}`, "items[0].inputSchema", nil, `must be "object"`},
		{"event type schema with a bad keyword value", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","inputSchema":{"type":"object","required":"a"}}]}`, "items[0].inputSchema", nil, "not a JSON Schema"},
		{"event type schema with a remote ref", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","inputSchema":{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}}]}`, "items[0].inputSchema", nil, "not a usable JSON Schema"},
		{"event type schema nested too deep", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","inputSchema":{"type":"object","x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}}]}`, "items[0].inputSchema", nil, "nests 41 deep"},
		{"event type unknown field", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","schema":{}}]}`, "items[0].schema", nil, "unknown field (known: access, delivery, description, inputSchema, name, payloadSchema, topic)"},
		{"event type field in the wrong case", testARN, `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","inputschema":{}}]}`, "items[0].inputschema", nil, `did you mean "inputSchema"`},

		// Prompts.
		{"prompt without name", testARN, `{"type":"registry","registry":"prompts","op":"put","items":[{"title":"t"}]}`, "items[0].name", nil, "required"},
		{"prompt with empty name", testARN, `{"type":"registry","registry":"prompts","op":"put","items":[{"name":""}]}`, "items[0].name", nil, "must not be empty"},
		{"prompt argument without name", testARN, `{"type":"registry","registry":"prompts","op":"put","items":[{"name":"p","arguments":[{"name":"a"},{"required":true}]}]}`, "items[0].arguments[1].name", nil, "required"},
		{"prompt argument required not a boolean", testARN, `{"type":"registry","registry":"prompts","op":"put","items":[{"name":"p","arguments":[{"name":"a","required":"yes"}]}]}`, "items[0].arguments[0].required", nil, "want a boolean"},
		{"prompt duplicate argument", testARN, `{"type":"registry","registry":"prompts","op":"put","items":[{"name":"p","arguments":[{"name":"a"},{"name":"a"}]}]}`, "items[0].arguments[1].name", nil, "duplicate argument"},
		{"prompt message with a bad role", testARN, `{"type":"registry","registry":"prompts","op":"put","items":[{"name":"p","messages":[{"role":"system","text":"x"}]}]}`, "items[0].messages[0].role", nil, `unknown role "system"`},
		{"prompt message with content instead of text", testARN, `{"type":"registry","registry":"prompts","op":"put","items":[{"name":"p","messages":[{"role":"user","content":"x"}]}]}`, "items[0].messages[0].content", nil, "unknown field (known: role, text)"},
		{"prompt messages not an array", testARN, `{"type":"registry","registry":"prompts","op":"put","items":[{"name":"p","messages":"hi"}]}`, "items[0].messages", nil, "want an array"},
		{"prompt unknown field", testARN, `{"type":"registry","registry":"prompts","op":"put","items":[{"name":"p","template":"x"}]}`, "items[0].template", nil, "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.arn, tc.msg)
			if err == nil {
				t.Fatalf("Parse succeeded with %+v, want an error", got)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error %v (%T) is not a *ParseError", err, err)
			}
			if pe.Path != tc.wantPath {
				t.Errorf("Path = %q, want %q (error: %v)", pe.Path, tc.wantPath, err)
			}
			want := tc.wantErr
			if want == nil {
				want = ErrInvalidMessage
			}
			if !errors.Is(err, want) {
				t.Errorf("error %v does not wrap %v", err, want)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not contain %q", err, tc.wantText)
			}
			if len(err.Error()) > 400 {
				t.Errorf("error is %d bytes long; it must not quote the message body", len(err.Error()))
			}
		})
	}
}

// Equal content hashes equally whatever the member order, spacing and
// nulls of the message that carried it.
func TestParseCanonicalItems(t *testing.T) {
	a, err := Parse(testARN, `{"type":"registry","registry":"tools","op":"put","items":[{"name":"events_wait","enabled":false,"description":"Waits."}]}`)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(testARN, "{\"items\" : [ {\"description\":\"Waits.\", \"enabled\" : false, \"name\":\"events_wait\"} ], \"op\":\"put\", \"registry\":\"tools\", \"type\":\"registry\"}")
	if err != nil {
		t.Fatal(err)
	}
	if ha, hb := notify.HashItems(a.Items), notify.HashItems(b.Items); ha != hb {
		t.Errorf("hashes differ: %s vs %s", ha, hb)
	}
}

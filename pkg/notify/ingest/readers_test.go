package ingest

import (
	"errors"
	"strings"
	"testing"
)

// TestRegistryRefusesWhatReadersRefuse: ingest refuses the registry items
// and events the readers would refuse or mishandle: a prompt name longer
// than prompts/get accepts, resource URIs in the server's reserved
// mcpush- namespace or with a scheme that runs code, topics "." and "..";
// the items at the edge of each rule are accepted.
func TestRegistryRefusesWhatReadersRefuse(t *testing.T) {
	prompt := func(name string) string {
		return `{"type":"registry","registry":"prompts","op":"put","items":[{"name":"` + name + `"}]}`
	}
	resource := func(uri string) string {
		return `{"type":"registry","registry":"resources","op":"put","items":[{"uri":"` + uri + `","name":"r"}]}`
	}
	event := func(topic string) string { return `{"type":"event","topic":"` + topic + `","data":1}` }
	eventType := func(topic string) string {
		return `{"type":"registry","registry":"events","op":"put","items":[{"name":"e","topic":"` + topic + `"}]}`
	}
	const arn = "arn:aws:sns:us-east-1:123456789012:orders"
	for _, tc := range []struct {
		name, arn, msg, want string
	}{
		{"prompt name of 257 bytes", arn, prompt(strings.Repeat("p", 257)), "257 bytes, more than the 256 prompts/get accepts"},
		{"mcpush-listen resource", arn, resource("mcpush-listen:task:abc"), "reserved"},
		{"MCPUSH- resource, any case", arn, resource("MCPush-x:y"), "reserved"},
		{"javascript resource", arn, resource("javascript:alert(1)"), "javascript: scheme"},
		{"JavaScript resource, any case", arn, resource("JavaScript:alert(1)"), "javascript: scheme"},
		{"vbscript resource", arn, resource("vbscript:msgbox"), "vbscript: scheme"},
		{"data resource", arn, resource("data:text/html,<script>alert(1)</script>"), "data: scheme"},
		{"topic .", arn, event("."), "not a valid topic name"},
		{"topic ..", arn, event(".."), "not a valid topic name"},
		{"topic .. from the ARN", "arn:aws:sns:us-east-1:123456789012:..", "hello", "valid topic name"},
		{"event type on topic ..", arn, eventType(".."), "topic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.arn, tc.msg)
			if !errors.Is(err, ErrInvalidMessage) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v, want ErrInvalidMessage (%s)", err, tc.want)
			}
		})
	}
	for _, ok := range []string{prompt(strings.Repeat("p", 256)), resource("file:///a.txt"), resource("https://example.com/a"),
		resource("mcp:x"), event("..a"), event("a.b"), event("...")} {
		if _, err := Parse(arn, ok); err != nil {
			t.Errorf("Parse(%.80s): %v", ok, err)
		}
	}
}

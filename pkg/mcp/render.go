package mcp

import (
	"strings"

	"github.com/mcpush/mcpush/pkg/notify"
)

// renderItem renders a registry prompt: {{name}} in a message text is
// replaced by the value of argument name. It is one pass from left to
// right: a name is the text between "{{" and the next "}}", a
// substituted value is never scanned again, and "{{" that does not start
// a known argument stays as written. So the result depends only on the
// text and the arguments, never on map order. A result whose texts add up
// to more than maxBytes is an error (CodeInvalidParams): placeholders
// cannot multiply an argument without bound.
func renderItem(p *notify.PromptItem, args map[string]string, maxBytes int) (*GetPromptResult, error) {
	res := &GetPromptResult{Description: p.Description, Messages: []*PromptMessage{}}
	budget := maxBytes
	for _, m := range p.Messages {
		text, ok := renderText(m.Text, args, budget)
		if !ok {
			return nil, Errorf(CodeInvalidParams, "invalid params: prompt %q renders to more than %d bytes with these arguments", clipText(p.Name, 128), maxBytes)
		}
		budget -= len(text)
		role := m.Role
		if role == "" {
			role = "user"
		}
		res.Messages = append(res.Messages, &PromptMessage{Role: role, Content: &TextContent{Text: text}})
	}
	return res, nil
}

// renderText substitutes the arguments in text, in one pass. It reports
// false, having built at most budget bytes, when the result would be
// longer than budget.
//
// It runs in time linear in len(text) (BenchmarkRenderLinear): the next
// "}}" is searched for once and reused by every "{{" before it, and a
// name longer than the longest argument's is never looked up (hashing it
// would cost its length at every "{{" of a text full of them).
func renderText(text string, args map[string]string, budget int) (string, bool) {
	longest := 0
	for k := range args {
		longest = max(longest, len(k))
	}
	var b strings.Builder
	write := func(s string) bool {
		if b.Len()+len(s) > budget {
			return false
		}
		b.WriteString(s)
		return true
	}
	const none = -1
	pos, closing := 0, -2 // closing: index of the next "}}" searched for (none: there is none)
	for {
		i := strings.Index(text[pos:], "{{")
		if i < 0 {
			if !write(text[pos:]) {
				return "", false
			}
			return b.String(), true
		}
		if !write(text[pos : pos+i]) {
			return "", false
		}
		start := pos + i + 2 // the name's first byte
		if closing != none && closing < start {
			closing = none
			if j := strings.Index(text[start:], "}}"); j >= 0 {
				closing = start + j
			}
		}
		if closing != none && closing-start <= longest {
			if v, ok := args[text[start:closing]]; ok {
				if !write(v) {
					return "", false
				}
				pos = closing + 2
				continue
			}
		}
		// Not a known argument: keep "{{" and look again after it.
		if !write("{{") {
			return "", false
		}
		pos = start
	}
}

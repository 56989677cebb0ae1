package mcp

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
)

func TestRenderText(t *testing.T) {
	long := strings.Repeat("k", 300)
	args := map[string]string{"a": "1", "b": "2", "a}}{{b": "X", "": "E", "n": "{{a}}", long: "L"}
	tests := []struct {
		name, text, want string
	}{
		{"plain", "hello", "hello"},
		{"one", "x={{a}}", "x=1"},
		{"repeated", "{{a}}{{a}}{{b}}", "112"},
		{"unknown kept", "{{zz}} {{a}}", "{{zz}} 1"},
		{"unclosed", "{{a", "{{a"},
		{"nested opener", "{{x{{a}}", "{{x1"},
		// A name is the text up to the next "}}": "a}}{{b" cannot be one.
		{"overlapping names", "{{a}}{{b}}", "12"},
		{"empty name", "{{}}", "E"},
		{"value not rescanned", "{{n}}", "{{a}}"},
		{"triple brace", "{{{a}}}", "{{{a}}}"},
		{"the longest name", "{{{{" + long + "}}", "{{L"},
		{"longer than any name", "{{" + long + "k}}", "{{" + long + "k}}"},
		{"one closing for many openers", "{{{{{{a}}{{a}}", "{{{{11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := renderText(tt.text, args, 1<<20)
			if !ok || got != tt.want {
				t.Errorf("renderText(%q) = %q, %v; want %q", tt.text, got, ok, tt.want)
			}
		})
	}
}

// TestRenderDeterministic (finding 1): identical calls render the same,
// whatever the map order of overlapping argument names.
func TestRenderDeterministic(t *testing.T) {
	p := &notify.PromptItem{Name: "p", Messages: []notify.PromptMessage{{Text: "{{a}}{{b}}|{{a}}}}{{b}}|{{b}}}"}}}
	args := map[string]string{"a": "A", "b": "B", "a}}{{b": "AB", "b}}": "Bx", "a}": "Ay"}
	first, err := renderItem(p, args, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		got, err := renderItem(p, args, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Fatalf("renderings differ (-first +later):\n%s", diff)
		}
	}
}

// TestRenderBound (finding 1): 200 placeholders and a large argument stop
// at the bound with -32602, having built no more than the bound.
func TestRenderBound(t *testing.T) {
	p := &notify.PromptItem{Name: "p", Messages: []notify.PromptMessage{{Text: strings.Repeat("{{a}}", 200)}, {Text: "{{a}}"}}}
	arg := strings.Repeat("x", 64<<10)
	if _, err := renderItem(p, map[string]string{"a": arg}, 1<<20); err == nil || err.(*Error).Code != CodeInvalidParams || !strings.Contains(err.Error(), "more than 1048576 bytes") {
		t.Errorf("200 x 64 KiB rendered with error %v, want -32602 naming the bound", err)
	}
	// Within the bound, across messages.
	res, err := renderItem(p, map[string]string{"a": "yy"}, 402)
	if err != nil || len(res.Messages) != 2 || res.Messages[1].Content.(*TextContent).Text != "yy" {
		t.Errorf("402-byte rendering = %+v, %v", res, err)
	}
	if _, err := renderItem(p, map[string]string{"a": "yy"}, 401); err == nil {
		t.Error("a 402-byte rendering passed a 401-byte bound")
	}
}

// FuzzRenderItem: rendering never panics, never exceeds its bound, is
// deterministic, and leaves text without "{{" unchanged.
func FuzzRenderItem(f *testing.F) {
	f.Add("hello {{name}}", "name", "world", 64)
	f.Add("{{a}}{{b}}", "a}}{{b", "x", 16)
	f.Add("{{{{a}}}}", "a", "{{a}}", 8)
	f.Add("{{", "", "", 0)
	f.Add(strings.Repeat("{{a}}", 50), "a", strings.Repeat("z", 100), 1000)
	f.Fuzz(func(t *testing.T, text, name, value string, budget int) {
		budget = max(budget, 0) % (1 << 16)
		args := map[string]string{name: value, "a": "A"}
		got, ok := renderText(text, args, budget)
		if ok && len(got) > budget {
			t.Fatalf("rendered %d bytes over a budget of %d", len(got), budget)
		}
		again, ok2 := renderText(text, args, budget)
		if got != again || ok != ok2 {
			t.Fatalf("not deterministic: %q, %v then %q, %v", got, ok, again, ok2)
		}
		if !strings.Contains(text, "{{") && len(text) <= budget && (!ok || got != text) {
			t.Fatalf("text without placeholders changed: %q -> %q, %v", text, got, ok)
		}
	})
}

// TestRenderLinear: rendering 330 KB of unclosed "{{" (or closed only
// at the end, or with names no argument has) takes about 10 times as long
// as 33 KB, not about 100 times (it was quadratic: 0.6–1.0 s of CPU per
// prompts/get of a 330 KB prompt). The fastest of 5 runs of each is
// compared, against 40, and only a 330 KB rendering slower than 250 ms
// fails, so that a busy machine does not decide (linear: 3–40 ms with
// -race; quadratic: 0.5–0.9 s, ratios 65–135).
func TestRenderLinear(t *testing.T) {
	args := map[string]string{"topic": "orders", "name": "x"}
	fastest := func(text string) time.Duration {
		best := time.Duration(1 << 62)
		for range 5 {
			start := time.Now()
			if _, ok := renderText(text, args, 1<<20); !ok {
				t.Fatal("over budget")
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	for _, tc := range []struct{ name, unit, tail string }{
		{"unclosed", "{{", ""},
		{"closed at the end", "{{", "}}"},
		{"unknown names", "{{a", "}}"},
	} {
		small := fastest(strings.Repeat(tc.unit, 33_000/len(tc.unit)) + tc.tail)
		large := fastest(strings.Repeat(tc.unit, 330_000/len(tc.unit)) + tc.tail)
		ratio := float64(large) / float64(max(small, time.Microsecond))
		t.Logf("%s: 33 KB in %v, 330 KB in %v: ratio %.1f", tc.name, small, large, ratio)
		if ratio > 40 && large > 250*time.Millisecond {
			t.Errorf("%s: 330 KB took %.0f times as long as 33 KB (%v, %v), want about 10 (linear)", tc.name, ratio, large, small)
		}
	}
}

// BenchmarkRenderLinear renders 33 KB and 330 KB of unclosed "{{" (and
// of "{{" closed only at the very end) and reports the ratio of the two
// times: about 10 when rendering is linear, about 100 when quadratic (it
// was: 0.6–1.0 s of CPU per prompts/get of a 330 KB prompt).
func BenchmarkRenderLinear(b *testing.B) {
	args := map[string]string{"topic": "orders", "name": "x"}
	for _, tc := range []struct{ name, unit, tail string }{
		{"unclosed", "{{", ""},
		{"closed at the end", "{{", "}}"},
		{"unknown names", "{{a", "}}"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			small := strings.Repeat(tc.unit, 33_000/len(tc.unit)) + tc.tail
			large := strings.Repeat(tc.unit, 330_000/len(tc.unit)) + tc.tail
			var ts, tl time.Duration
			for b.Loop() {
				start := time.Now()
				if _, ok := renderText(small, args, 1<<20); !ok {
					b.Fatal("over budget")
				}
				mid := time.Now()
				if _, ok := renderText(large, args, 1<<20); !ok {
					b.Fatal("over budget")
				}
				ts, tl = ts+mid.Sub(start), tl+time.Since(mid)
			}
			b.ReportMetric(float64(tl)/float64(ts), "ratio-330KB/33KB")
			b.ReportMetric(float64(tl)/float64(b.N)/330_000, "ns/byte-330KB")
		})
	}
}

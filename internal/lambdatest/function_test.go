package lambdatest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpush/mcpush/internal/lambdatest"
)

func TestEditFixture(t *testing.T) {
	dir := t.TempDir()
	event := `{"headers":{"accept":"*/*"},"body":"","requestContext":{"authorizer":{"iam":{"userArn":"arn:a"}},"extra":1}}`
	if err := os.WriteFile(filepath.Join(dir, "ev.json"), []byte(event), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := lambdatest.Fixture(t, dir, "ev")
	for _, tc := range []struct {
		name string
		fns  []func(map[string]any)
		want string
	}{
		{"none", nil, event},
		{"session and body", []func(map[string]any){lambdatest.WithSession("s1"), lambdatest.WithBody("{}")},
			`{"headers":{"accept":"*/*","mcp-session-id":"s1"},"body":"{}","requestContext":{"authorizer":{"iam":{"userArn":"arn:a"}},"extra":1}}`},
		{"caller", []func(map[string]any){lambdatest.All(lambdatest.WithCaller("arn:b"))},
			`{"headers":{"accept":"*/*"},"body":"","requestContext":{"authorizer":{"iam":{"userArn":"arn:b"}},"extra":1}}`},
		{"no caller", []func(map[string]any){lambdatest.WithCaller("")},
			`{"headers":{"accept":"*/*"},"body":"","requestContext":{"extra":1}}`},
	} {
		var got, want any
		if err := json.Unmarshal(lambdatest.Edit(t, ev, tc.fns...), &got); err != nil {
			t.Fatal(err)
		}
		json.Unmarshal([]byte(tc.want), &want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

package admintools

import (
	"testing"

	"github.com/mcpush/mcpush/pkg/notify"
)

// TestWhoAdmits: the admin scope (in scope or scp), or a listed IAM ARN;
// not a scope that merely contains it, another ARN, an ARN in another
// claim, no claims, or any caller when the scope is off and no ARN is
// listed.
func TestWhoAdmits(t *testing.T) {
	const ops = "arn:aws:iam::123456789012:user/ops"
	who := Who{Scope: "mcpush:admin", ARNs: []string{ops}}
	for _, tc := range []struct {
		claims notify.Claims
		want   bool
	}{
		{notify.Claims{"scope": "mcp:tools mcpush:admin"}, true},
		{notify.Claims{"scp": []any{"mcpush:admin"}}, true},
		{notify.Claims{"arn": ops}, true},
		{notify.Claims{"scope": "mcp:tools"}, false},
		{notify.Claims{"scope": "mcpush:admin2 xmcpush:admin"}, false},
		{notify.Claims{"arn": "arn:aws:iam::123456789012:user/alice"}, false},
		{notify.Claims{"sub": ops}, false},
		{notify.Claims{"arn": []any{ops}}, false},
		{nil, false},
	} {
		if got := who.Admits(tc.claims); got != tc.want {
			t.Errorf("Admits(%v) = %v, want %v", tc.claims, got, tc.want)
		}
	}
	if (Who{}).Admits(notify.Claims{"scope": "mcpush:admin", "arn": ops}) {
		t.Error("a Who with no scope and no ARN admits a caller")
	}
	if (Who{}).Admits(notify.Claims{"scope": ""}) {
		t.Error("an empty scope admits")
	}
}

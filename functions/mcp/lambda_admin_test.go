package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/testenv"
)

// TestLambdaAdminIAM: with MCPUSH_AUTH=iam (the Function URL's AWS_IAM),
// an IAM caller whose ARN is in MCPUSH_ADMIN_ARNS sees and calls the
// admin tools; another signer (alice) sees none, and her call of one is
// answered as for an unknown tool.
func TestLambdaAdminIAM(t *testing.T) {
	f := lambdatest.StartFunction(t, testenv.BuildBinary(t, "./functions/mcp"),
		"MCPUSH_LAMBDA_MODE=buffered", "MCPUSH_STORE=sqlite:"+filepath.Join(t.TempDir(), "mcpush.db"),
		"MCPUSH_STATE_KEYS=lambda-admin-key-0123456789abcdef0123456789", "MCPUSH_ADMIN_ARNS="+bob)
	call := func(caller, method, params string) string {
		t.Helper()
		ev := lambdatest.Edit(t, fixture(t, "mcp-tools-call"), lambdatest.All(lambdatest.WithCaller(caller),
			lambdatest.WithBody(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{`+params+`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`),
			func(ev map[string]any) {
				h := ev["headers"].(map[string]any)
				delete(h, "mcp-session-id")
				h["mcp-protocol-version"], h["mcp-method"] = "2026-07-28", method
				if method == "tools/call" {
					name := params[strings.Index(params, `"name":"`)+8:]
					h["mcp-name"] = name[:strings.Index(name, `"`)]
				}
			}))
		_, hr := f.Call(t, ev, &lambdatest.InvokeOptions{Timeout: 30 * time.Second})
		if hr.StatusCode != http.StatusOK {
			t.Fatalf("%s as %s: %d %s", method, caller, hr.StatusCode, hr.Body)
		}
		return string(hr.Body)
	}
	if got := call(alice, "tools/list", ""); strings.Contains(got, "admin_") || !strings.Contains(got, "events_recent") {
		t.Errorf("alice's tools/list: %s", got)
	}
	if got := call(bob, "tools/list", ""); !strings.Contains(got, `"admin_webhooks_list"`) || !strings.Contains(got, `"admin_webhook_replay"`) {
		t.Errorf("the admin's tools/list: %s", got)
	}
	if got := call(alice, "tools/call", `"name":"admin_webhooks_counts","arguments":{},`); !strings.Contains(got, `unknown tool`) {
		t.Errorf("alice's admin_webhooks_counts: %s", got)
	}
	if got := call(bob, "tools/call", `"name":"admin_webhooks_counts","arguments":{},`); !strings.Contains(got, `"types":{}`) || strings.Contains(got, `"isError":true`) {
		t.Errorf("the admin's admin_webhooks_counts: %s", got)
	}
}

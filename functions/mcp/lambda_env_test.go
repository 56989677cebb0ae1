package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/testenv"
)

// TestLambdaEnvBothMains: the variables both mains read (the store, the
// state keys, the webhook origins) are read the same way by each, through
// package envconfig: the same bad value fails both at init with the same
// message, which names the variable, the value (a key's never) and what
// it accepts. Both read every variable before they open the store: with
// the store's DynamoDB endpoint a closed port, a bad key is still the
// init error (sns-ingest reported the store's). A variable only the MCP
// server reads is printed the same way (not wrapped as "serve: bad
// option"), as docs/configuration.md shows it.
func TestLambdaEnvBothMains(t *testing.T) {
	bins := map[string]string{
		"mcp":        testenv.BuildBinary(t, "./functions/mcp"),
		"sns-ingest": testenv.BuildBinary(t, "./functions/sns-ingest"),
	}
	key := strings.Repeat("k", 32)
	// A DynamoDB store on a closed port: opening it fails, after the
	// SDK's retries.
	unreachable := []string{"MCPUSH_STORE=dynamodb:mcpush",
		"AWS_ENDPOINT_URL_DYNAMODB=" + fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t)),
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test"}
	docs, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string // with MCPUSH_STORE unless the case is about it
		want string
		only string // the one main that reads the variable
		doc  bool   // docs/configuration.md shows this message
	}{
		{"no store", nil, `MCPUSH_STORE is not set: want dynamodb:TABLE in Lambda (template.yaml sets it)`, "", false},
		{"create table", []string{"MCPUSH_CREATE_TABLE=yes"}, `MCPUSH_CREATE_TABLE="yes": want 1 (create a missing DynamoDB table) or 0`, "", false},
		{"feed shards", []string{"MCPUSH_FEED_SHARDS=0"}, `MCPUSH_FEED_SHARDS="0": want an integer from 1 to 512 (every process on one table must use the same)`, "", false},
		{"short key", []string{"MCPUSH_STATE_KEYS=short-secret"}, `MCPUSH_STATE_KEYS: want comma-separated keys of at least 32 characters each (a requestState key must be at least 32 characters)`, "", false},
		{"keys and secret", []string{"MCPUSH_STATE_KEYS=" + key, "MCPUSH_STATE_KEYS_SECRET=mcpush-keys"}, `MCPUSH_STATE_KEYS: want unset when MCPUSH_STATE_KEYS_SECRET is set (set one of them, not both)`, "", false},
		{"webhook allow", []string{"MCPUSH_WEBHOOK_ALLOW=ftp://x"}, `MCPUSH_WEBHOOK_ALLOW="ftp://x": want comma-separated origins such as http://127.0.0.1:9000 (scheme "ftp" is not http or https)`, "", false},
		{"short key, store unreachable", append([]string{"MCPUSH_STATE_KEYS=short-secret"}, unreachable...), `MCPUSH_STATE_KEYS: want comma-separated keys of at least 32 characters each (a requestState key must be at least 32 characters)`, "", false},
		{"webhook allow, store unreachable", append([]string{"MCPUSH_WEBHOOK_ALLOW=ftp://x"}, unreachable...), `MCPUSH_WEBHOOK_ALLOW="ftp://x": want comma-separated origins such as http://127.0.0.1:9000 (scheme "ftp" is not http or https)`, "", false},
		{"lambda mode", []string{"MCPUSH_LAMBDA_MODE=websocket"}, `MCPUSH_LAMBDA_MODE="websocket": want "stream" or "buffered"`, "mcp", true},
		{"admin arns", []string{"MCPUSH_ADMIN_ARNS=ops"}, `MCPUSH_ADMIN_ARNS="ops": want comma-separated IAM ARNs (arn:aws:iam::123456789012:user/ops, arn:aws:sts::123456789012:assumed-role/Ops/alice), without wildcards`, "mcp", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.doc && !strings.Contains(string(docs), "`"+tc.want+"`") {
				t.Errorf("docs/configuration.md does not show %s", tc.want)
			}
			for name, bin := range bins {
				if tc.only != "" && name != tc.only {
					continue
				}
				env := tc.env
				if tc.name != "no store" && !strings.Contains(strings.Join(env, " "), "MCPUSH_STORE=") {
					env = append(env, "MCPUSH_STORE=sqlite:"+filepath.Join(t.TempDir(), "mcpush.db"))
				}
				f := lambdatest.StartFunction(t, bin, env...)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				rep, err := f.API.InitError(ctx)
				cancel()
				if err != nil {
					t.Errorf("%s: no init error: %v", name, err)
					continue
				}
				if rep.Message != tc.want {
					t.Errorf("%s: init error %q\nwant %q", name, rep.Message, tc.want)
				}
				if strings.Contains(rep.Message, "short-secret") || strings.Contains(rep.Message, key) {
					t.Errorf("%s: the init error shows a key", name)
				}
			}
		})
	}
}

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/testenv"
)

// with2026 turns a Function URL event into a 2026-era request of method
// (no session; the version header and Mcp-Method set; Mcp-Name when name
// is not empty) with body.
func with2026(method, name, body string) func(map[string]any) {
	return func(ev map[string]any) {
		h := ev["headers"].(map[string]any)
		delete(h, "mcp-session-id")
		h["mcp-protocol-version"] = "2026-07-28"
		h["mcp-method"] = method
		if name != "" {
			h["mcp-name"] = name
		}
		ev["body"] = body
	}
}

// TestLambdaStateKeysSecret runs the function with MCPUSH_STATE_KEYS_SECRET
// naming a Secrets Manager secret (moto_server's), as template.yaml does:
// it reads the secret at init and serves 2026-era requests, verifying
// requestState with the keys; a secret it cannot read is an init error.
func TestLambdaStateKeysSecret(t *testing.T) {
	endpoint := moto.Start(t)
	sm := secretsmanager.New(secretsmanager.Options{
		Region:       moto.Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
	})
	out, err := sm.CreateSecret(t.Context(), &secretsmanager.CreateSecretInput{
		Name:         aws.String("mcpush-lambda-" + t.Name()),
		SecretString: aws.String("generated-at-deploy-0123456789abcdefghijklmnopqrstuvwxyz"),
	})
	if err != nil {
		t.Fatal(err)
	}
	bin := testenv.BuildBinary(t, "./functions/mcp")
	awsEnv := []string{"AWS_ENDPOINT_URL_SECRETS_MANAGER=" + endpoint, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"MCPUSH_AUTH=none", "MCPUSH_STORE=sqlite:" + filepath.Join(t.TempDir(), "mcpush.db")}

	t.Run("read at init", func(t *testing.T) {
		f := lambdatest.StartFunction(t, bin, append(awsEnv, "MCPUSH_STATE_KEYS_SECRET="+*out.ARN)...)
		inv := &lambdatest.InvokeOptions{Streaming: true, Timeout: 30 * time.Second}
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
		_, hr := f.Call(t, lambdatest.Edit(t, fixture(t, "mcp-tools-call"), lambdatest.WithCaller(""),
			with2026("server/discover", "", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`)), inv)
		var res struct {
			Result struct {
				SupportedVersions []string `json:"supportedVersions"`
			} `json:"result"`
		}
		if hr.StatusCode != http.StatusOK || json.Unmarshal(hr.Body, &res) != nil || len(res.Result.SupportedVersions) == 0 || res.Result.SupportedVersions[0] != "2026-07-28" {
			t.Fatalf("server/discover: %d %s", hr.StatusCode, hr.Body)
		}
		_, hr = f.Call(t, lambdatest.Edit(t, fixture(t, "mcp-tools-call"), lambdatest.WithCaller(""),
			with2026("tools/call", "events_recent", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"events_recent","arguments":{"topic":"t"},"requestState":"eyJ2IjoxfQ.AAAA",`+meta+`}}`)), inv)
		if hr.StatusCode != http.StatusOK || !strings.Contains(string(hr.Body), "-32602") || !strings.Contains(string(hr.Body), "signature") {
			t.Errorf("forged requestState: %d %s, want -32602 (signature)", hr.StatusCode, hr.Body)
		}
	})
	t.Run("unreadable secret", func(t *testing.T) {
		f := lambdatest.StartFunction(t, bin, append(awsEnv, "MCPUSH_STATE_KEYS_SECRET=mcpush-no-such-secret")...)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rep, err := f.API.InitError(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(rep.Message, "MCPUSH_STATE_KEYS_SECRET") {
			t.Errorf("init error %+v, want one naming MCPUSH_STATE_KEYS_SECRET", rep)
		}
	})
}

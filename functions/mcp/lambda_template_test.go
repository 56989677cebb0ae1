package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/pkg/serve"
)

// Checks of the deployment files around the function: template.yaml,
// the Makefile's SAM targets, the events/*.json fixtures and the size of
// the Lambda binaries.

// TestTemplateLint runs cfn-lint, which applies the SAM transform.
func TestTemplateLint(t *testing.T) {
	cfnLint, err := exec.LookPath("cfn-lint")
	testenv.RequireComponent(t, "cfn-lint", err)
	cmd := exec.Command(cfnLint, "template.yaml")
	cmd.Dir = testenv.RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cfn-lint template.yaml: %v\n%s", err, out)
	}
}

// TestTemplateWiring checks that template.yaml sets the environment main
// reads in Lambda, and that sam build finds its Makefile targets.
func TestTemplateWiring(t *testing.T) {
	root := testenv.RepoRoot(t)
	tpl, err := os.ReadFile(filepath.Join(root, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"MCPUSH_STORE: !Sub dynamodb:${Table}",
		"MCPUSH_AUTH: !If [IamAuth, " + string(serve.AuthIAM) + ", !If [OAuth, " + string(serve.AuthOAuth) + ", " + string(serve.AuthNone) + "]]",
		"AuthType: !If [IamAuth, AWS_IAM, NONE]",
		"MCPUSH_OAUTH_ISSUER: !If",
		"MCPUSH_OAUTH_SCOPES: !If [CreateUserPool, mcpush/mcp, !Ref OAuthScopes]",
		"MCPUSH_OAUTH_CLIENT_IDS: !If",
		"MCPUSH_RESOURCE_URL: !Ref ResourceUrl",
		"Type: AWS::Cognito::UserPoolResourceServer",
		"AllowedOAuthFlows: [client_credentials]",
		"AllowedOAuthFlows: [code]",
		"MCPUSH_LAMBDA_MODE: !If [Streaming, " + string(serve.ModeStream) + ", " + string(serve.ModeBuffered) + "]",
		"Runtime: provided.al2023",
		"Architectures: [arm64]",
		"Handler: bootstrap",
		"AttributeName: expiresAt",
		"MCPUSH_STATE_KEYS_SECRET: !Ref StateKeySecret",
		"Action: secretsmanager:GetSecretValue\n              Resource: !Ref StateKeySecret",
		"Type: AWS::SecretsManager::Secret",
		"MCPUSH_DELIVERY_QUEUE_URL: !Ref DeliveryQueue",
		"FunctionResponseTypes: [ReportBatchItemFailures]",
		"deadLetterTargetArn: !GetAtt DeliveryDeadLetterQueue.Arn",
	} {
		if !strings.Contains(string(tpl), want) {
			t.Errorf("template.yaml lacks %q", want)
		}
	}
	// Both functions check the table at start-up (storeconfig): without
	// DescribeTable every init would fail with AccessDenied.
	if n := strings.Count(string(tpl), "- dynamodb:DescribeTable"); n != 4 {
		t.Errorf("template.yaml grants dynamodb:DescribeTable %d times, want 4 (every function)", n)
	}
	for _, fn := range []string{"McpFunction", "IngestFunction", "McpManagedFunction", "DeliveryFunction"} {
		if !strings.Contains(string(tpl), "  "+fn+":\n    Type: AWS::Serverless::Function\n    Metadata:\n      BuildMethod: makefile\n") {
			t.Errorf("template.yaml: %s is not a BuildMethod: makefile function", fn)
		}
		if !strings.Contains(string(mk), "\nbuild-"+fn+":\n\t$(LAMBDA_GO) -o $(ARTIFACTS_DIR)/bootstrap ") {
			t.Errorf("Makefile lacks the target build-%s that sam build runs", fn)
		}
	}
}

// yamlBlock returns the lines of the YAML mapping entry "key:" at indent
// spaces in text, up to the next entry at that indent or less, without
// comment lines; "" if there is none.
func yamlBlock(text string, indent int, key string) string {
	lines := strings.Split(text, "\n")
	head := strings.Repeat(" ", indent) + key + ":"
	var out []string
	for i, line := range lines {
		if line != head && !strings.HasPrefix(line, head+" ") {
			continue
		}
		out = append(out, line)
		for _, l := range lines[i+1:] {
			trimmed := strings.TrimSpace(l)
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}
			if len(l)-len(strings.TrimLeft(l, " ")) <= indent {
				break
			}
			out = append(out, l)
		}
		break
	}
	return strings.Join(out, "\n")
}

// TestTemplateManagedFunction: ComputeMode=ManagedInstances runs the MCP
// server as McpManagedFunction on a capacity provider, a second function
// because SAM takes no Fn::If around CapacityProviderConfig. It must serve
// exactly what McpFunction serves: the same environment, Function URL and
// permissions. (A change to McpFunction's fails here until it is made to
// McpManagedFunction too.)
func TestTemplateManagedFunction(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tpl := string(b)
	onDemand, managed := yamlBlock(tpl, 2, "McpFunction"), yamlBlock(tpl, 2, "McpManagedFunction")
	if onDemand == "" || managed == "" {
		t.Fatal("template.yaml lacks McpFunction or McpManagedFunction")
	}
	for _, key := range []string{"Environment", "FunctionUrlConfig", "Policies", "Timeout", "CodeUri"} {
		want, got := yamlBlock(onDemand, 6, key), yamlBlock(managed, 6, key)
		if want == "" || got != want {
			t.Errorf("McpManagedFunction's %s differs from McpFunction's:\n%s\nwant:\n%s", key, got, want)
		}
	}
	for _, want := range []string{
		"    Condition: ManagedInstances\n",
		"        Arn: !GetAtt McpCapacityProvider.Arn\n",
		"        PerExecutionEnvironmentMaxConcurrency: !Ref PerExecutionEnvironmentMaxConcurrency\n",
	} {
		if !strings.Contains(managed, want) {
			t.Errorf("McpManagedFunction lacks %q", want)
		}
	}
	provider := yamlBlock(tpl, 2, "McpCapacityProvider")
	for _, want := range []string{
		"    Type: AWS::Serverless::CapacityProvider\n",
		"        SubnetIds: !Ref SubnetIds\n",
		"        SecurityGroupIds: !Ref SecurityGroupIds\n",
		"        Architectures: [arm64]\n",
	} {
		if !strings.Contains(provider+"\n", want) {
			t.Errorf("McpCapacityProvider lacks %q", want)
		}
	}
	// Both McpFunction's and McpManagedFunction's public-URL permissions.
	for _, fn := range []string{"McpFunction", "McpManagedFunction"} {
		for _, perm := range []string{fn + "UrlPublicInvokeUrl", fn + "UrlPublicInvoke"} {
			if !strings.Contains(yamlBlock(tpl, 2, perm), "FunctionName: !Ref "+fn+"\n") {
				t.Errorf("template.yaml lacks %s for %s", perm, fn)
			}
		}
	}
}

// TestEventFixtures decodes every events/*.json into its aws-lambda-go
// type and back: what sam local invoke sends is what the functions read.
func TestEventFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(t), "events", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var ev any
			switch {
			case strings.HasPrefix(name, "mcp-"):
				ev = new(events.LambdaFunctionURLRequest)
			case strings.HasPrefix(name, "sns-"):
				ev = new(events.SNSEvent)
			default:
				t.Fatalf("fixture %s: name it mcp-* (Function URL) or sns-* (SNS)", name)
			}
			if err := json.Unmarshal(data, ev); err != nil {
				t.Fatal(err)
			}
			again := reflect.New(reflect.TypeOf(ev).Elem()).Interface()
			b, _ := json.Marshal(ev)
			if err := json.Unmarshal(b, again); err != nil || !reflect.DeepEqual(ev, again) {
				t.Errorf("round trip changed the event: %v", err)
			}
			switch ev := ev.(type) {
			case *events.LambdaFunctionURLRequest:
				if ev.RawPath != "/mcp" || ev.RequestContext.Authorizer == nil || ev.RequestContext.Authorizer.IAM.UserARN != alice {
					t.Errorf("want a signed (AWS_IAM) request to /mcp: %+v", ev.RequestContext)
				}
				if ev.Body != "" && !json.Valid([]byte(ev.Body)) {
					t.Errorf("body is not JSON: %s", ev.Body)
				}
			case *events.SNSEvent:
				for _, r := range ev.Records {
					if r.SNS.MessageID == "" || r.SNS.TopicArn == "" || r.EventSource != "aws:sns" {
						t.Errorf("incomplete record %+v", r)
					}
				}
			}
		})
	}
}

// maxBootstrapSize is the budget of one Lambda binary: 15 MB, read
// strictly (10^6 bytes), which is less than 15 MiB.
const maxBootstrapSize = 15_000_000

// TestBootstrapSize builds both functions exactly as `make build` and
// `sam build` do (linux/arm64, lambda.norpc, stripped) and checks their
// size. The flags must stay those of LAMBDA_GO in the Makefile (the
// nosqlite tag leaves the SQLite store out of Lambda builds). Skipped
// with -short.
func TestBootstrapSize(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips building two linux/arm64 binaries")
	}
	root := testenv.RepoRoot(t)
	dir := t.TempDir()
	for _, pkg := range []string{"mcp", "sns-ingest"} {
		out := filepath.Join(dir, pkg, "bootstrap")
		cmd := exec.Command("go", "build", "-tags", "lambda.norpc,nosqlite", "-trimpath", "-ldflags=-s -w", "-o", out, "./functions/"+pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", pkg, err, b)
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("functions/%s bootstrap: %d bytes (%.1f MB)", pkg, fi.Size(), float64(fi.Size())/1e6)
		if fi.Size() > maxBootstrapSize {
			t.Errorf("functions/%s bootstrap is %d bytes, over the %d-byte budget", pkg, fi.Size(), maxBootstrapSize)
		}
	}
}

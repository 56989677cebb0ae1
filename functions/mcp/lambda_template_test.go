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
		"MCPUSH_AUTH: !If [IamAuth, " + serve.AuthIAM + ", " + serve.AuthNone + "]",
		"MCPUSH_LAMBDA_MODE: !If [Streaming, " + serve.ModeStream + ", " + serve.ModeBuffered + "]",
		"Runtime: provided.al2023",
		"Architectures: [arm64]",
		"Handler: bootstrap",
		"AttributeName: expiresAt",
		"MCPUSH_STATE_KEYS_SECRET: !Ref StateKeySecret",
		"Action: secretsmanager:GetSecretValue\n              Resource: !Ref StateKeySecret",
		"Type: AWS::SecretsManager::Secret",
		// ComputeType ManagedInstances: a capacity provider in the given
		// subnets, and the MCP function on it.
		"Type: AWS::Serverless::CapacityProvider",
		"SubnetIds: !Ref SubnetIds",
		"SecurityGroupIds: [!Ref SecurityGroupId]",
		"PerExecutionEnvironmentMaxConcurrency: !Ref PerEnvironmentMaxConcurrency",
	} {
		if !strings.Contains(string(tpl), want) {
			t.Errorf("template.yaml lacks %q", want)
		}
	}
	for _, fn := range []string{"McpFunction", "McpManagedFunction", "IngestFunction"} {
		if !strings.Contains(string(tpl), "  "+fn+":\n    Type: AWS::Serverless::Function\n    Metadata:\n      BuildMethod: makefile\n") {
			t.Errorf("template.yaml: %s is not a BuildMethod: makefile function", fn)
		}
		if !strings.Contains(string(mk), "\nbuild-"+fn+":\n\t$(LAMBDA_GO) -o $(ARTIFACTS_DIR)/bootstrap ") {
			t.Errorf("Makefile lacks the target build-%s that sam build runs", fn)
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

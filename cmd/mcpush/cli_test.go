package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	moto.Stop()
	os.Exit(code)
}

type countIn struct {
	Steps int    `json:"steps" jsonschema:"how many progress steps"`
	Label string `json:"label,omitempty"`
}

type countOut struct {
	Counted int    `json:"counted"`
	Label   string `json:"label"`
}

// progressGap spaces progress reports beyond the server's 100 ms rate
// limit, so that every one of them is sent.
const progressGap = 150 * time.Millisecond

// newTestServer serves a real mcpush server (SQLite store) over HTTP with
// a tool "count" that reports steps progress notifications, 1..steps of
// steps, then returns structured content.
func newTestServer(t *testing.T) string {
	t.Helper()
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "cli-test", Version: "1"}, store, &mcp.ServerOptions{PollInterval: 20 * time.Millisecond})
	mcp.AddTool(srv, &mcp.Tool{Name: "count", Description: "counts to steps\nreporting progress"}, func(ctx context.Context, req *mcp.CallToolRequest, in countIn) (*mcp.CallToolResult, countOut, error) {
		for i := 1; i <= in.Steps; i++ {
			req.Session.NotifyProgress(ctx, float64(i), float64(in.Steps), fmt.Sprintf("step %d", i))
			time.Sleep(progressGap)
		}
		return nil, countOut{Counted: in.Steps, Label: in.Label}, nil
	})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
	return ts.URL
}

func testEnv(url string) (*env, *testutil.LockedBuffer, *testutil.LockedBuffer) {
	out, errb := &testutil.LockedBuffer{}, &testutil.LockedBuffer{}
	return &env{
		stdout: out, stderr: errb, url: url, width: func() int { return 0 },
		awsConfig: func(ctx context.Context, region string) (aws.Config, error) {
			return aws.Config{Region: region, Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
			})}, nil
		},
	}, out, errb
}

func TestTools(t *testing.T) {
	url := newTestServer(t)
	e, out, errb := testEnv(url)
	if code := run(t.Context(), []string{"tools"}, e); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if diff := cmp.Diff("count\tcounts to steps\n", out.String()); diff != "" {
		t.Errorf("tools output (-want +got):\n%s", diff)
	}
}

// TestCallProgressLines: off a terminal, each progress notification is
// one line on stderr, in order, and the structured content is printed as
// JSON on stdout; key=value is typed by the input schema.
func TestCallProgressLines(t *testing.T) {
	url := newTestServer(t)
	e, out, errb := testEnv("")
	code := run(t.Context(), []string{"--url", url, "call", "count", "steps=4", "label=007"}, e)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var got countOut
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatalf("stdout is not the structured content: %q: %v", out.String(), err)
	}
	if diff := cmp.Diff(countOut{Counted: 4, Label: "007"}, got); diff != "" {
		t.Errorf("structured content (-want +got):\n%s", diff)
	}
	want := "progress: 1/4 (25%) step 1\nprogress: 2/4 (50%) step 2\nprogress: 3/4 (75%) step 3\nprogress: 4/4 (100%) step 4\n"
	if diff := cmp.Diff(want, errb.String()); diff != "" {
		t.Errorf("progress lines (-want +got):\n%s", diff)
	}
}

func TestCallErrors(t *testing.T) {
	url := newTestServer(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no name", []string{"--url", url, "call"}, 2, "call needs a tool name"},
		{"bad arg", []string{"--url", url, "call", "count", "steps"}, 2, `want key=value`},
		{"bad json", []string{"--url", url, "call", "count", "steps:={"}, 2, "is not JSON"},
		{"tool error", []string{"--url", url, "call", "count", "steps=x"}, 1, "invalid arguments"},
		{"unknown tool", []string{"--url", url, "call", "nope"}, 1, "nope"},
		{"unknown command", []string{"--url", url, "frobnicate"}, 2, "unknown command"},
		{"bad header", []string{"--header", "nocolon", "tools"}, 2, "want 'Name: value'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _, errb := testEnv("")
			if code := run(t.Context(), tc.args, e); code != tc.code || !strings.Contains(errb.String(), tc.msg) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errb.String(), tc.code, tc.msg)
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	schema := &inputSchema{}
	json.Unmarshal([]byte(`{"properties":{"s":{"type":"string"},"n":{"type":"integer"},"o":{"type":"object"}}}`), schema)
	for _, tc := range []struct {
		args   []string
		schema *inputSchema
		want   map[string]any
		err    bool
	}{
		{[]string{"s=12", "n=12", "o={\"a\":1}"}, schema, map[string]any{"s": "12", "n": 12.0, "o": map[string]any{"a": 1.0}}, false},
		{[]string{"s:=12"}, schema, map[string]any{"s": 12.0}, false},
		{[]string{"x=true", "y=hello"}, nil, map[string]any{"x": true, "y": "hello"}, false},
		{[]string{"unknown=5"}, schema, map[string]any{"unknown": "5"}, false},
		{[]string{"a=1", "a=2"}, nil, nil, true},
		{[]string{"=1"}, nil, nil, true},
		{[]string{"url=http://x?a=b"}, nil, map[string]any{"url": "http://x?a=b"}, false},
	} {
		got, err := parseArgs(tc.args, tc.schema)
		if (err != nil) != tc.err {
			t.Errorf("parseArgs(%q): error %v, want error %v", tc.args, err, tc.err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); !tc.err && diff != "" {
			t.Errorf("parseArgs(%q) (-want +got):\n%s", tc.args, diff)
		}
	}
}

func TestRegionOfARN(t *testing.T) {
	for arn, want := range map[string]string{
		"arn:aws:sns:eu-west-1:123456789012:orders": "eu-west-1",
		"arn:aws:sns:us-east-1:123456789012:a:b":    "us-east-1",
		"orders":                                    "",
		"arn:aws:sns":                               "",
	} {
		if got := regionOfARN(arn); got != want {
			t.Errorf("regionOfARN(%q) = %q, want %q", arn, got, want)
		}
	}
}

// TestSigV4: with --sigv4 every request carries a SigV4 Authorization
// for the lambda service in the region, over the hash of its body.
func TestSigV4(t *testing.T) {
	url := newTestServer(t)
	var mu sync.Mutex
	var auths []string
	e, out, errb := testEnv(url)
	e.httpTransport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization")+" sha="+r.Header.Get("X-Amz-Content-Sha256"))
		mu.Unlock()
		return http.DefaultTransport.RoundTrip(r)
	})
	if code := run(t.Context(), []string{"--sigv4", "--region", "eu-west-1", "tools"}, e); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(out.String(), "count") {
		t.Errorf("tools output %q", out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auths) < 2 {
		t.Fatalf("%d requests", len(auths))
	}
	for _, a := range auths {
		if !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=test/") || !strings.Contains(a, "/eu-west-1/lambda/aws4_request") ||
			!strings.Contains(a, "SignedHeaders=") || !strings.Contains(a, "Signature=") || strings.HasSuffix(a, "sha=") {
			t.Errorf("request not signed for lambda in eu-west-1: %q", a)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestPublishMoto publishes through moto_server's SNS API to a topic with
// an HTTP subscription (this test's server), which receives the message
// with the MessageId the CLI printed.
func TestPublishMoto(t *testing.T) {
	endpoint := moto.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	e, out, errb := testEnv("")
	cfg, _ := e.awsConfig(ctx, moto.Region)
	client := sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = aws.String(endpoint) })
	topic, err := client.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("cli-publish-" + strconv.FormatInt(time.Now().UnixNano(), 36))})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan map[string]string, 4)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]string
		json.NewDecoder(r.Body).Decode(&m)
		got <- m
	}))
	defer hs.Close()
	if _, err := client.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("http"), Endpoint: aws.String(hs.URL)}); err != nil {
		t.Fatal(err)
	}
	// moto may confirm the subscription with a request first.
	msg := `{"type":"event","topic":"orders","data":{"id":42}}`
	code := run(ctx, []string{"publish", "--topic-arn", aws.ToString(topic.TopicArn), "--message", msg, "--endpoint-url", endpoint}, e)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var printed struct {
		MessageID string `json:"messageId"`
	}
	if err := json.Unmarshal([]byte(out.String()), &printed); err != nil || printed.MessageID == "" {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	for {
		select {
		case m := <-got:
			if m["Type"] != "Notification" {
				continue
			}
			if m["MessageId"] != printed.MessageID || m["Message"] != msg || m["TopicArn"] != aws.ToString(topic.TopicArn) {
				t.Errorf("delivered %v; want message id %s, message %s", m, printed.MessageID, msg)
			}
			return
		case <-ctx.Done():
			t.Fatal("moto delivered nothing to the HTTP subscription")
		}
	}
}

func TestPublishUsage(t *testing.T) {
	e, _, errb := testEnv("")
	if code := run(t.Context(), []string{"publish", "--message", "m"}, e); code != 2 || !strings.Contains(errb.String(), "--topic-arn") {
		t.Errorf("exit %d, stderr %q", code, errb)
	}
}

func TestProtocolFlag(t *testing.T) {
	url := newTestServer(t)
	for _, tc := range []struct {
		mode string
		code int
	}{{"2025", 0}, {"auto", 0}, {"1999", 2}} {
		e, out, errb := testEnv(url)
		if code := run(t.Context(), []string{"--protocol", tc.mode, "tools"}, e); code != tc.code {
			t.Errorf("--protocol %s: exit %d, want %d: %s", tc.mode, code, tc.code, errb)
		}
		if tc.code == 0 && !strings.Contains(out.String(), "count") {
			t.Errorf("--protocol %s: output %q", tc.mode, out.String())
		}
	}
}

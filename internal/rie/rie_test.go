//go:build linux

package rie

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/mcpush/mcpush/internal/esm"
	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/oauthtest"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// These tests run the functions' production builds (linux, the host's
// architecture, lambda.norpc,nosqlite) under aws-lambda-rie, invoked
// through its invoke API with the events of testdata/, which have the
// shapes `sam local generate-event` writes (SAM CLI's templates in
// samcli/lib/generated_sample_events/events/): sns notification,
// apigateway http-api-proxy (payload 2.0, which a Function URL sends too;
// the body base64-encoded as SAM encodes it), cloudwatch scheduled-event
// and sqs receive-message; with events of moto's SQS queue that
// internal/esm, the event-source mapping's fake, builds in that shape; and
// with the repository's events/ fixtures of `sam
// local invoke -e`. The store is DynamoDB (moto_server): nosqlite builds
// have no SQLite. MCP runs mostly in buffered mode: the emulator does not
// stream responses, and answers a stream-mode function only once it has
// ended (functions/mcp's tests cover streaming against lambdatest).

func TestMain(m *testing.M) {
	code := m.Run()
	moto.Stop()
	os.Exit(code)
}

const (
	alice = "arn:aws:iam::123456789012:user/alice" // the signer in the IAM fixture
	bob   = "arn:aws:sts::123456789012:assumed-role/ops/bob"
)

// event reads testdata/NAME.json.
func event(t testing.TB, name string) []byte {
	t.Helper()
	return lambdatest.Fixture(t, "testdata", name)
}

// repoEvent reads the repository's events/NAME.json, the fixtures of
// `sam local invoke -e` (docs/lambda.md's Local invoke).
func repoEvent(t testing.TB, name string) []byte {
	t.Helper()
	return lambdatest.Fixture(t, filepath.Join(testenv.RepoRoot(t), "events"), name)
}

// withBody sets an HTTP event's body, base64-encoded as in the fixtures.
func withBody(body string) func(map[string]any) {
	return func(ev map[string]any) { ev["body"] = base64.StdEncoding.EncodeToString([]byte(body)) }
}

// withHeader sets an HTTP event's header (names are lower case in
// payload 2.0).
func withHeader(name, value string) func(map[string]any) {
	return func(ev map[string]any) { ev["headers"].(map[string]any)[strings.ToLower(name)] = value }
}

// httpResponse decodes a buffered-mode answer: the payload 2.0 response
// document the function returned.
func httpResponse(t testing.TB, r Result) events.APIGatewayV2HTTPResponse {
	t.Helper()
	var resp events.APIGatewayV2HTTPResponse
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &resp) != nil || resp.StatusCode == 0 {
		t.Fatalf("invoke API answered %d %s; want 200 with an HTTP response document", r.Status, r.Body)
	}
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body = string(b)
	}
	return resp
}

// header returns a response header, whatever its case.
func header(resp events.APIGatewayV2HTTPResponse, name string) string {
	for k, v := range resp.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// emulatorTest starts an emulator test: parallel, and skipped with
// -short (as the other tests that start processes and moto_server are).
func emulatorTest(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the emulator tests (processes, moto_server)")
	}
	t.Parallel()
}

var tableSeq atomic.Int64

// dynamoEnv creates a fresh table on the shared moto_server and returns
// it and the functions' environment for it.
func dynamoEnv(t testing.TB) (*dynamostore.Store, []string) {
	t.Helper()
	endpoint := moto.Start(t)
	table := fmt.Sprintf("mcpush-rie-%d-%d", time.Now().UnixNano(), tableSeq.Add(1))
	client := moto.NewClient(context.Background(), endpoint)
	if err := dynamostore.CreateTable(context.Background(), client, table); err != nil {
		t.Fatalf("creating table %s on moto: %v", table, err)
	}
	return dynamostore.New(client, table, nil), []string{
		"MCPUSH_STORE=dynamodb:" + table,
		"AWS_ENDPOINT_URL_DYNAMODB=" + endpoint,
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// deliveryQueue creates a webhook delivery queue (standard, a visibility
// timeout of 30 s) on the shared moto_server and returns a client, its URL
// and sns-ingest's environment for it (dynamoEnv's has the credentials).
func deliveryQueue(t testing.TB) (*sqs.Client, string, []string) {
	t.Helper()
	endpoint := moto.Start(t)
	client := moto.NewSQSClient(endpoint)
	url, err := moto.NewQueue(t.Context(), client, fmt.Sprintf("mcpush-rie-%d-%d", time.Now().UnixNano(), tableSeq.Add(1)), 30)
	if err != nil {
		t.Fatalf("creating the delivery queue on moto: %v", err)
	}
	return client, url, []string{"MCPUSH_DELIVERY_QUEUE_URL=" + url, "AWS_ENDPOINT_URL_SQS=" + endpoint}
}

// invoker returns e's invocations as the event-source mapping makes them:
// a function error or an init failure fails the invocation.
func invoker(t testing.TB, e *Emulator) esm.Invoke {
	return func(_ context.Context, ev []byte) ([]byte, error) {
		r := e.Invoke(t, ev)
		return r.Body, r.Err()
	}
}

// TestEmulatorMCPIAM runs the MCP function (buffered mode, IAM auth, the
// default) under the emulator: initialize from the SAM-shaped event
// answers with a session whose stored principal is the event's IAM
// signer; another signer does not find the session, an event without an
// IAM authorizer is refused.
func TestEmulatorMCPIAM(t *testing.T) {
	emulatorTest(t)
	store, env := dynamoEnv(t)
	e := Start(t, Bootstrap(t, "./functions/mcp"), append(env, "MCPUSH_LAMBDA_MODE=buffered")...)

	resp := httpResponse(t, e.Invoke(t, event(t, "http-api-iam-initialize")))
	session := header(resp, "Mcp-Session-Id")
	var init struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
			ServerInfo      struct{ Name string }
		}
	}
	if resp.StatusCode != http.StatusOK || session == "" || json.Unmarshal([]byte(resp.Body), &init) != nil ||
		init.Result.ProtocolVersion != "2025-11-25" || init.Result.ServerInfo.Name != "mcpush" {
		t.Fatalf("initialize: %d %v %s; want 200, a session, protocol 2025-11-25 from mcpush", resp.StatusCode, resp.Headers, resp.Body)
	}
	s, err := store.GetSession(t.Context(), session)
	if err != nil || s.Principal != alice {
		t.Fatalf("stored session %q: %+v, %v; want principal %s", session, s, err, alice)
	}

	call := func(caller, body string) events.APIGatewayV2HTTPResponse {
		ev := lambdatest.Edit(t, event(t, "http-api-iam-initialize"), lambdatest.WithCaller(caller), withBody(body),
			withHeader("Mcp-Session-Id", session), withHeader("Mcp-Protocol-Version", "2025-11-25"))
		return httpResponse(t, e.Invoke(t, ev))
	}
	if resp := call(alice, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s, want 202", resp.StatusCode, resp.Body)
	}
	info := testutil.RPC(2, "tools/call", map[string]any{"name": "session_info"})
	if resp := call(bob, info); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob using alice's session: %d %s, want 404", resp.StatusCode, resp.Body)
	}
	if resp := call("", info); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no IAM authorizer: %d %s, want 401", resp.StatusCode, resp.Body)
	}
	if resp := call(alice, info); resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"sessionId":"`+session+`"`) {
		t.Errorf("alice's session_info: %d %s, want 200 naming the session", resp.StatusCode, resp.Body)
	}
}

// TestEmulatorMCPStreamMode runs the MCP function in stream mode (the
// Function URL's RESPONSE_STREAM, template.yaml's default) on the
// repository's `sam local invoke` fixtures, events/mcp-initialize.json and
// then events/mcp-delete.json with the session: the emulator answers with
// the raw http-integration-response the function wrote, a JSON prelude,
// eight NUL bytes and the body, as docs/lambda.md's Local invoke says
// `sam local invoke` prints it. Whether the body arrives as it is written
// the emulator cannot show (it does not implement response streaming);
// functions/mcp's tests check that against internal/lambdatest.
func TestEmulatorMCPStreamMode(t *testing.T) {
	emulatorTest(t)
	_, env := dynamoEnv(t)
	e := Start(t, Bootstrap(t, "./functions/mcp"), append(env, "MCPUSH_LAMBDA_MODE=stream")...)
	type prelude struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
	}
	stream := func(name string, ev []byte) (prelude, string) {
		t.Helper()
		r := e.Invoke(t, ev)
		head, body, ok := strings.Cut(string(r.Body), "\x00\x00\x00\x00\x00\x00\x00\x00")
		var p prelude
		if r.Status != http.StatusOK || !ok || json.Unmarshal([]byte(head), &p) != nil {
			t.Fatalf("%s: %d %q; want 200 with a prelude, eight NULs and the body", name, r.Status, r.Body)
		}
		return p, body
	}
	p, body := stream("initialize", repoEvent(t, "mcp-initialize"))
	session := p.Headers["Mcp-Session-Id"]
	if p.StatusCode != http.StatusOK || session == "" || !strings.Contains(body, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize: prelude %+v, body %s; want 200 naming the session, the result", p, body)
	}
	del := lambdatest.Edit(t, repoEvent(t, "mcp-delete"), withHeader("Mcp-Session-Id", session))
	if p, body := stream("DELETE", del); p.StatusCode/100 != 2 {
		t.Errorf("DELETE of the session: prelude %+v, body %s; want 2xx", p, body)
	}
	if p, body := stream("DELETE again", del); p.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE of the deleted session: prelude %+v, body %s; want 404", p, body)
	}
}

// TestEmulatorLocalInvokeSNS runs sns-ingest on the repository's SNS
// fixtures for `sam local invoke` (events/sns-*.json), as
// functions/mcp's TestLambdaBufferedPoll does against internal/lambdatest:
// the batch with a bad record fails naming that record only; the others
// go through, the duplicate twice; each order event is stored once, and
// the plain-text message makes its topic.
func TestEmulatorLocalInvokeSNS(t *testing.T) {
	emulatorTest(t)
	store, env := dynamoEnv(t)
	e := Start(t, Bootstrap(t, "./functions/sns-ingest"), env...)
	r := e.Invoke(t, repoEvent(t, "sns-bad-record"))
	var fnErr struct{ ErrorMessage string }
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &fnErr) != nil ||
		!strings.Contains(fnErr.ErrorMessage, "0f8b3c1e-1111-5a5b-9c9d-000000000006") || strings.Contains(fnErr.ErrorMessage, "0f8b3c1e-1111-5a5b-9c9d-000000000005") {
		t.Errorf("the batch with a bad record: %d %s; want a function error naming the bad record only", r.Status, r.Body)
	}
	for _, name := range []string{"sns-event", "sns-registry", "sns-plain-text", "sns-duplicate", "sns-duplicate"} {
		if r := e.Invoke(t, repoEvent(t, name)); r.Status != http.StatusOK || strings.Contains(string(r.Body), `"errorMessage"`) {
			t.Errorf("%s: %d %s; want a summary", name, r.Status, r.Body)
		}
	}
	evs, err := store.ReadTopicEvents(t.Context(), "orders", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var orders []string
	for _, ev := range evs {
		var d struct{ OrderID string }
		json.Unmarshal(ev.Data, &d)
		orders = append(orders, d.OrderID)
	}
	slices.Sort(orders)
	if want := []string{"o-1001", "o-1002", "o-1003"}; !slices.Equal(orders, want) {
		t.Errorf("orders events %v, want %v (each once)", orders, want)
	}
	topics, err := store.Topics(t.Context())
	if err != nil || !slices.ContainsFunc(topics, func(tp notify.Topic) bool { return tp.Name == "deploys" }) {
		t.Errorf("topics %+v (%v): want the plain-text message's topic deploys", topics, err)
	}
}

// TestEmulatorMCPOAuth runs the MCP function with MCPUSH_AUTH=oauth
// against a real authorization server (internal/oauthtest): the event
// without a token gets 401 with the challenge, with a token issued for
// the resource (derived from the event's domain) initialize answers, and
// a token for another resource is refused.
func TestEmulatorMCPOAuth(t *testing.T) {
	emulatorTest(t)
	as := oauthtest.Start(t, &oauthtest.Options{
		Scopes:  []string{"mcp:tools"},
		Clients: []oauthtest.Client{{ID: "alice", Secret: "alice-secret", Scope: "mcp:tools"}},
	})
	_, env := dynamoEnv(t)
	e := Start(t, Bootstrap(t, "./functions/mcp"), append(env, "MCPUSH_LAMBDA_MODE=buffered", "MCPUSH_AUTH=oauth",
		"MCPUSH_OAUTH_ISSUER="+as.Issuer, "MCPUSH_OAUTH_SCOPES=mcp:tools")...)
	const resource = "https://id.execute-api.us-east-1.amazonaws.com/mcp" // the fixture's domain

	resp := httpResponse(t, e.Invoke(t, event(t, "http-api-oauth-initialize")))
	challenge := `Bearer resource_metadata="https://id.execute-api.us-east-1.amazonaws.com/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`
	if resp.StatusCode != http.StatusUnauthorized || header(resp, "WWW-Authenticate") != challenge {
		t.Errorf("no token: %d %q %s; want 401 with %s", resp.StatusCode, header(resp, "WWW-Authenticate"), resp.Body, challenge)
	}
	other := as.Token(t, "alice", "alice-secret", "https://elsewhere.example/mcp", "mcp:tools")
	resp = httpResponse(t, e.Invoke(t, lambdatest.Edit(t, event(t, "http-api-oauth-initialize"), withHeader("Authorization", "Bearer "+other))))
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(header(resp, "WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("a token for another resource: %d %q %s; want 401 invalid_token", resp.StatusCode, header(resp, "WWW-Authenticate"), resp.Body)
	}
	token := as.Token(t, "alice", "alice-secret", resource, "mcp:tools")
	resp = httpResponse(t, e.Invoke(t, lambdatest.Edit(t, event(t, "http-api-oauth-initialize"), withHeader("Authorization", "Bearer "+token))))
	if resp.StatusCode != http.StatusOK || header(resp, "Mcp-Session-Id") == "" || !strings.Contains(resp.Body, `"protocolVersion":"2025-11-25"`) {
		t.Errorf("initialize with a token: %d %v %s; want 200 with a session", resp.StatusCode, resp.Headers, resp.Body)
	}
}

// TestEmulatorSNSIngest runs sns-ingest under the emulator, with a
// webhook delivery queue (moto's SQS): the SNS notification is stored once
// however often it is delivered (the MessageId), a malformed record fails
// the invocation with a function error, the schedule's event runs a
// webhook sweep instead of an ingest, and an SQS event of the queue is
// answered with the batch item failures: exactly the record whose body is
// not a task.
func TestEmulatorSNSIngest(t *testing.T) {
	emulatorTest(t)
	store, env := dynamoEnv(t)
	_, _, qenv := deliveryQueue(t)
	e := Start(t, Bootstrap(t, "./functions/sns-ingest"), append(env, qenv...)...)

	type summary struct {
		Accepted   int `json:"accepted"`
		Duplicates int `json:"duplicates"`
	}
	invoke := func(name string, ev []byte) summary {
		t.Helper()
		r := e.Invoke(t, ev)
		var s summary
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &s) != nil || strings.Contains(string(r.Body), `"errorMessage"`) {
			t.Fatalf("%s: %d %s; want 200 with a summary", name, r.Status, r.Body)
		}
		return s
	}
	if s := invoke("first delivery", event(t, "sns-notification")); s.Accepted != 1 || s.Duplicates != 0 {
		t.Errorf("first delivery: %+v, want 1 accepted", s)
	}
	if s := invoke("second delivery", event(t, "sns-notification")); s.Accepted != 0 || s.Duplicates != 1 {
		t.Errorf("second delivery of the MessageId: %+v, want 1 duplicate", s)
	}
	evs, err := store.ReadTopicEvents(t.Context(), "orders", 0, 10)
	if err != nil || len(evs) != 1 || !strings.Contains(string(evs[0].Data), `"o-1001"`) {
		t.Errorf("topic orders holds %d events (%v): %+v; want the one event", len(evs), err, evs)
	}

	bad := lambdatest.Edit(t, event(t, "sns-notification"), func(ev map[string]any) {
		sns := ev["Records"].([]any)[0].(map[string]any)["Sns"].(map[string]any)
		sns["MessageId"] = "95df01b4-ee98-5cb9-9903-4c221d41eb5f"
		sns["Message"] = `{"type":"event","data":{}}` // no topic
	})
	r := e.Invoke(t, bad)
	var fnErr struct{ ErrorMessage, ErrorType string }
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &fnErr) != nil || !strings.Contains(fnErr.ErrorMessage, "rejected") {
		t.Errorf("a malformed record: %d %s; want a function error saying it was rejected", r.Status, r.Body)
	}

	// SAM's scheduled event (EventBridge rules), and the EventBridge
	// Scheduler's that template.yaml's ScheduleV2 sends.
	scheduler := lambdatest.Edit(t, event(t, "scheduled-event"), func(ev map[string]any) {
		ev["source"], ev["detail"] = "aws.scheduler", "{}"
		ev["resources"] = []string{"arn:aws:scheduler:us-east-1:123456789012:schedule/default/WebhookSweep"}
	})
	for name, ev := range map[string][]byte{"scheduled event": event(t, "scheduled-event"), "scheduler event": scheduler} {
		// A fan-out enqueued for the one topic, orders.
		if r := e.Invoke(t, ev); r.Status != http.StatusOK || string(r.Body) != `{"sweep":{"topics":1}}` {
			t.Errorf("%s: %d %s; want {\"sweep\":{\"topics\":1}}", name, r.Status, r.Body)
		}
	}
	// SAM's SQS event (sqs receive-message) with a fan-out task of
	// orders and, second, a body that is not a task.
	if r := e.Invoke(t, event(t, "sqs-message")); r.Status != http.StatusOK ||
		string(r.Body) != `{"batchItemFailures":[{"itemIdentifier":"2e1424d4-f796-459a-8184-9c92662be6da"}]}` {
		t.Errorf("the SQS event: %d %s; want the second record alone in batchItemFailures", r.Status, r.Body)
	}
	if evs, _ := store.ReadTopicEvents(t.Context(), "orders", 0, 10); len(evs) != 1 {
		t.Errorf("after the malformed record and the sweep, topic orders holds %d events, want 1", len(evs))
	}
}

// TestEmulatorInitError: a function whose init fails (a bad environment
// value, a store the build does not have) reports it to the Runtime API,
// and the emulator answers the invocation with an InitError carrying the
// function's message, as Lambda does.
func TestEmulatorInitError(t *testing.T) {
	emulatorTest(t)
	for _, tc := range []struct {
		name, pkg, event string
		env              []string
		want             string
	}{
		{"mcp bad mode", "./functions/mcp", "http-api-iam-initialize", []string{"MCPUSH_LAMBDA_MODE=sideways"}, `MCPUSH_LAMBDA_MODE=\"sideways\"`},
		{"sns-ingest sqlite", "./functions/sns-ingest", "sns-notification", []string{"MCPUSH_STORE=sqlite:mcpush.db"}, "no SQLite store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := Start(t, Bootstrap(t, tc.pkg), tc.env...)
			r := e.Invoke(t, event(t, tc.event))
			var doc struct{ ErrorMessage, ErrorType string }
			if r.Status != http.StatusBadGateway || json.Unmarshal(r.Body, &doc) != nil || doc.ErrorType != "InitError" ||
				!strings.Contains(string(r.Body), tc.want) {
				t.Errorf("%d %s; want 502 with an InitError containing %s", r.Status, r.Body, tc.want)
			}
		})
	}
}

// TestBuildFlags: Bootstrap builds as the Makefile's LAMBDA_GO does, but
// for the host's architecture, and docs/lambda.md's Local invoke installs
// the emulator at Version.
func TestBuildFlags(t *testing.T) {
	root := testenv.RepoRoot(t)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	want := "LAMBDA_GO := CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags " + LambdaTags + " -trimpath -ldflags='-s -w'\n"
	if !strings.Contains(string(mk), "\n"+want) {
		t.Errorf("the Makefile's LAMBDA_GO is not %q: change Bootstrap with it", want)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "lambda.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "go install "+Package+"@"+Version+"\n") {
		t.Errorf("docs/lambda.md does not install %s@%s", Package, Version)
	}
}

// snsRecord returns the SNS fixture with its MessageId and Message
// replaced.
func snsRecord(t testing.TB, messageID, message string) []byte {
	t.Helper()
	return lambdatest.Edit(t, event(t, "sns-notification"), func(ev map[string]any) {
		sns := ev["Records"].([]any)[0].(map[string]any)["Sns"].(map[string]any)
		sns["MessageId"], sns["Message"] = messageID, message
	})
}

// TestEmulatorWebhookSweep runs both functions under the emulator on one
// table and a webhook delivery queue on moto (DynamoDB and SQS), with the
// queue's event-source mapping played by internal/esm: the MCP function
// takes alice's webhook subscription (IAM, a 2026-era events/subscribe;
// the verification handshake reaches the receiver); sns-ingest's ingest of
// an event only enqueues its fan-out; the mapping feeds the queue to
// sns-ingest, whose first attempt fails at the receiver (500) and whose
// retry is a new SQS message delayed by the default schedule's 1 s; the
// retry delivers the event, signed (webhook.Receiver verifies every
// request). The EventBridge schedule's event then enqueues a fan-out of
// the topic, which finds the subscription up to date.
func TestEmulatorWebhookSweep(t *testing.T) {
	emulatorTest(t)
	store, env := dynamoEnv(t)
	sqsClient, queueURL, qenv := deliveryQueue(t)
	secret := mcp.NewWebhookSecret()
	sec, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	var (
		failNext atomic.Bool
		failedAt time.Time // written before failNext is cleared
	)
	failNext.Store(true)
	got := make(chan webhook.Delivery, 10)
	ts := httptest.NewServer(&webhook.Receiver{
		Secrets: func(string) []webhook.Secret { return []webhook.Secret{sec} },
		Handle: func(d webhook.Delivery) error {
			if d.Event != nil && failNext.Load() {
				failedAt = time.Now()
				failNext.Store(false)
				return errors.New("failing the first event delivery")
			}
			got <- d
			return nil
		},
	})
	t.Cleanup(ts.Close)
	env = append(env, "MCPUSH_STATE_KEYS=rie-webhook-key-0123456789abcdef0123456789", "MCPUSH_WEBHOOK_ALLOW="+ts.URL)
	ingest := Start(t, Bootstrap(t, "./functions/sns-ingest"), append(env, qenv...)...)
	server := Start(t, Bootstrap(t, "./functions/mcp"), append(env, "MCPUSH_LAMBDA_MODE=buffered")...)
	mapping, err := esm.NewSQS(sqsClient, queueURL, invoker(t, ingest), &esm.SQSOptions{PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) webhook.Delivery {
		t.Helper()
		select {
		case d := <-got:
			return d
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s at the receiver within 10 s", what)
		}
		return webhook.Delivery{}
	}
	// tasks returns the kinds of the tasks of batches, checking that
	// sns-ingest acknowledged every record of each.
	tasks := func(batches []esm.Batch) []string {
		t.Helper()
		var kinds []string
		for _, b := range batches {
			if b.Err != nil || len(b.Failed) != 0 || string(b.Response) != `{"batchItemFailures":[]}` {
				t.Errorf("batch %s: response %s (%v), failed %v; want every record acknowledged", b.Event, b.Response, b.Err, b.Failed)
			}
			for _, r := range b.Records {
				task, err := delivery.ParseTask([]byte(r.Body))
				if err != nil || task.Topic != "orders" {
					t.Errorf("queue message %q: %+v, %v; want a task of orders", r.Body, task, err)
				}
				kinds = append(kinds, string(task.Kind)+" receive "+r.Attributes["ApproximateReceiveCount"])
			}
		}
		return kinds
	}

	r := ingest.Invoke(t, snsRecord(t, "reg-1", `{"type":"registry","registry":"events","op":"put","items":[{"name":"order.created","topic":"orders","inputSchema":{"type":"object","properties":{"region":{"type":"string"}}}}]}`))
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"accepted":1`) {
		t.Fatalf("registry put: %d %s", r.Status, r.Body)
	}
	// A change of the events registry enqueues a recheck of every
	// subscription (none yet): worked off here, so what follows sees
	// only the event's tasks.
	if b, err := mapping.Poll(t.Context()); err != nil || len(b.Records) != 1 || !strings.Contains(b.Records[0].Body, `"k":"recheck"`) {
		t.Fatalf("the queue after the registry put: %s, %v; want one recheck task", b.Event, err)
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	subscribe := lambdatest.Edit(t, event(t, "http-api-iam-initialize"),
		withHeader("Mcp-Protocol-Version", "2026-07-28"), withHeader("Mcp-Method", "events/subscribe"),
		withBody(`{"jsonrpc":"2.0","id":1,"method":"events/subscribe","params":{"name":"order.created","arguments":{"region":"eu"},`+
			`"delivery":{"mode":"webhook","url":"`+ts.URL+`/hooks/alice","secret":"`+secret+`"},`+meta+`}}`))
	resp := httpResponse(t, server.Invoke(t, subscribe))
	var sub struct {
		Result struct{ ID string }
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &sub) != nil || sub.Result.ID == "" {
		t.Fatalf("events/subscribe: %d %s", resp.StatusCode, resp.Body)
	}
	if v := next("verification"); v.Control == nil || v.SubscriptionID != sub.Result.ID {
		t.Fatalf("first delivery %+v, want the verification of %s", v, sub.Result.ID)
	}

	r = ingest.Invoke(t, snsRecord(t, "m-eu", `{"type":"event","topic":"orders","data":{"region":"eu","n":1}}`))
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"accepted":1`) {
		t.Fatalf("the event: %d %s", r.Status, r.Body)
	}
	// Accepting is not delivering: the ingest enqueued the event's
	// fan-out and attempted nothing.
	if !failNext.Load() || len(got) != 0 {
		t.Fatal("the ingest reached the receiver: it should only enqueue")
	}
	b, err := mapping.Poll(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Records) != 1 || !strings.Contains(b.Records[0].Body, `"k":"fanout"`) || !strings.Contains(b.Records[0].Body, `"s":1`) {
		t.Fatalf("the queue after the ingest: %s; want one fan-out task of orders at seq 1", b.Event)
	}
	first := tasks([]esm.Batch{b})

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	batches, err := mapping.Drain(ctx, func() bool { return len(got) > 0 })
	if err != nil {
		t.Fatalf("draining the queue: %v (received %q)", err, tasks(batches))
	}
	d := next("event")
	deliveredAt := time.Now()
	if d.Event == nil || d.Event.Name != "order.created" || !strings.Contains(string(d.Event.Data), `"n":1`) || d.SubscriptionID != sub.Result.ID {
		t.Errorf("the delivery: %+v, want alice's order.created n=1", d)
	}
	// The fan-out's subscription task failed once; its retry is a new
	// message (received once), not the failed one redelivered, delayed by
	// the schedule's first delay (1 s and its jitter, rounded up to
	// whole seconds).
	if kinds, want := tasks(batches), []string{"subscription receive 1", "subscription receive 1"}; !slices.Equal(kinds, want) {
		t.Errorf("tasks after the fan-out %q, want %q", kinds, want)
	}
	if failNext.Load() {
		t.Fatal("no attempt failed at the receiver")
	}
	gap := deliveredAt.Sub(failedAt)
	if gap < time.Second || gap > 10*time.Second {
		t.Errorf("the retry came %v after the failed attempt, want the schedule's 1 s (rounded up to whole seconds)", gap)
	}
	t.Logf("the retry delivered %v after the failed attempt", gap.Round(time.Millisecond))
	w, err := store.GetWebhook(t.Context(), "orders", sub.Result.ID)
	if err != nil || w.Watermark != 1 || w.Retry.Seq != 0 || !w.Retry.NextAt.IsZero() {
		t.Errorf("after the delivery the subscription is %+v (%v); want watermark 1, no retry pending", w, err)
	}

	// The schedule: a fan-out of the one topic, which finds nothing to do.
	r = ingest.Invoke(t, event(t, "scheduled-event"))
	if r.Status != http.StatusOK || string(r.Body) != `{"sweep":{"topics":1}}` {
		t.Fatalf("the scheduled sweep: %d %s; want {\"sweep\":{\"topics\":1}}", r.Status, r.Body)
	}
	batches, err = mapping.Drain(ctx, nil)
	if err != nil {
		t.Fatalf("draining the queue after the sweep: %v", err)
	}
	if kinds, want := tasks(batches), []string{"fanout receive 1"}; !slices.Equal(kinds, want) || !slices.Equal(first, want) {
		t.Errorf("tasks of the ingest %q and of the sweep %q, want %q each", first, kinds, want)
	}
	if len(got) != 0 {
		t.Errorf("the sweep's fan-out delivered %+v again", <-got)
	}
}

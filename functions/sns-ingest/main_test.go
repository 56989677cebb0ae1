package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
)

// TestMain runs main instead of the tests when SNS_INGEST_TEST_MAIN=1, so
// that tests can run the command as a process without building it.
func TestMain(m *testing.M) {
	if os.Getenv("SNS_INGEST_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	code := m.Run()
	moto.Stop()
	os.Exit(code)
}

var fixtures = []string{"event.json", "registry.json", "plain-text.json", "duplicate.json", "batch-with-bad-record.json"}

// The fixtures are SNS events exactly as Lambda delivers them: decoding
// into events.SNSEvent and encoding again loses nothing.
func TestFixturesRoundTrip(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			var ev events.SNSEvent
			if err := json.Unmarshal(in, &ev); err != nil {
				t.Fatal(err)
			}
			if len(ev.Records) == 0 {
				t.Fatal("no records")
			}
			out, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			var want, got any
			if err := json.Unmarshal(in, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			// SNS writes milliseconds always ("...:07.000Z"); time.Time
			// drops trailing zeros. Compare the instants.
			for _, r := range want.(map[string]any)["Records"].([]any) {
				sns := r.(map[string]any)["Sns"].(map[string]any)
				ts, err := time.Parse(time.RFC3339Nano, sns["Timestamp"].(string))
				if err != nil {
					t.Fatal(err)
				}
				sns["Timestamp"] = ts.Format(time.RFC3339Nano)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("round trip (-fixture +re-encoded):\n%s", diff)
			}
		})
	}
}

// testEnv is a CLI environment on a temporary SQLite store.
type testEnv struct {
	env
	db             string
	stdout, stderr bytes.Buffer
}

func newTestEnv(t *testing.T) *testEnv {
	te := &testEnv{db: filepath.Join(t.TempDir(), "mcpush.db")}
	te.env = env{
		getenv: func(k string) string {
			if k == "MCPUSH_STORE" {
				return "sqlite:" + te.db
			}
			return ""
		},
		stdin:  strings.NewReader(""),
		stdout: &te.stdout,
		stderr: &te.stderr,
		logger: slog.New(slog.NewJSONHandler(&te.stderr, nil)),
		now:    func() time.Time { return time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC) },
	}
	return te
}

// run runs the CLI and returns its exit status and stdout, less the
// summary's last member, the store, which it checks: the test's
// MCPUSH_STORE (an absolute SQLite path, or a DynamoDB table).
func (te *testEnv) run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	te.stdout.Reset()
	te.stderr.Reset()
	code := run(context.Background(), args, &te.env)
	out := te.stdout.String()
	if out == "" {
		return code, out
	}
	sc, err := envconfig.ReadStore(te.getenv)
	if err != nil {
		t.Fatal(err)
	}
	store := `,"store":"` + storeconfig.Describe(sc.Spec) + `"}` + "\n"
	if !strings.HasSuffix(out, store) {
		t.Errorf("summary %q does not end with the store %q", out, store)
		return code, out
	}
	return code, strings.TrimSuffix(out, store) + "}\n"
}

// TestSummaryStoreAbsolute: the summary names the store it wrote to with
// an absolute path, whatever the directory the command ran in and however
// MCPUSH_STORE named it.
func TestSummaryStoreAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	te := newTestEnv(t)
	te.getenv = func(k string) string {
		if k == "MCPUSH_STORE" {
			return "sqlite:rel/mcpush.db"
		}
		return ""
	}
	if err := os.MkdirAll(filepath.Join(dir, "rel"), 0o755); err != nil {
		t.Fatal(err)
	}
	te.stdout.Reset()
	if code := run(context.Background(), []string{"-topic", "t", "-message", "m"}, &te.env); code != exitOK {
		t.Fatalf("exit %d: %s", code, te.stderr.String())
	}
	var sum struct {
		Accepted int    `json:"accepted"`
		Store    string `json:"store"`
	}
	if err := json.Unmarshal(te.stdout.Bytes(), &sum); err != nil {
		t.Fatal(err)
	}
	if want := "sqlite:" + filepath.Join(dir, "rel", "mcpush.db"); sum.Accepted != 1 || sum.Store != want {
		t.Errorf("summary %s; want accepted 1 and store %q", te.stdout.String(), want)
	}
}

func (te *testEnv) store(t *testing.T) notify.Store {
	t.Helper()
	st, err := sqlitestore.New(te.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestRunFixtures(t *testing.T) {
	te := newTestEnv(t)
	for _, tc := range []struct {
		file     string
		wantCode int
		want     string
	}{
		{"event.json", 0, `{"accepted":1,"duplicates":0,"rejected":0,"failed":0}`},
		{"registry.json", 0, `{"accepted":1,"duplicates":0,"rejected":0,"failed":0}`},
		{"plain-text.json", 0, `{"accepted":1,"duplicates":0,"rejected":0,"failed":0}`},
		{"duplicate.json", 0, `{"accepted":1,"duplicates":1,"rejected":0,"failed":0}`},
		{"batch-with-bad-record.json", 1, `{"accepted":2,"duplicates":0,"rejected":1,"failed":0,"errors":["4b5c6d7e-8f9a-5b0c-9d1e-2f3a4b5c6d7e: ` +
			`invalid SNS message: op: unknown op \"upsert\" (want \"put\", \"delete\" or \"replace\")"]}`},
		{"event.json", 0, `{"accepted":0,"duplicates":1,"rejected":0,"failed":0}`},
		{"batch-with-bad-record.json", 1, `{"accepted":0,"duplicates":2,"rejected":1,"failed":0,"errors":["4b5c6d7e-8f9a-5b0c-9d1e-2f3a4b5c6d7e: ` +
			`invalid SNS message: op: unknown op \"upsert\" (want \"put\", \"delete\" or \"replace\")"]}`},
	} {
		code, out := te.run(t, "-event", filepath.Join("testdata", tc.file))
		if code != tc.wantCode || out != tc.want+"\n" {
			t.Errorf("sns-ingest -event %s = %d, %q; want %d, %q\nstderr:\n%s", tc.file, code, out, tc.wantCode, tc.want+"\n", te.stderr.String())
		}
	}

	ctx := context.Background()
	st := te.store(t)
	topics, err := st.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]int64)
	for _, tp := range topics {
		got[tp.Name] = tp.LastSeq
	}
	if diff := cmp.Diff(map[string]int64{"orders": 2, "alerts": 1, "deploys": 1}, got); diff != "" {
		t.Errorf("topics (-want +got):\n%s", diff)
	}
	alerts, err := st.ReadTopicEvents(ctx, "alerts", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 1 || string(alerts[0].Data) != `"Disk usage on db-1 is above 90% (93.4%)"` ||
		!alerts[0].ReceivedAt.Equal(time.Date(2026, 11, 22, 10, 32, 15, 456e6, time.UTC)) {
		t.Errorf("alerts = %+v", alerts)
	}
	for kind, key := range map[string]string{notify.RegistryPrompts: "incident-summary", notify.RegistryTools: "events_wait"} {
		reg, err := st.GetRegistry(ctx, kind)
		if err != nil {
			t.Fatal(err)
		}
		if len(reg.Items) != 1 || reg.Items[key] == nil || reg.Hash == "" {
			t.Errorf("%s registry = %+v, want one item %s", kind, reg, key)
		}
	}
}

func TestRunTopicMessage(t *testing.T) {
	te := newTestEnv(t)
	for _, tc := range []struct {
		args     []string
		wantCode int
		want     string
	}{
		{[]string{"-topic", "alerts", "-message", "disk full"}, 0, `{"accepted":1,"duplicates":0,"rejected":0,"failed":0}`},
		{[]string{"-topic", "alerts", "-message", "disk full"}, 0, `{"accepted":1,"duplicates":0,"rejected":0,"failed":0}`}, // a new random MessageId
		{[]string{"-topic", "alerts", "-message", "x", "-message-id", "fixed-1", "-subject", "s"}, 0, `{"accepted":1,"duplicates":0,"rejected":0,"failed":0}`},
		{[]string{"-topic", "alerts", "-message", "x", "-message-id", "fixed-1"}, 0, `{"accepted":0,"duplicates":1,"rejected":0,"failed":0}`},
		{[]string{"-topic", "arn:aws:sns:eu-west-1:123456789012:builds", "-message", `{"ok":true}`}, 0, `{"accepted":1,"duplicates":0,"rejected":0,"failed":0}`},
		{[]string{"-topic", "ignored", "-message", `{"type":"event","topic":"orders","data":{"id":7}}`}, 0, `{"accepted":1,"duplicates":0,"rejected":0,"failed":0}`},
		{[]string{"-topic", "alerts", "-message", `{"type":"event","topic":"orders"`, "-message-id", "trunc"}, 1,
			`{"accepted":0,"duplicates":0,"rejected":1,"failed":0,"errors":["trunc: invalid SNS message: invalid JSON at byte 32 of 32: unexpected end of JSON input"]}`},
		{[]string{"-topic", "alerts", "-message", `{"type":"registry","registry":"tools","op":"put","items":[{"name":"nope"}]}`, "-message-id", "tool"}, 1,
			`{"accepted":0,"duplicates":0,"rejected":1,"failed":0,"errors":["tool: invalid SNS message: items[0].name: unknown tool \"nope\" ` +
				`(a registry item may only change these tools: events_recent, events_wait, session_info, topics_list)"]}`},
	} {
		code, out := te.run(t, tc.args...)
		if code != tc.wantCode || out != tc.want+"\n" {
			t.Errorf("sns-ingest %q = %d, %q; want %d, %q\nstderr:\n%s", tc.args, code, out, tc.wantCode, tc.want+"\n", te.stderr.String())
		}
	}

	ctx := context.Background()
	st := te.store(t)
	alerts, err := st.ReadTopicEvents(ctx, "alerts", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 3 || alerts[2].MessageID != "fixed-1" || !alerts[0].ReceivedAt.Equal(te.now()) ||
		len(alerts[0].MessageID) != 36 || alerts[0].MessageID == alerts[1].MessageID {
		t.Errorf("alerts = %+v, want 3 events, two with random UUIDs", alerts)
	}
	for topic, data := range map[string]string{"builds": `{"ok":true}`, "orders": `{"id":7}`} {
		evs, err := st.ReadTopicEvents(ctx, topic, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 || string(evs[0].Data) != data {
			t.Errorf("%s events = %+v, want one with %s", topic, evs, data)
		}
	}
}

func TestRunStdin(t *testing.T) {
	te := newTestEnv(t)
	b, err := os.ReadFile(filepath.Join("testdata", "duplicate.json"))
	if err != nil {
		t.Fatal(err)
	}
	te.stdin = bytes.NewReader(b)
	if code, out := te.run(t, "-event", "-"); code != 0 || out != `{"accepted":1,"duplicates":1,"rejected":0,"failed":0}`+"\n" {
		t.Errorf("sns-ingest -event - = %d, %q", code, out)
	}
}

func TestRunUsageErrors(t *testing.T) {
	te := newTestEnv(t)
	notSNS := filepath.Join(t.TempDir(), "message.json")
	if err := os.WriteFile(notSNS, []byte(`{"type":"event","topic":"t","data":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(t.TempDir(), "text.txt")
	if err := os.WriteFile(notJSON, []byte(`hello`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{nil, "want -event FILE or -topic T -message M"},
		{[]string{"-bogus"}, "flag provided but not defined"},
		{[]string{"-event"}, "flag needs an argument"},
		{[]string{"-event", "testdata/event.json", "-topic", "t"}, "-event excludes"},
		{[]string{"-topic", "t"}, "-topic needs -message"},
		{[]string{"-message", "m"}, "need -topic"},
		{[]string{"-topic", "a/b", "-message", "m"}, "not a topic name"},
		{[]string{"-topic", "t", "-message", "m", "extra"}, "unexpected arguments: extra"},
		{[]string{"-event", "testdata/missing.json"}, "no such file"},
		{[]string{"-event", notSNS}, "no records"},
		{[]string{"-event", notJSON}, "not an SNS event"},
	} {
		code, out := te.run(t, tc.args...)
		if code != 2 || out != "" || !strings.Contains(te.stderr.String(), tc.stderr) {
			t.Errorf("sns-ingest %q = %d, stdout %q, stderr %q; want 2, no output, %q in stderr", tc.args, code, out, te.stderr.String(), tc.stderr)
		}
	}

	// A bad store configuration.
	te.getenv = func(k string) string {
		if k == "MCPUSH_STORE" {
			return "postgres:db"
		}
		return ""
	}
	if code, out := te.run(t, "-topic", "t", "-message", "m"); code != 2 || out != "" || !strings.Contains(te.stderr.String(), "MCPUSH_STORE") {
		t.Errorf("with MCPUSH_STORE=postgres:db: %d, %q, stderr %q", code, out, te.stderr.String())
	}

	if code, _ := te.run(t, "-h"); code != 0 || !strings.Contains(te.stderr.String(), "usage:") {
		t.Errorf("-h = %d, stderr %q", code, te.stderr.String())
	}
}

// command returns the command that runs main in a child process.
func command(t *testing.T, db string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SNS_INGEST_TEST_MAIN=1", "MCPUSH_STORE=sqlite:"+db)
	return cmd
}

// The command itself: one line of JSON on stdout, JSON logs on stderr,
// the documented exit statuses.
func TestMainCLI(t *testing.T) {
	db := filepath.Join(t.TempDir(), "mcpush.db")
	for _, tc := range []struct {
		args     []string
		wantCode int
		want     string
	}{
		{[]string{"-event", "testdata/event.json"}, 0, `{"accepted":1,"duplicates":0,"rejected":0,"failed":0,"store":"sqlite:` + db + `"}`},
		{[]string{"-event", "testdata/batch-with-bad-record.json"}, 1, `{"accepted":2,"duplicates":0,"rejected":1,"failed":0,"errors":`},
		{[]string{"-topic", "t"}, 2, ``},
	} {
		var stdout, stderr bytes.Buffer
		cmd := command(t, db, tc.args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.wantCode || !strings.HasPrefix(stdout.String(), tc.want) || strings.Count(stdout.String(), "\n") != min(1, len(tc.want)) {
			t.Errorf("sns-ingest %q: exit %d, stdout %q; want %d, %q...\nstderr:\n%s", tc.args, code, stdout.String(), tc.wantCode, tc.want, stderr.String())
		}
		if tc.wantCode == 1 {
			for line := range strings.Lines(stderr.String()) {
				if !json.Valid([]byte(line)) {
					t.Errorf("stderr line is not JSON: %q", line)
				}
			}
			if !strings.Contains(stderr.String(), `"msg":"SNS record rejected"`) {
				t.Errorf("no rejection logged:\n%s", stderr.String())
			}
		}
	}
}

// MCPUSH_STORE_STATS: the process writes the store requests it made to a
// stats file of its own in the directory before it exits.
func TestMainStoreStats(t *testing.T) {
	dir := t.TempDir()
	for range 2 {
		cmd := command(t, filepath.Join(t.TempDir(), "mcpush.db"), "-topic", "alerts", "-message", "disk full")
		cmd.Env = append(cmd.Env, "MCPUSH_STORE_STATS="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sns-ingest: %v\n%s", err, out)
		}
	}
	all, err := storecount.ReadStats(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].PID == all[1].PID {
		t.Fatalf("stats files %+v, want one for each of the 2 runs", all)
	}
	for _, s := range all {
		if s.Process != "sns-ingest" || s.Ops["AppendTopicEvent"] != 1 || s.Reads+s.Writes != s.Ops.Total() {
			t.Errorf("stats %+v, want process sns-ingest with one AppendTopicEvent", s)
		}
	}
}

// In Lambda the command serves the Runtime API: a batch that went through
// is a response carrying the summary, and each event's fan-out task is on
// the delivery queue (moto's SQS); a batch with a rejected record fails
// the invocation, so that SNS retries it; the schedule's sweep enqueues a
// fan-out per recent topic; an SQS event of the queue is worked and
// answered with its batch item failures (a task that is not one fails).
func TestMainLambda(t *testing.T) {
	ctx := context.Background()
	endpoint := moto.Start(t)
	sqsClient := moto.NewSQSClient(endpoint)
	queueURL, err := moto.NewQueue(ctx, sqsClient, fmt.Sprintf("delivery-%d", time.Now().UnixNano()), 30)
	if err != nil {
		t.Fatal(err)
	}
	var invokes [][]byte
	for _, name := range []string{"event.json", "batch-with-bad-record.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		invokes = append(invokes, b)
	}
	// The EventBridge Scheduler's invocation of the webhook sweep (template.yaml).
	invokes = append(invokes, []byte(`{"version":"0","id":"4e0ea7f1-2a2c-4d1f-9b8e-0c0d1e2f3a4b","detail-type":"Scheduled Event","source":"aws.scheduler","account":"123456789012","time":"2026-11-27T03:00:00Z","region":"us-east-1","resources":["arn:aws:scheduler:us-east-1:123456789012:schedule/default/sweep"],"detail":"{}"}`))
	// A fan-out task and a message that is not a task, as the queue's
	// event-source mapping delivers them.
	invokes = append(invokes, []byte(`{"Records":[`+
		`{"messageId":"t-1","receiptHandle":"r1","body":"{\"k\":\"fanout\",\"t\":\"orders\",\"s\":1}","attributes":{"ApproximateReceiveCount":"1"},"messageAttributes":{},"md5OfBody":"x","eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-1:123456789012:delivery","awsRegion":"us-east-1"},`+
		`{"messageId":"t-2","receiptHandle":"r2","body":"not a task","attributes":{"ApproximateReceiveCount":"1"},"messageAttributes":{},"md5OfBody":"y","eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-1:123456789012:delivery","awsRegion":"us-east-1"}]}`))
	type result struct {
		path string
		body string
	}
	var (
		next    atomic.Int32
		results = make(chan result, 10)
	)
	const prefix = "/2018-06-01/runtime/invocation/"
	rt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == prefix+"next":
			i := int(next.Add(1)) - 1
			if i >= len(invokes) {
				http.Error(w, "no more invocations", http.StatusInternalServerError) // makes the runtime exit
				return
			}
			w.Header().Set("Lambda-Runtime-Aws-Request-Id", fmt.Sprintf("req-%d", i))
			w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
			w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:sns-ingest")
			w.Write(invokes[i])
		case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, prefix):
			b, _ := io.ReadAll(r.Body)
			results <- result{strings.TrimPrefix(r.URL.Path, prefix), string(b)}
			w.WriteHeader(http.StatusAccepted)
		default:
			http.NotFound(w, r)
		}
	}))
	defer rt.Close()

	db := filepath.Join(t.TempDir(), "mcpush.db")
	cmd := command(t, db)
	cmd.Env = append(cmd.Env, "AWS_LAMBDA_RUNTIME_API="+strings.TrimPrefix(rt.URL, "http://"),
		"MCPUSH_DELIVERY_QUEUE_URL="+queueURL, "AWS_ENDPOINT_URL_SQS="+endpoint,
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done: // exits once the runtime API has nothing more
	case <-ctx.Done():
		cmd.Process.Kill()
		t.Fatalf("the Lambda process did not exit\nstderr:\n%s", stderr.String())
	}
	close(results)
	var got []result
	for r := range results {
		got = append(got, r)
	}
	if len(got) != 4 {
		t.Fatalf("results = %+v, want 4\nstderr:\n%s", got, stderr.String())
	}
	if want := (result{"req-2/response", `{"sweep":{"topics":1}}`}); got[2] != want {
		t.Errorf("the scheduled sweep: %+v, want %+v", got[2], want)
	}
	if want := (result{"req-3/response", `{"batchItemFailures":[{"itemIdentifier":"t-2"}]}`}); got[3] != want {
		t.Errorf("the SQS event: %+v, want %+v\nstderr:\n%s", got[3], want, stderr.String())
	}
	// On the queue: the fan-outs of the two events ingested (one in
	// each batch; the failed batch's other good record is a registry
	// change) and the sweep's, each a task.
	var bodies []string
	for range 10 {
		out, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queueURL, MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			task, err := delivery.ParseTask([]byte(*m.Body))
			if err != nil || task.Kind != delivery.KindFanOut || task.Topic != "orders" {
				t.Errorf("queue message %q: %+v, %v; want a fan-out of orders", *m.Body, task, err)
			}
			bodies = append(bodies, *m.Body)
		}
	}
	if len(bodies) != 3 {
		t.Errorf("queue holds %d tasks %q, want 3 (2 ingested events, 1 sweep)", len(bodies), bodies)
	}
	if want := (result{"req-0/response", `{"accepted":1,"duplicates":0,"rejected":0,"failed":0}`}); got[0] != want {
		t.Errorf("first invocation: %+v, want %+v", got[0], want)
	}
	var lambdaErr struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if got[1].path != "req-1/error" || json.Unmarshal([]byte(got[1].body), &lambdaErr) != nil ||
		lambdaErr.ErrorMessage != "ingest: 1 of 3 SNS records rejected as malformed: 4b5c6d7e-8f9a-5b0c-9d1e-2f3a4b5c6d7e" {
		t.Errorf("second invocation: %+v, want an error naming the rejected record\nstderr:\n%s", got[1], stderr.String())
	}

	// The good records of the failed batch are stored.
	st, err := sqlitestore.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.ReadTopicEvents(context.Background(), "orders", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 {
		t.Errorf("orders has %d events, want 2", len(evs))
	}
}

// TestRegistryToolsEnv: MCPUSH_REGISTRY_TOOLS lists the tools a tools
// registry item may name, for a server with tools of its own.
func TestRegistryToolsEnv(t *testing.T) {
	te := newTestEnv(t)
	te.getenv = func(k string) string {
		switch k {
		case "MCPUSH_STORE":
			return "sqlite:" + te.db
		case "MCPUSH_REGISTRY_TOOLS":
			return "count, events_wait"
		}
		return ""
	}
	for _, tc := range []struct {
		tool string
		code int
	}{
		{"count", 0},
		{"events_wait", 0},
		{"session_info", 1},
	} {
		msg := `{"type":"registry","registry":"tools","op":"put","items":[{"name":"` + tc.tool + `","enabled":false}]}`
		if code, out := te.run(t, "-topic", "t", "-message", msg); code != tc.code {
			t.Errorf("tool item %s: exit %d, want %d: %s", tc.tool, code, tc.code, out)
		}
	}
}

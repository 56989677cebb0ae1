package lambdatest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/google/go-cmp/cmp"

	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/testutil"
)

// helperEnv selects, in a re-executed test binary, the Lambda function
// that runHelper starts with aws-lambda-go's real runtime client.
const helperEnv = "LAMBDATEST_HELPER"

func TestMain(m *testing.M) {
	if fn := os.Getenv(helperEnv); fn != "" {
		runHelper(fn)
		return
	}
	os.Exit(m.Run())
}

type echoOutput struct {
	RequestID   string          `json:"requestId"`
	FunctionARN string          `json:"functionArn"`
	DeadlineMS  int64           `json:"deadlineMs"`
	Event       json.RawMessage `json:"event"`
}

// failingReader returns data, then an error: aws-lambda-go reports it in
// the error trailers of the streamed response.
type failingReader struct{ sent bool }

func (r *failingReader) Read(p []byte) (int, error) {
	if !r.sent {
		r.sent = true
		return copy(p, "partial body"), nil
	}
	return 0, errors.New("stream broke")
}

func runHelper(fn string) {
	switch fn {
	case "echo":
		lambda.StartHandlerFunc(func(ctx context.Context, ev json.RawMessage) (echoOutput, error) {
			lc, _ := lambdacontext.FromContext(ctx)
			d, _ := ctx.Deadline()
			return echoOutput{RequestID: lc.AwsRequestID, FunctionARN: lc.InvokedFunctionArn, DeadlineMS: d.UnixMilli(), Event: ev}, nil
		})
	case "sleep":
		lambda.StartHandlerFunc(func(ctx context.Context, ev json.RawMessage) (string, error) {
			time.Sleep(2 * time.Second)
			return "late", nil
		})
	case "hold":
		// Answers after 300ms: concurrent invocations overlap.
		lambda.StartHandlerFunc(func(ctx context.Context, ev json.RawMessage) (echoOutput, error) {
			time.Sleep(300 * time.Millisecond)
			lc, _ := lambdacontext.FromContext(ctx)
			return echoOutput{RequestID: lc.AwsRequestID, Event: ev}, nil
		})
	case "error":
		lambda.StartHandlerFunc(func(ctx context.Context, ev json.RawMessage) (string, error) {
			return "", errors.New("boom")
		})
	case "panic":
		lambda.StartHandlerFunc(func(ctx context.Context, ev json.RawMessage) (string, error) {
			panic("kaboom")
		})
	case "stream-fail":
		lambda.StartHandlerFunc(func(ctx context.Context, ev *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
			return &events.LambdaFunctionURLStreamingResponse{StatusCode: 200, Body: &failingReader{}}, nil
		})
	case "url":
		lambdaurl.Start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("X-Path", r.URL.Path)
			w.Header().Set("X-Caller", r.Header.Get("X-Caller"))
			for i := range 3 {
				if i > 0 {
					time.Sleep(300 * time.Millisecond)
				}
				fmt.Fprintf(w, "data: %d\n\n", i)
			}
		}))
	default:
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", fn)
		os.Exit(2)
	}
}

// startHelper runs this test binary as the Lambda function fn against a
// fresh fake Runtime API. The process is killed when the test ends.
func startHelper(t *testing.T, fn string, opts *lambdatest.Options, env ...string) (*lambdatest.Server, *exec.Cmd) {
	t.Helper()
	srv := lambdatest.NewServer(opts)
	t.Cleanup(srv.Close)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+fn, "AWS_LAMBDA_RUNTIME_API="+srv.Addr())
	cmd.Env = append(cmd.Env, env...)
	var out testutil.LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("helper %s output:\n%s", fn, out.String())
		}
	})
	return srv, cmd
}

func wait(t *testing.T, inv *lambdatest.Invocation) *lambdatest.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := inv.Wait(ctx)
	if err != nil {
		t.Fatalf("invocation %s: %v", inv.ID, err)
	}
	return r
}

func TestBufferedResponse(t *testing.T) {
	srv, _ := startHelper(t, "echo", nil)
	for i := range 2 { // the second one proves the loop came back to /next
		event := fmt.Sprintf(`{"n":%d}`, i)
		inv := srv.Invoke([]byte(event), &lambdatest.InvokeOptions{Timeout: 20 * time.Second})
		r := wait(t, inv)
		if r.Err != nil || r.TimedOut {
			t.Fatalf("invocation failed: %v (timed out: %v)", r.Err, r.TimedOut)
		}
		var got echoOutput
		if err := json.Unmarshal(r.Body(), &got); err != nil {
			t.Fatalf("body %q: %v", r.Body(), err)
		}
		want := echoOutput{
			RequestID:   inv.ID,
			FunctionARN: "arn:aws:lambda:us-east-1:123456789012:function:mcpush-test",
			DeadlineMS:  r.Deadline.UnixMilli(),
			Event:       json.RawMessage(event),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the function saw (-want +got):\n%s", diff)
		}
		if r.Header.Get("User-Agent") == "" || !strings.HasPrefix(r.Header.Get("User-Agent"), "aws-lambda-go/") {
			t.Errorf("User-Agent = %q, want aws-lambda-go/...", r.Header.Get("User-Agent"))
		}
	}
}

func TestStreamedFunctionURLResponse(t *testing.T) {
	srv, _ := startHelper(t, "url", nil)
	req, _ := http.NewRequest(http.MethodPost, "https://example.invalid/mcp?x=1", strings.NewReader(`{"a":1}`))
	req.Header.Set("X-Caller", "test")
	r, hr, err := lambdatest.Do(context.Background(), srv, req, nil, &lambdatest.InvokeOptions{Streaming: true, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Header.Get("Content-Type"); got != lambdatest.ContentTypeHTTPIntegration {
		t.Errorf("runtime POST Content-Type = %q, want %q", got, lambdatest.ContentTypeHTTPIntegration)
	}
	if !r.Streamed() {
		t.Errorf("response not streamed: Transfer-Encoding %v, header %v", r.TransferEncoding, r.Header)
	}
	if hr.StatusCode != 200 || hr.Header.Get("Content-Type") != "text/event-stream" || hr.Header.Get("X-Path") != "/mcp" || hr.Header.Get("X-Caller") != "test" {
		t.Errorf("HTTP response: %d %v", hr.StatusCode, hr.Header)
	}
	if want := "data: 0\n\ndata: 1\n\ndata: 2\n\n"; string(hr.Body) != want {
		t.Errorf("body = %q, want %q", hr.Body, want)
	}
	if n := len(hr.Chunks); n < 3 {
		t.Fatalf("body arrived in %d chunks, want 3 or more", n)
	}
	if spread := hr.Chunks[len(hr.Chunks)-1].At.Sub(hr.Chunks[0].At); spread < 400*time.Millisecond {
		t.Errorf("chunks arrived within %v, want them spread over ~600ms (streamed)", spread)
	}
}

func TestTransportStreams(t *testing.T) {
	srv, _ := startHelper(t, "url", nil)
	c := &http.Client{Transport: &lambdatest.Transport{Server: srv, Invoke: lambdatest.InvokeOptions{Streaming: true, Timeout: 20 * time.Second}}}
	resp, err := c.Get("https://example.invalid/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	buf := make([]byte, 9)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	all := time.Since(start)
	if got := string(buf) + string(rest); got != "data: 0\n\ndata: 1\n\ndata: 2\n\n" {
		t.Errorf("body = %q", got)
	}
	if all-first < 400*time.Millisecond {
		t.Errorf("first event after %v, all after %v: not streamed", first, all)
	}
}

func TestFunctionError(t *testing.T) {
	srv, _ := startHelper(t, "error", nil)
	r := wait(t, srv.Invoke([]byte(`{}`), &lambdatest.InvokeOptions{Timeout: 20 * time.Second}))
	if r.Err == nil || r.Err.Type != "errorString" || r.Err.Message != "boom" {
		t.Fatalf("Err = %+v, want errorString: boom", r.Err)
	}
	if r.Header.Get("Lambda-Runtime-Function-Xray-Error-Cause") == "" {
		t.Errorf("no X-Ray error cause header: %v", r.Header)
	}
	// The runtime goes on: the next invocation is served.
	if r := wait(t, srv.Invoke([]byte(`{}`), &lambdatest.InvokeOptions{Timeout: 20 * time.Second})); r.Err == nil {
		t.Fatal("second invocation: no error")
	}
}

func TestPanicReportsAndExits(t *testing.T) {
	srv, cmd := startHelper(t, "panic", nil)
	r := wait(t, srv.Invoke([]byte(`{}`), &lambdatest.InvokeOptions{Timeout: 20 * time.Second}))
	if r.Err == nil || r.Err.Message != "kaboom" || len(r.Err.Stack) == 0 {
		t.Fatalf("Err = %+v, want the panic with a stack", r.Err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the runtime exited with status 0 after a panic")
		}
	case <-time.After(30 * time.Second):
		t.Error("the runtime did not exit after a panic (aws-lambda-go exits: a dead sandbox)")
	}
}

func TestStreamErrorTrailers(t *testing.T) {
	srv, _ := startHelper(t, "stream-fail", nil)
	r := wait(t, srv.Invoke([]byte(`{"version":"2.0"}`), &lambdatest.InvokeOptions{Streaming: true, Timeout: 20 * time.Second}))
	if r.Err == nil || r.Err.Type != "errorString" || r.Err.Message != "stream broke" || r.Err.Header != "errorString" {
		t.Fatalf("Err = %+v, want errorString: stream broke from the trailers", r.Err)
	}
	if !bytes.HasSuffix(r.Body(), []byte("partial body")) {
		t.Errorf("body = %q, want the part sent before the error", r.Body())
	}
	if got := r.Trailer.Get(lambdatest.TrailerErrorType); got != "errorString" {
		t.Errorf("trailer %s = %q, want errorString", lambdatest.TrailerErrorType, got)
	}
}

// TestConcurrentInvocations: aws-lambda-go with AWS_LAMBDA_MAX_CONCURRENCY
// (Lambda Managed Instances) polls GET .../next that many times at once;
// the fake hands out at most Options.MaxConcurrency invocations at a time
// and matches each response to its invocation by the request id. On
// demand (MaxConcurrency 0) it hands out one at a time even to a runtime
// that polls more.
func TestConcurrentInvocations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		server  int // Options.MaxConcurrency
		runtime int // AWS_LAMBDA_MAX_CONCURRENCY of the process
		want    int // most invocations out at once
	}{
		{"managed", 4, 4, 4},
		{"runtime polls more than the environment's limit", 3, 8, 3},
		{"on demand", 0, 8, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := startHelper(t, "hold", &lambdatest.Options{MaxConcurrency: tc.server}, fmt.Sprintf("AWS_LAMBDA_MAX_CONCURRENCY=%d", tc.runtime))
			var invs []*lambdatest.Invocation
			for i := range 8 {
				invs = append(invs, srv.Invoke([]byte(fmt.Sprintf(`{"n":%d}`, i)), &lambdatest.InvokeOptions{Timeout: time.Minute}))
			}
			for i, inv := range invs {
				r := wait(t, inv)
				var out echoOutput
				if err := json.Unmarshal(r.Body(), &out); err != nil || r.Err != nil {
					t.Fatalf("invocation %d: %q %v %v", i, r.Body(), err, r.Err)
				}
				if out.RequestID != inv.ID || string(out.Event) != fmt.Sprintf(`{"n":%d}`, i) {
					t.Errorf("invocation %d (%s) got the answer %+v", i, inv.ID, out)
				}
			}
			if got := srv.MaxInFlight(); got != tc.want {
				t.Errorf("MaxInFlight = %d, want %d", got, tc.want)
			}
			if got := srv.InFlight(); got != 0 {
				t.Errorf("InFlight = %d after all ended", got)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	timedOut := make(chan string, 1)
	srv, _ := startHelper(t, "sleep", &lambdatest.Options{OnTimeout: func(inv *lambdatest.Invocation) { timedOut <- inv.ID }})
	// Let the runtime start first: the deadline counts from delivery.
	inv := srv.Invoke([]byte(`{}`), &lambdatest.InvokeOptions{Timeout: 500 * time.Millisecond})
	r := wait(t, inv)
	if !r.TimedOut {
		t.Fatalf("TimedOut = false; response %q", r.Body())
	}
	if got := r.FinishedAt.Sub(r.Deadline); got < 0 || got > time.Second {
		t.Errorf("ended %v after the deadline", got)
	}
	select {
	case id := <-timedOut:
		if id != inv.ID {
			t.Errorf("OnTimeout(%s), want %s", id, inv.ID)
		}
	case <-time.After(10 * time.Second):
		t.Error("OnTimeout not called")
	}
}

func TestProtocol(t *testing.T) {
	srv := lambdatest.NewServer(nil)
	defer srv.Close()
	base := "http://" + srv.Addr() + "/2018-06-01/runtime/"
	post := func(path, body string, h map[string]string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("invocation/nope/response", "{}", nil); code != 400 || !strings.Contains(body, "InvalidRequestID") {
		t.Errorf("response for an unknown id: %d %s", code, body)
	}
	code, body := post("init/error", `{"errorMessage":"no table","errorType":"Runtime.InitError"}`, map[string]string{lambdatest.HeaderErrorType: "Runtime.InitError"})
	if code != 202 || body != `{"status":"OK"}` {
		t.Errorf("init/error: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rep, err := srv.InitError(ctx)
	if err != nil || rep.Type != "Runtime.InitError" || rep.Message != "no table" || rep.Header != "Runtime.InitError" {
		t.Errorf("InitError = %+v, %v", rep, err)
	}

	// The event as a runtime receives it.
	inv := srv.Invoke([]byte(`{"hello":"world"}`), &lambdatest.InvokeOptions{Timeout: 10 * time.Second, ClientContext: `{"custom":{"a":"b"}}`})
	resp, err := http.Get(base + "invocation/next")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != `{"hello":"world"}` || resp.Header.Get(lambdatest.HeaderRequestID) != inv.ID ||
		resp.Header.Get(lambdatest.HeaderDeadlineMS) == "" || resp.Header.Get(lambdatest.HeaderTraceID) == "" ||
		resp.Header.Get(lambdatest.HeaderFunctionARN) == "" || resp.Header.Get(lambdatest.HeaderClientContext) == "" ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("next: %q %v", b, resp.Header)
	}
	if code, body := post("invocation/"+inv.ID+"/response", `"ok"`, nil); code != 202 || body != `{"status":"OK"}` {
		t.Errorf("response: %d %s", code, body)
	}
	if code, _ := post("invocation/"+inv.ID+"/error", `{}`, nil); code != 400 {
		t.Errorf("error after response: %d, want 400", code)
	}
	if r := wait(t, inv); string(r.Body()) != `"ok"` || r.Err != nil {
		t.Errorf("response = %q, %v", r.Body(), r.Err)
	}
}

func TestFunctionURLEvent(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "https://x.invalid/mcp?a=1&a=2", strings.NewReader(`{"jsonrpc":"2.0"}`))
	req.Header.Add("Accept", "application/json")
	req.Header.Add("Accept", "text/event-stream")
	req.Header.Set("Cookie", "a=1; b=2")
	ev, err := lambdatest.FunctionURLEvent(req, &lambdatest.URLOptions{IAM: &lambdatest.IAMCaller{UserARN: "arn:aws:iam::111122223333:user/alice", AccountID: "111122223333"}})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Headers["accept"] != "application/json,text/event-stream" || ev.Headers["host"] != lambdatest.DefaultDomain {
		t.Errorf("headers = %v", ev.Headers)
	}
	if diff := cmp.Diff([]string{"a=1", "b=2"}, ev.Cookies); diff != "" {
		t.Errorf("cookies (-want +got):\n%s", diff)
	}
	if ev.RawPath != "/mcp" || ev.RawQueryString != "a=1&a=2" || ev.QueryStringParameters["a"] != "1,2" ||
		ev.RequestContext.HTTP.Method != "POST" || ev.Body != `{"jsonrpc":"2.0"}` || ev.IsBase64Encoded ||
		ev.RequestContext.Authorizer.IAM.UserARN != "arn:aws:iam::111122223333:user/alice" {
		t.Errorf("event = %+v", ev)
	}
}

package lambdatest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testutil"
)

// Function is a bootstrap binary running as a Lambda runtime against its
// own fake Runtime API.
type Function struct {
	API *Server
	Cmd *exec.Cmd
	Out *testutil.LockedBuffer // the process's stdout and stderr
}

// StartFunction runs bin against a new fake Runtime API with env added to
// the test's environment (less its MCPUSH_* and AWS_* variables), in a
// temporary directory. With AWS_LAMBDA_MAX_CONCURRENCY=N in env (what
// Lambda Managed Instances set) the fake hands the process up to N
// invocations at once (Options.MaxConcurrency), else one. The process is killed when the test ends; its
// output is logged if the test failed, and a data race it reported fails
// the test.
func StartFunction(tb testing.TB, bin string, env ...string) *Function {
	tb.Helper()
	var opts Options
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "AWS_LAMBDA_MAX_CONCURRENCY="); ok {
			opts.MaxConcurrency, _ = strconv.Atoi(v)
		}
	}
	api := NewServer(&opts)
	tb.Cleanup(api.Close)
	f := &Function{API: api, Out: &testutil.LockedBuffer{}}
	f.Cmd = exec.Command(bin)
	f.Cmd.Dir = tb.TempDir()
	f.Cmd.Env = Environ("mcpush-test", append([]string{"AWS_LAMBDA_RUNTIME_API=" + api.Addr()}, env...)...)
	f.Cmd.Stdout, f.Cmd.Stderr = f.Out, f.Out
	if err := f.Cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		f.Cmd.Process.Kill()
		f.Cmd.Wait()
		if strings.Contains(f.Out.String(), "WARNING: DATA RACE") {
			tb.Errorf("%s reported a data race", filepath.Base(bin))
		}
		if tb.Failed() {
			tb.Logf("%s output:\n%s", filepath.Base(bin), f.Out.String())
		}
	})
	return f
}

// Environ returns the environment of a function process named name: the
// test's, less its MCPUSH_* and AWS_* variables (a developer's settings
// and credentials stay out), with what Lambda sets
// (AWS_LAMBDA_FUNCTION_NAME, AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256,
// AWS_REGION=us-east-1), then env, which may override them.
func Environ(name string, env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPUSH_") && !strings.HasPrefix(kv, "AWS_") {
			out = append(out, kv)
		}
	}
	out = append(out,
		"AWS_LAMBDA_FUNCTION_NAME="+name,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
		"AWS_REGION=us-east-1",
	)
	return append(out, env...)
}

// Invoke delivers event and waits (at most 2 minutes) for the result; an
// invocation that ran past its deadline fails the test.
func (f *Function) Invoke(tb testing.TB, event []byte, opts *InvokeOptions) *Response {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := f.API.Invoke(event, opts).Wait(ctx)
	if err != nil {
		tb.Fatalf("invoke: %v", err)
	}
	if r.TimedOut {
		tb.Fatalf("invocation %s ran past its deadline", r.RequestID)
	}
	return r
}

// Call invokes a Function URL event and decodes the HTTP response.
func (f *Function) Call(tb testing.TB, event []byte, opts *InvokeOptions) (*Response, *HTTPResponse) {
	tb.Helper()
	r := f.Invoke(tb, event, opts)
	hr, err := r.HTTP()
	if err != nil {
		tb.Fatalf("invocation %s: %v\nbody: %q", r.RequestID, err, r.Body())
	}
	return r, hr
}

// Fixture reads the event dir/NAME.json (the repository's events/ holds
// those `sam local invoke -e` uses).
func Fixture(tb testing.TB, dir, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Edit returns a Function URL event changed by the fns, which see it as
// generic JSON (so that fields aws-lambda-go does not model survive).
func Edit(tb testing.TB, event []byte, fns ...func(ev map[string]any)) []byte {
	tb.Helper()
	var ev map[string]any
	if err := json.Unmarshal(event, &ev); err != nil {
		tb.Fatal(err)
	}
	for _, fn := range fns {
		fn(ev)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// WithSession sets the event's Mcp-Session-Id header.
func WithSession(id string) func(map[string]any) {
	return func(ev map[string]any) { ev["headers"].(map[string]any)["mcp-session-id"] = id }
}

// WithCaller sets the IAM signer of the event; "" removes the authorizer.
func WithCaller(arn string) func(map[string]any) {
	return func(ev map[string]any) {
		rc := ev["requestContext"].(map[string]any)
		if arn == "" {
			delete(rc, "authorizer")
			return
		}
		rc["authorizer"].(map[string]any)["iam"].(map[string]any)["userArn"] = arn
	}
}

// WithBody sets the event's body.
func WithBody(body string) func(map[string]any) {
	return func(ev map[string]any) { ev["body"] = body }
}

// Messages returns the JSON-RPC messages of an HTTP response: its JSON
// body or its SSE events.
func Messages(tb testing.TB, hr *HTTPResponse) []testutil.Message {
	tb.Helper()
	return testutil.Messages(tb, hr.Header.Get("Content-Type"), hr.Body)
}

// All combines event edits into one.
func All(fns ...func(map[string]any)) func(map[string]any) {
	return func(ev map[string]any) {
		for _, fn := range fns {
			fn(ev)
		}
	}
}

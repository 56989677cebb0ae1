package examples_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// buildCounter copies examples/counter into a temporary directory, makes
// it a module of its own that requires this checkout (go mod edit
// -replace), and builds its bootstrap (with -race when the test is).
func buildCounter(t *testing.T) string {
	t.Helper()
	root := testenv.RepoRoot(t)
	dir := filepath.Join(t.TempDir(), "counter")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "examples", "counter"))); err != nil {
		t.Fatal(err)
	}
	// The checkout's go.sum has the sums of every module it needs, so the
	// build needs no checksum database for them.
	rootSum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.OpenFile(filepath.Join(dir, "go.sum"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sum.Write(rootSum)
	if cerr := sum.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bootstrap")
	build := []string{"build", "-o", bin}
	if testenv.RaceEnabled {
		build = append(build, "-race")
	}
	for _, args := range [][]string{
		{"mod", "edit", "-replace", "github.com/mcpush/mcpush=" + root},
		append(build, "."),
	} {
		cmd := exec.Command(gobin, args...)
		cmd.Dir = dir
		// Its own module, not a workspace; -mod=mod adds go.sum entries
		// for dependencies this checkout gained since go.sum was written.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return bin
}

// TestCounter builds the example as a separate module and drives its
// bootstrap through the fake Lambda Runtime API, in stream mode with IAM
// auth: initialize, its tool listed with schemas and called with
// progress, and an event ingested from SNS pushed to a subscribed session.
func TestCounter(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the example build")
	}
	bin := buildCounter(t)
	db := filepath.Join(t.TempDir(), "counter.db")
	f := lambdatest.StartFunction(t, bin, "MCPUSH_STORE=sqlite:"+db)
	fixtures := filepath.Join(testenv.RepoRoot(t), "events")
	opts := &lambdatest.InvokeOptions{Streaming: true, Timeout: 30 * time.Second}
	call := func(session, body string) *lambdatest.HTTPResponse {
		t.Helper()
		ev := lambdatest.Edit(t, lambdatest.Fixture(t, fixtures, "mcp-tools-call"), lambdatest.WithSession(session), lambdatest.WithBody(body))
		_, hr := f.Call(t, ev, opts)
		if hr.StatusCode/100 != 2 {
			t.Fatalf("%s: %d %s", body, hr.StatusCode, hr.Body)
		}
		return hr
	}
	result := func(hr *lambdatest.HTTPResponse, id string, v any) {
		t.Helper()
		for _, m := range lambdatest.Messages(t, hr) {
			if string(m.ID) == id {
				if m.Error != nil {
					t.Fatalf("request %s: error %+v", id, m.Error)
				}
				if err := json.Unmarshal(m.Result, v); err != nil {
					t.Fatalf("request %s: %v: %s", id, err, m.Result)
				}
				return
			}
		}
		t.Fatalf("no response to request %s in %s", id, hr.Body)
	}

	_, hr := f.Call(t, lambdatest.Fixture(t, fixtures, "mcp-initialize"), opts)
	session := hr.Header.Get("Mcp-Session-Id")
	if hr.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %s", hr.StatusCode, hr.Body)
	}
	var init struct{ ServerInfo struct{ Name string } }
	result(hr, "1", &init)
	if init.ServerInfo.Name != "counter" {
		t.Errorf("serverInfo.name = %q, want counter", init.ServerInfo.Name)
	}
	call(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	// Its tool is listed beside the event tools, with inferred schemas.
	var list struct {
		Tools []struct {
			Name         string
			InputSchema  struct{ Properties map[string]any }
			OutputSchema *struct{ Properties map[string]any }
		}
	}
	result(call(session, testutil.RPC(2, "tools/list", nil)), "2", &list)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if tool.Name == "count" && (tool.InputSchema.Properties["to"] == nil || tool.OutputSchema == nil || tool.OutputSchema.Properties["counted"] == nil) {
			t.Errorf("count's schemas: %+v", tool)
		}
	}
	slices.Sort(names)
	if want := []string{"count", "events_recent", "events_wait", "session_info", "topics_list"}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}

	// count with a progress token: progress streamed, then the result.
	hr = call(session, testutil.RPC(3, "tools/call", map[string]any{
		"name": "count", "arguments": map[string]any{"to": 3, "delayMs": 150},
		"_meta": map[string]any{"progressToken": "c-1"},
	}))
	var progress []float64
	for _, m := range lambdatest.Messages(t, hr) {
		if m.Method == "notifications/progress" {
			var p struct {
				ProgressToken string  `json:"progressToken"`
				Progress      float64 `json:"progress"`
				Total         float64 `json:"total"`
			}
			if err := json.Unmarshal(m.Params, &p); err != nil || p.ProgressToken != "c-1" || p.Total != 3 {
				t.Errorf("progress %s", m.Params)
			}
			progress = append(progress, p.Progress)
		}
	}
	if len(progress) == 0 || progress[len(progress)-1] != 3 || !slices.IsSorted(progress) {
		t.Errorf("progress %v: want increasing values ending at 3", progress)
	}
	var counted struct {
		StructuredContent struct{ Counted []int }
	}
	result(hr, "3", &counted)
	if want := []int{1, 2, 3}; !slices.Equal(counted.StructuredContent.Counted, want) {
		t.Errorf("counted %v, want %v", counted.StructuredContent.Counted, want)
	}

	// An event published to SNS reaches the subscribed session's GET
	// stream while it is open.
	call(session, testutil.RPC(4, "resources/subscribe", map[string]any{"uri": "events://builds"}))
	get := f.API.Invoke(lambdatest.Edit(t, lambdatest.Fixture(t, fixtures, "mcp-get-stream"), lambdatest.WithSession(session)),
		&lambdatest.InvokeOptions{Streaming: true, Timeout: 6 * time.Second})
	<-get.Started()
	store, err := sqlitestore.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sns := events.SNSEvent{Records: []events.SNSEventRecord{{SNS: events.SNSEntity{
		MessageID: "m-1", TopicArn: "arn:aws:sns:us-east-1:123456789012:builds",
		Message: `{"build":42}`, Timestamp: time.Now(),
	}}}}
	if sum, err := ingest.New(store, nil).Handle(context.Background(), sns); err != nil || sum.Accepted != 1 {
		t.Fatalf("ingest: %+v, %v", sum, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := get.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ghr, err := r.HTTP()
	if err != nil {
		t.Fatal(err)
	}
	pushed := false
	for _, m := range lambdatest.Messages(t, ghr) {
		var p mcp.ResourceUpdatedParams
		if m.Method == "notifications/resources/updated" && json.Unmarshal(m.Params, &p) == nil && p.URI == "events://builds" {
			pushed = true
		}
	}
	if !pushed {
		t.Errorf("GET stream without resources/updated for events://builds: %s", ghr.Body)
	}
	var recent struct {
		StructuredContent struct {
			Events []struct{ Data json.RawMessage }
		}
	}
	result(call(session, testutil.RPC(5, "tools/call", map[string]any{"name": "events_recent", "arguments": map[string]any{"topic": "builds"}})), "5", &recent)
	if evs := recent.StructuredContent.Events; len(evs) != 1 || string(evs[0].Data) != `{"build":42}` {
		t.Errorf("events_recent: %+v", evs)
	}
}

// TestCounterReadme: the README shows the whole main, as it is.
func TestCounterReadme(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(t), "examples", "counter")
	main, err := os.ReadFile(filepath.Join(dir, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(main)+"```\n") {
		t.Error("examples/counter/README.md does not show main.go as it is")
	}
}

// TestCounterLocalDefaults: run outside Lambda with no MCPUSH_ADDR or
// MCPUSH_STORE, counter listens on 127.0.0.1:8090 (not the 8080 of
// mcpush's own make run) and keeps its store in .mcpush/counter.db, under
// a directory git ignores. Should another program hold port 8090, the
// error names that address, which shows the default as well.
func TestCounterLocalDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the example build")
	}
	bin := buildCounter(t)
	dir := t.TempDir()
	cmd := exec.Command(bin)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPUSH_") && !strings.HasPrefix(kv, "AWS_LAMBDA_RUNTIME_API=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	lines := bufio.NewScanner(stderr)
	var got string
	for got == "" && lines.Scan() {
		var rec struct{ Msg, URL, Err string }
		if json.Unmarshal(lines.Bytes(), &rec) != nil {
			continue
		}
		switch {
		case rec.Msg == "serving MCP":
			got = rec.URL
		case rec.Err != "":
			got = rec.Err
		}
	}
	go func() { // drain
		for lines.Scan() {
		}
	}()
	if got != "http://127.0.0.1:8090/mcp" && !strings.Contains(got, "127.0.0.1:8090: bind: address already in use") {
		t.Errorf("counter without MCPUSH_ADDR: %q; want it serving http://127.0.0.1:8090/mcp", got)
	}
	if _, err := os.Stat(filepath.Join(dir, ".mcpush", "counter.db")); err != nil {
		t.Errorf("counter without MCPUSH_STORE: %v; want its store in .mcpush/counter.db", err)
	}
}

// TestCounterStoreEnv: counter reads the store variables as mcpush's own
// functions do (envconfig.ReadStore), so it agrees with the sns-ingest
// its template deploys beside it: a MCPUSH_CREATE_TABLE other than 1 or
// 0 and a bad MCPUSH_FEED_SHARDS are init errors naming the variable (it
// read "true" as off and ignored MCPUSH_FEED_SHARDS, so a deployment with
// K shards left the server on the default and missed wake-ups).
func TestCounterStoreEnv(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the example build")
	}
	bin := buildCounter(t)
	for _, tc := range []struct {
		env  string
		want string
	}{
		{"MCPUSH_CREATE_TABLE=true", `MCPUSH_CREATE_TABLE="true": want 1 (create a missing DynamoDB table) or 0`},
		{"MCPUSH_FEED_SHARDS=0", `MCPUSH_FEED_SHARDS="0": want an integer from 1 to 512 (every process on one table must use the same)`},
	} {
		f := lambdatest.StartFunction(t, bin, "MCPUSH_STORE=sqlite:"+filepath.Join(t.TempDir(), "counter.db"), tc.env)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rep, err := f.API.InitError(ctx)
		cancel()
		if err != nil || rep.Message != tc.want {
			t.Errorf("%s: init error %+v, %v; want %q", tc.env, rep, err, tc.want)
		}
	}
}

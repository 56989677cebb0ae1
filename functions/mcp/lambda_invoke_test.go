package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/serve"
)

// These tests run the real function binaries (built for the host) as
// Lambda runtimes against a fake Runtime API (internal/lambdatest), with
// the events/*.json fixtures that `sam local invoke -e` uses, on the
// SQLite store (the store contract suite and internal/e2e cover DynamoDB).

const (
	alice = "arn:aws:iam::123456789012:user/alice" // the signer in the fixtures
	bob   = "arn:aws:sts::123456789012:assumed-role/ops/bob"
)

// fixture reads events/NAME.json.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	return lambdatest.Fixture(t, filepath.Join(testenv.RepoRoot(t), "events"), name)
}

// chunkAt returns the arrival time of the body chunk holding the end of
// the first occurrence of s.
func chunkAt(t testing.TB, hr *lambdatest.HTTPResponse, s string) time.Time {
	t.Helper()
	var seen []byte
	for _, c := range hr.Chunks {
		seen = append(seen, c.Data...)
		if bytes.Contains(seen, []byte(s)) {
			return c.At
		}
	}
	t.Fatalf("%q not in the body %q", s, hr.Body)
	return time.Time{}
}

// TestLambdaMCP drives the MCP function through aws-lambda-go's real
// invoke path, in both Lambda modes: initialize, a tool call with SSE
// progress, principals, a GET stream that ends with retry: before the
// deadline, DELETE.
func TestLambdaMCP(t *testing.T) {
	bin := testenv.BuildBinary(t, "./functions/mcp")
	for _, mode := range []serve.Mode{serve.ModeStream, serve.ModeBuffered} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			f := lambdatest.StartFunction(t, bin, "MCPUSH_LAMBDA_MODE="+string(mode), "MCPUSH_STORE=sqlite:"+filepath.Join(t.TempDir(), "mcpush.db"))
			streaming := mode == serve.ModeStream
			inv := func(timeout time.Duration) *lambdatest.InvokeOptions {
				return &lambdatest.InvokeOptions{Streaming: streaming, Timeout: timeout}
			}

			// initialize, from the fixture as is.
			r, hr := f.Call(t, fixture(t, "mcp-initialize"), inv(30*time.Second))
			if got, want := r.Header.Get("Content-Type") == lambdatest.ContentTypeHTTPIntegration, streaming; got != want {
				t.Errorf("runtime response Content-Type %q: http-integration-response = %v, want %v", r.Header.Get("Content-Type"), got, want)
			}
			session := hr.Header.Get("Mcp-Session-Id")
			if hr.StatusCode != http.StatusOK || session == "" {
				t.Fatalf("initialize: %d %v %s", hr.StatusCode, hr.Header, hr.Body)
			}
			var init struct {
				ProtocolVersion string `json:"protocolVersion"`
				ServerInfo      struct{ Name string }
			}
			if m := lambdatest.Messages(t, hr); len(m) != 1 || json.Unmarshal(m[0].Result, &init) != nil || init.ProtocolVersion != "2025-11-25" || init.ServerInfo.Name != "mcpush" {
				t.Fatalf("initialize result: %s", hr.Body)
			}
			notified := lambdatest.Edit(t, fixture(t, "mcp-tools-call"), lambdatest.All(lambdatest.WithSession(session), lambdatest.WithBody(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)))
			if _, hr := f.Call(t, notified, inv(30*time.Second)); hr.StatusCode != http.StatusAccepted {
				t.Fatalf("notifications/initialized: %d %s", hr.StatusCode, hr.Body)
			}

			// Principals: the session is alice's.
			t.Run("principal", func(t *testing.T) {
				call := fixture(t, "mcp-tools-call")
				sessionInfo := lambdatest.WithBody(testutil.RPC(7, "tools/call", map[string]any{"name": "session_info"}))
				if _, hr := f.Call(t, lambdatest.Edit(t, call, lambdatest.All(lambdatest.WithSession(session), sessionInfo, lambdatest.WithCaller(bob))), inv(30*time.Second)); hr.StatusCode != http.StatusNotFound {
					t.Errorf("bob using alice's session: %d %s, want 404", hr.StatusCode, hr.Body)
				}
				if _, hr := f.Call(t, lambdatest.Edit(t, call, lambdatest.All(lambdatest.WithSession(session), sessionInfo, lambdatest.WithCaller(""))), inv(30*time.Second)); hr.StatusCode != http.StatusUnauthorized {
					t.Errorf("no IAM caller: %d %s, want 401", hr.StatusCode, hr.Body)
				}
				_, hr := f.Call(t, lambdatest.Edit(t, call, lambdatest.All(lambdatest.WithSession(session), sessionInfo)), inv(30*time.Second))
				if hr.StatusCode != http.StatusOK || !strings.Contains(string(hr.Body), session) {
					t.Errorf("alice: %d %s", hr.StatusCode, hr.Body)
				}
			})

			// A tool call with progress: events_wait on a quiet topic
			// reports progress each second for 3 seconds.
			t.Run("progress", func(t *testing.T) {
				_, hr := f.Call(t, lambdatest.Edit(t, fixture(t, "mcp-tools-call"), lambdatest.WithSession(session)), inv(30*time.Second))
				if hr.StatusCode != http.StatusOK || !strings.HasPrefix(hr.Header.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("tools/call: %d %v %s", hr.StatusCode, hr.Header, hr.Body)
				}
				var progress []float64
				var result *testutil.Message
				for _, m := range lambdatest.Messages(t, hr) {
					switch {
					case m.Method == "notifications/progress":
						var p struct {
							ProgressToken string  `json:"progressToken"`
							Progress      float64 `json:"progress"`
						}
						json.Unmarshal(m.Params, &p)
						if p.ProgressToken != "wait-1" {
							t.Errorf("progress with token %q", p.ProgressToken)
						}
						progress = append(progress, p.Progress)
					case string(m.ID) == "2":
						result = &m
					}
				}
				if len(progress) < 3 {
					t.Errorf("%d progress notifications (%v), want 3 or more", len(progress), progress)
				}
				for i := 1; i < len(progress); i++ {
					if progress[i] <= progress[i-1] {
						t.Errorf("progress not increasing: %v", progress)
					}
				}
				if result == nil || !strings.Contains(string(result.Result), `"timedOut":true`) {
					t.Fatalf("no events_wait result in %s", hr.Body)
				}
				spread := chunkAt(t, hr, `"id":2,`).Sub(chunkAt(t, hr, "notifications/progress"))
				if streaming && spread < time.Second {
					t.Errorf("first progress %v before the result: not streamed", spread)
				}
				if !streaming && spread != 0 {
					t.Errorf("buffered response arrived in pieces (%v apart)", spread)
				}
			})

			// A GET stream ends with retry: before the deadline: the
			// invocation has 4s, the stream margin is 2s.
			t.Run("get", func(t *testing.T) {
				const timeout = 4 * time.Second
				r, hr := f.Call(t, lambdatest.Edit(t, fixture(t, "mcp-get-stream"), lambdatest.WithSession(session)), inv(timeout))
				if hr.StatusCode != http.StatusOK || !strings.HasPrefix(hr.Header.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("GET: %d %v %s", hr.StatusCode, hr.Header, hr.Body)
				}
				evs := testutil.ParseSSE(hr.Body)
				if len(evs) == 0 || evs[len(evs)-1].Retry == "" {
					t.Fatalf("GET stream does not end with retry: %q", hr.Body)
				}
				if left := r.Deadline.Sub(r.FinishedAt); left < time.Second {
					t.Errorf("GET stream ended %v before the deadline, want >= 1s (margin 2s)", left)
				}
				if took := r.FinishedAt.Sub(r.StartedAt); took < time.Second {
					t.Errorf("GET stream ended after %v; it should stay open until the margin", took)
				}
				if streaming {
					// The priming event arrived at once, the retry at the end.
					if spread := hr.Chunks[len(hr.Chunks)-1].At.Sub(hr.Chunks[0].At); spread < time.Second {
						t.Errorf("GET stream chunks within %v: not streamed", spread)
					}
				}
			})

			t.Run("delete", func(t *testing.T) {
				if _, hr := f.Call(t, lambdatest.Edit(t, fixture(t, "mcp-delete"), lambdatest.WithSession(session)), inv(30*time.Second)); hr.StatusCode != http.StatusOK {
					t.Fatalf("DELETE: %d %s", hr.StatusCode, hr.Body)
				}
				if _, hr := f.Call(t, lambdatest.Edit(t, fixture(t, "mcp-get-stream"), lambdatest.WithSession(session)), inv(30*time.Second)); hr.StatusCode != http.StatusNotFound {
					t.Errorf("GET after DELETE: %d %s, want 404", hr.StatusCode, hr.Body)
				}
			})
		})
	}
}

// TestLambdaAuthNone: with MCPUSH_AUTH=none (Function URL AuthType NONE)
// a request without an IAM signer is the anonymous principal.
func TestLambdaAuthNone(t *testing.T) {
	f := lambdatest.StartFunction(t, testenv.BuildBinary(t, "./functions/mcp"),
		"MCPUSH_AUTH=none", "MCPUSH_STORE=sqlite:"+filepath.Join(t.TempDir(), "mcpush.db"))
	_, hr := f.Call(t, lambdatest.Edit(t, fixture(t, "mcp-initialize"), lambdatest.WithCaller("")), &lambdatest.InvokeOptions{Streaming: true, Timeout: 30 * time.Second})
	if hr.StatusCode != http.StatusOK || hr.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize without a signer: %d %s", hr.StatusCode, hr.Body)
	}
}

// TestLambdaInitError: a configuration error is reported through
// /runtime/init/error before the process exits.
func TestLambdaInitError(t *testing.T) {
	bin := testenv.BuildBinary(t, "./functions/mcp")
	for _, tc := range []struct {
		name, want string
		env        []string
	}{
		{"no store", "MCPUSH_STORE is not set", nil},
		{"bad mode", `MCPUSH_LAMBDA_MODE="websocket"`, []string{"MCPUSH_LAMBDA_MODE=websocket"}},
		{"bad auth", `MCPUSH_AUTH="jwt"`, []string{"MCPUSH_AUTH=jwt"}},
		{"oauth without issuer", "MCPUSH_OAUTH_ISSUER is not set", []string{"MCPUSH_AUTH=oauth"}},
		{"oauth with a remote http issuer", "http only on a loopback host", []string{"MCPUSH_AUTH=oauth", "MCPUSH_OAUTH_ISSUER=http://as.example.com"}},
		// The production binary carries no conformance fixtures.
		{"fixtures", "no test fixtures", []string{"MCPUSH_FIXTURES=conformance"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if tc.name != "no store" {
				env = append(env, "MCPUSH_STORE=sqlite:"+filepath.Join(t.TempDir(), "mcpush.db"))
			}
			f := lambdatest.StartFunction(t, bin, env...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rep, err := f.API.InitError(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(rep.Message, tc.want) || rep.Header != "Runtime.InitError" {
				t.Errorf("init error %+v (header %q), want a message with %q", rep, rep.Header, tc.want)
			}
			if err := f.Cmd.Wait(); err == nil {
				t.Error("the process exited with status 0")
			}
		})
	}
}

// TestLambdaSNS runs sns-ingest and the MCP function (buffered mode, as
// behind an HTTP API) on one store: a batch with a bad record fails the
// invocation through /error while its good record is stored and reaches
// a subscribed session, whose waiting long-poll GET returns at once.
func TestLambdaSNS(t *testing.T) {
	mcpBin := testenv.BuildBinary(t, "./functions/mcp")
	ingestBin := testenv.BuildBinary(t, "./functions/sns-ingest")
	store := "MCPUSH_STORE=sqlite:" + filepath.Join(t.TempDir(), "mcpush.db")
	ingest := lambdatest.StartFunction(t, ingestBin, store)
	mcpf := lambdatest.StartFunction(t, mcpBin, store, "MCPUSH_LAMBDA_MODE=buffered", "MCPUSH_AUTH=none")
	opts := &lambdatest.InvokeOptions{Timeout: 30 * time.Second}
	post := func(session, body string) *lambdatest.HTTPResponse {
		t.Helper()
		_, hr := mcpf.Call(t, lambdatest.Edit(t, fixture(t, "mcp-tools-call"), lambdatest.All(lambdatest.WithCaller(""), lambdatest.WithSession(session), lambdatest.WithBody(body))), opts)
		if hr.StatusCode/100 != 2 {
			t.Fatalf("%s: %d %s", body, hr.StatusCode, hr.Body)
		}
		return hr
	}

	_, hr := mcpf.Call(t, lambdatest.Edit(t, fixture(t, "mcp-initialize"), lambdatest.WithCaller("")), opts)
	session := hr.Header.Get("Mcp-Session-Id")
	if session == "" {
		t.Fatalf("initialize: %d %s", hr.StatusCode, hr.Body)
	}
	post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	post(session, testutil.RPC(2, "resources/subscribe", map[string]any{"uri": "events://orders"}))
	post(session, testutil.RPC(3, "logging/setLevel", map[string]any{"level": "info"}))

	// A long poll that waits: it is answered when the event arrives.
	getOpts := &lambdatest.InvokeOptions{Timeout: 60 * time.Second}
	poll := mcpf.API.Invoke(lambdatest.Edit(t, fixture(t, "mcp-get-stream"), lambdatest.All(lambdatest.WithCaller(""), lambdatest.WithSession(session))), getOpts)
	<-poll.Started()
	time.Sleep(500 * time.Millisecond)

	r := ingest.Invoke(t, fixture(t, "sns-bad-record"), opts)
	if r.Err == nil {
		t.Fatalf("a batch with a bad record succeeded: %s", r.Body())
	}
	if !strings.Contains(r.Err.Message, "0f8b3c1e-1111-5a5b-9c9d-000000000006") || strings.Contains(r.Err.Message, "0f8b3c1e-1111-5a5b-9c9d-000000000005") {
		t.Errorf("error %q should name the bad record only", r.Err.Message)
	}
	published := time.Now()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, err := poll.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	phr, err := pr.HTTP()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(phr.Body), "notifications/resources/updated") || !strings.Contains(string(phr.Body), "o-1003") {
		t.Errorf("long poll body %q: want resources/updated and the event", phr.Body)
	}
	if evs := testutil.ParseSSE(phr.Body); len(evs) == 0 || evs[len(evs)-1].Retry == "" {
		t.Errorf("long poll does not end with retry: %q", phr.Body)
	}
	if wait := pr.FinishedAt.Sub(published); wait > 3*time.Second {
		t.Errorf("long poll answered %v after the event (poll window 5s): it should return once it has messages", wait)
	}

	// The other fixtures go through; the duplicate is a success.
	for _, name := range []string{"sns-event", "sns-registry", "sns-plain-text", "sns-duplicate", "sns-duplicate"} {
		if r := ingest.Invoke(t, fixture(t, name), opts); r.Err != nil {
			t.Errorf("%s: %v", name, r.Err)
		}
	}
	hr = post(session, testutil.RPC(4, "tools/call", map[string]any{"name": "events_recent", "arguments": map[string]any{"topic": "orders"}}))
	var recent struct {
		StructuredContent struct {
			Events []struct {
				MessageID string `json:"messageId"`
				Data      struct {
					OrderID string `json:"orderId"`
				} `json:"data"`
			} `json:"events"`
		} `json:"structuredContent"`
	}
	if m := lambdatest.Messages(t, hr); len(m) != 1 || json.Unmarshal(m[0].Result, &recent) != nil {
		t.Fatalf("events_recent: %s", hr.Body)
	}
	var orders []string
	for _, ev := range recent.StructuredContent.Events {
		orders = append(orders, ev.Data.OrderID)
	}
	slices.Sort(orders)
	if want := []string{"o-1001", "o-1002", "o-1003"}; !slices.Equal(orders, want) {
		t.Errorf("orders events %v, want %v (each once)", orders, want)
	}
	hr = post(session, testutil.RPC(5, "tools/call", map[string]any{"name": "topics_list"}))
	if !strings.Contains(string(hr.Body), "deploys") {
		t.Errorf("topics_list lacks the plain-text topic: %s", hr.Body)
	}
	// A process rereads the registry hashes at most every 500ms.
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		hr = post(session, testutil.RPC(6, "prompts/list", nil))
		if strings.Contains(string(hr.Body), "summarize_orders") {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Errorf("prompts/list lacks the published prompt: %s", hr.Body)
			break
		}
	}
}

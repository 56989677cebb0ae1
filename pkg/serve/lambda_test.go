package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// In-process tests of the Lambda glue: the handler is driven through
// lambdaurl.Wrap and httpadapter, as lambda.Start would, without a
// runtime. lambda_invoke_test.go runs the real binaries.

// newTestHandler returns a LambdaHandler in mode whose routes are those of
// mux (nil: the real ones), and the buffer its logs go to.
func newTestHandler(t *testing.T, mode Mode, mux *http.ServeMux) (*LambdaHandler, *bytes.Buffer) {
	t.Helper()
	return newTestHandlerOpts(t, &LambdaOptions{Mode: mode, Auth: AuthIAM}, mux)
}

func newTestHandlerOpts(t *testing.T, opts *LambdaOptions, mux *http.ServeMux) (*LambdaHandler, *bytes.Buffer) {
	t.Helper()
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	var logs bytes.Buffer
	logger := slog.New(RequestIDHandler{slog.NewJSONHandler(&logs, nil)})
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpush", Version: "test"}, store, &mcp.ServerOptions{Logger: logger})
	o := *opts
	o.Logger = logger
	h, err := NewLambdaHandler(srv, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	if mux != nil {
		h.mux = mux
	}
	return h, &logs
}

// serve runs one request through the adapter of mode and returns the
// status, headers and body the caller would see.
func serve(t *testing.T, h *LambdaHandler, method, path string, header map[string]string, iamARN string) (int, map[string]string, string) {
	t.Helper()
	code, hdr, body, err := invoke(h, "req-1", method, path, header, iamARN)
	if err != nil {
		t.Fatal(err)
	}
	return code, hdr, body
}

// invoke is serve as the invocation requestID; safe in any goroutine.
func invoke(h *LambdaHandler, requestID, method, path string, header map[string]string, iamARN string) (int, map[string]string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: requestID})
	if h.mode == ModeStream {
		ev := &events.LambdaFunctionURLRequest{
			RawPath: path, Headers: header,
			RequestContext: events.LambdaFunctionURLRequestContext{
				DomainName: "x.lambda-url.us-east-1.on.aws",
				HTTP:       events.LambdaFunctionURLRequestContextHTTPDescription{Method: method, Path: path},
			},
		}
		if iamARN != "" {
			ev.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{
				IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: iamARN},
			}
		}
		resp, err := lambdaurl.Wrap(h)(ctx, ev)
		if err != nil {
			return 0, nil, "", err
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, nil, "", err
		}
		return resp.StatusCode, resp.Headers, string(body), nil
	}
	ev := events.APIGatewayV2HTTPRequest{
		RawPath: path, Headers: header,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: "x.execute-api.us-east-1.amazonaws.com",
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path},
		},
	}
	if iamARN != "" {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: iamARN},
		}
	}
	resp, err := httpadapter.NewV2(h).ProxyWithContext(ctx, ev)
	if err != nil {
		return 0, nil, "", err
	}
	return resp.StatusCode, resp.Headers, resp.Body, nil
}

var modes = []Mode{ModeStream, ModeBuffered}

func TestPanicBecomes500(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/early", func(w http.ResponseWriter, r *http.Request) { panic("early") })
	mux.HandleFunc("/late", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("data: 1\n\n"))
		panic("late")
	})
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			h, logs := newTestHandler(t, mode, mux)
			// Before the headers: pkg/mcp's answer to a server fault,
			// 500 without Retry-After (a bug: retrying would hit it
			// again), naming the request id, not the panic.
			code, header, body := serve(t, h, "POST", "/early", nil, "")
			want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error (request id req-1)","data":{"requestId":"req-1"}}}`
			if code != http.StatusInternalServerError || body != want || header["Retry-After"] != "" || header["Content-Type"] != "application/json" {
				t.Errorf("panic before the headers: %d %q (Retry-After %q), want 500 %s", code, body, header["Retry-After"], want)
			}
			// After the headers, the response ends where it was.
			code, _, body = serve(t, h, "POST", "/late", nil, "")
			if code != http.StatusOK || body != "data: 1\n\n" {
				t.Errorf("panic after the headers: %d %q", code, body)
			}
			if n := strings.Count(logs.String(), `"msg":"panic serving request"`); n != 2 {
				t.Errorf("%d panic log records, want 2:\n%s", n, logs)
			}
			if !strings.Contains(logs.String(), `"requestId":"req-1"`) {
				t.Errorf("log records without the Lambda request id:\n%s", logs)
			}
		})
	}
}

// TestLambdaConcurrentInvocations: under Lambda Managed Instances
// aws-lambda-go calls one LambdaHandler from many invocations at once.
// 16 invocations are in the handler together (each waits until all have
// arrived, which a handler that served one at a time would never see);
// every second one panics. Each gets its own answer, each panic's 500
// names its own request id, and every access-log record carries the
// request id and path of its own invocation: no state is shared between
// invocations.
func TestLambdaConcurrentInvocations(t *testing.T) {
	const n = 16
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			var arrived sync.WaitGroup
			arrived.Add(n)
			all := make(chan struct{})
			go func() { arrived.Wait(); close(all) }()
			mux := http.NewServeMux()
			mux.HandleFunc("/inv/{i}", func(w http.ResponseWriter, r *http.Request) {
				arrived.Done()
				select {
				case <-all:
				case <-time.After(20 * time.Second):
					http.Error(w, "the invocations did not run at once", http.StatusGatewayTimeout)
					return
				}
				i, _ := strconv.Atoi(r.PathValue("i"))
				if i%2 == 1 {
					panic("invocation " + r.PathValue("i"))
				}
				w.Header().Set("Content-Type", "text/plain")
				fmt.Fprintf(w, "answer %d", i)
			})
			h, logs := newTestHandlerOpts(t, &LambdaOptions{Mode: mode, Auth: AuthNone, MaxConcurrency: n}, mux)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := fmt.Sprintf("req-%02d", i)
					code, _, body, err := invoke(h, id, "POST", fmt.Sprintf("/inv/%d", i), nil, "")
					switch {
					case err != nil:
						t.Errorf("%s: %v", id, err)
					case i%2 == 0 && (code != http.StatusOK || body != fmt.Sprintf("answer %d", i)):
						t.Errorf("%s: %d %q, want its own answer", id, code, body)
					case i%2 == 1 && (code != http.StatusInternalServerError || !strings.Contains(body, "(request id "+id+")")):
						t.Errorf("%s panicked: %d %q, want a 500 naming %s", id, code, body, id)
					}
				}()
			}
			wg.Wait()
			seen := 0
			for _, line := range strings.Split(logs.String(), "\n") {
				var rec struct {
					Msg, RequestID, Path string
					Status               int
				}
				if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "request" {
					continue
				}
				seen++
				var i int
				if _, err := fmt.Sscanf(rec.RequestID, "req-%d", &i); err != nil || rec.Path != fmt.Sprintf("/inv/%d", i) {
					t.Errorf("access-log record of %s is about %s", rec.RequestID, rec.Path)
				}
				if want := []int{http.StatusOK, http.StatusInternalServerError}[i%2]; rec.Status != want {
					t.Errorf("access-log record of %s: status %d, want %d", rec.RequestID, rec.Status, want)
				}
			}
			if seen != n {
				t.Errorf("%d access-log records, want %d", seen, n)
			}
		})
	}
}

func TestIAMPrincipal(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/whoami", func(w http.ResponseWriter, r *http.Request) {
		p, _, claims, err := IAMAuthenticator{}.AuthenticateClaims(r)
		if err != nil || claims["arn"] != p {
			http.Error(w, fmt.Sprint(err, claims), http.StatusUnauthorized)
			return
		}
		io.WriteString(w, p)
	})
	var _ mcp.ClaimsAuthenticator = IAMAuthenticator{} // the ARN is claim "arn" for access rules
	const arn = "arn:aws:sts::123456789012:assumed-role/ops/alice"
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			h, _ := newTestHandler(t, mode, mux)
			if code, _, body := serve(t, h, "GET", "/whoami", nil, arn); code != 200 || body != arn {
				t.Errorf("signed: %d %q, want %q", code, body, arn)
			}
			if code, _, body := serve(t, h, "GET", "/whoami", nil, ""); code != http.StatusUnauthorized {
				t.Errorf("unsigned: %d %q, want 401", code, body)
			}
		})
	}
}

func TestBufferedJoinsHeaders(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/accept", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Header.Get("Accept")) })
	h, _ := newTestHandler(t, ModeBuffered, mux)
	// httpadapter splits "a, b" into two values; pkg/mcp reads one.
	_, _, body := serve(t, h, "GET", "/accept", map[string]string{"accept": "application/json, text/event-stream"}, "")
	if body != "application/json, text/event-stream" {
		t.Errorf("Accept = %q", body)
	}
}

// TestBufferedPollEndsWithRetry: a buffered GET with nothing to deliver
// returns after the poll window, ending with retry:.
func TestBufferedPollEndsWithRetry(t *testing.T) {
	for _, tc := range []struct {
		retry time.Duration
		want  string
	}{
		{0, "retry: 1000\n\n"},
		{250 * time.Millisecond, "retry: 250\n\n"},
	} {
		t.Run(tc.want[:len(tc.want)-2], func(t *testing.T) { testBufferedPoll(t, tc.retry, tc.want) })
	}
}

func testBufferedPoll(t *testing.T, retry time.Duration, wantEnd string) {
	h, _ := newTestHandlerOpts(t, &LambdaOptions{Mode: ModeBuffered, MaxGETStream: 300 * time.Millisecond, RetryInterval: retry}, nil)
	const arn = "arn:aws:iam::123456789012:user/alice"
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	session := initialize(t, h, init, arn)
	start := time.Now()
	code, hdr, body := serve(t, h, "GET", "/mcp", map[string]string{"accept": "text/event-stream", "mcp-session-id": session}, arn)
	if code != 200 || !strings.HasPrefix(hdr["Content-Type"], "text/event-stream") {
		t.Fatalf("GET: %d %v %q", code, hdr, body)
	}
	// 2025-06-18 has no priming event: the retry: comes from servePoll.
	if !strings.HasSuffix(body, wantEnd) {
		t.Errorf("body %q does not end with retry:", body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("GET took %v with a 300ms window", took)
	}
}

func initialize(t *testing.T, h *LambdaHandler, body, arn string) string {
	t.Helper()
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-init"})
	resp, err := httpadapter.NewV2(h).ProxyWithContext(ctx, events.APIGatewayV2HTTPRequest{
		RawPath: "/mcp", Body: body,
		Headers: map[string]string{"accept": "application/json, text/event-stream", "content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/mcp"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: arn}},
		},
	})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("initialize: %v %d %s", err, resp.StatusCode, resp.Body)
	}
	var m struct{ Result json.RawMessage }
	if json.Unmarshal([]byte(resp.Body), &m) != nil || m.Result == nil {
		t.Fatalf("initialize: %s", resp.Body)
	}
	return resp.Headers["Mcp-Session-Id"]
}

func TestIsMessageEvent(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"id: s.1\ndata: {\"jsonrpc\":\"2.0\"}\n\n", true},
		{"data: {\"jsonrpc\":\"2.0\"}\n\n", true},
		{"id: s.0\nretry: 1000\ndata: \n\n", false},
		{": keepalive\n\n", false},
		{"retry: 1000\n\n", false},
	} {
		if got := isMessageEvent([]byte(tc.in)); got != tc.want {
			t.Errorf("isMessageEvent(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

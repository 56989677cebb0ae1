package main

import (
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/emfcheck"
	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/serve"
)

// TestLambdaMetricsEMF runs the function as a Lambda runtime in both
// modes and reads the CloudWatch EMF lines each invocation prints on
// stdout (MCPUSH_METRICS defaults to emf in Lambda): every one is a valid
// EMF document (internal/emfcheck: AWS's specification), in the mcpush
// namespace, with the Function dimension (the Lambda function's name)
// beside the metric's own, and the units of the metric set; each
// invocation prints its own lines before its response ends, and they
// count what it did: the store requests of an initialize, the 401 of an
// unsigned request, the GET stream it held.
func TestLambdaMetricsEMF(t *testing.T) {
	bin := testenv.BuildBinary(t, "./functions/mcp")
	for _, mode := range []serve.Mode{serve.ModeStream, serve.ModeBuffered} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			f := lambdatest.StartFunction(t, bin, "MCPUSH_LAMBDA_MODE="+string(mode), "MCPUSH_STORE=sqlite:"+filepath.Join(t.TempDir(), "mcpush.db"))
			inv := func(timeout time.Duration) *lambdatest.InvokeOptions {
				return &lambdatest.InvokeOptions{Streaming: mode == serve.ModeStream, Timeout: timeout}
			}
			// call invokes event and returns the metric points of the
			// EMF lines the invocation printed.
			seen := 0
			call := func(name string, event []byte, timeout time.Duration, wantStatus int) (*lambdatest.HTTPResponse, []emfcheck.Point) {
				t.Helper()
				_, hr := f.Call(t, event, inv(timeout))
				if hr.StatusCode != wantStatus {
					t.Fatalf("%s: %d %s", name, hr.StatusCode, hr.Body)
				}
				// The lines were written (in one write) before the response
				// ended; the pipe from the process may lag a little behind:
				// wait for them, then for the output to stay still.
				var docs []emfcheck.Doc
				last := ""
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
					out := f.Out.String()
					all, err := emfcheck.Lines(out)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if docs = all[seen:]; (len(docs) > 0 && out == last) || time.Now().After(deadline) {
						seen = len(all)
						break
					}
					last = out
				}
				if len(docs) == 0 {
					t.Fatalf("%s: no EMF line printed", name)
				}
				ps := emfcheck.Points(docs)
				for _, p := range ps {
					if p.Namespace != "mcpush" || p.Dimensions["Function"] != "mcpush-test" {
						t.Errorf("%s: %s in namespace %q with dimensions %v", name, p.Name, p.Namespace, p.Dimensions)
					}
					if len(p.Dimensions) > 3 {
						t.Errorf("%s: %s has %d dimensions: %v", name, p.Name, len(p.Dimensions), p.Dimensions)
					}
					if want := wantUnits[p.Name]; p.Unit != want {
						t.Errorf("%s: %s in %q, want %q", name, p.Name, p.Unit, want)
					}
				}
				for _, d := range docs {
					for _, dir := range d.Directives() {
						for _, set := range dir.Dimensions {
							if len(set) == 0 || set[0] != "Function" {
								t.Errorf("%s: dimension sets %v, want each to start with Function", name, dir.Dimensions)
							}
						}
					}
				}
				return hr, ps
			}
			total := func(ps []emfcheck.Point, name, dim, value string) float64 {
				var n float64
				for _, p := range ps {
					if p.Name == name && (dim == "" || p.Dimensions[dim] == value) {
						for _, v := range p.Values {
							n += v
						}
					}
				}
				return n
			}

			hr, ps := call("initialize", fixture(t, "mcp-initialize"), 30*time.Second, http.StatusOK)
			session := hr.Header.Get("Mcp-Session-Id")
			if w := total(ps, "StoreRequests", "Access", "write"); w < 1 {
				t.Errorf("initialize: %v store writes counted, want at least 1 (the session)", w)
			}
			if n := total(ps, "Refusals", "", ""); n != 0 {
				t.Errorf("initialize: %v refusals counted", n)
			}

			_, ps = call("unsigned", lambdatest.Edit(t, fixture(t, "mcp-tools-call"), lambdatest.All(lambdatest.WithSession(session), lambdatest.WithCaller(""))), 30*time.Second, http.StatusUnauthorized)
			if n := total(ps, "Refusals", "Status", "401"); n != 1 {
				t.Errorf("an unsigned request: %v refusals with status 401 counted, want 1", n)
			}
			if got := slices.Sorted(slices.Values(names(ps))); !slices.Contains(got, "Refusals") {
				t.Errorf("unsigned: metrics %v", got)
			}

			hr, ps = call("get", lambdatest.Edit(t, fixture(t, "mcp-get-stream"), lambdatest.WithSession(session)), 4*time.Second, http.StatusOK)
			if evs := testutil.ParseSSE(hr.Body); len(evs) == 0 || evs[len(evs)-1].Retry == "" {
				t.Errorf("GET stream: %q", hr.Body)
			}
			if n := total(ps, "HeldStreamsOpened", "Kind", "get"); n != 1 {
				t.Errorf("a GET stream: %v held streams of kind get opened, want 1", n)
			}
			if !strings.Contains(f.Out.String(), `"Namespace":"mcpush"`) {
				t.Error("no namespace in the output")
			}
		})
	}
}

// wantUnits are the CloudWatch units of the metrics.
var wantUnits = map[string]string{
	"EventsIngested": "Count", "FanOutSessions": "Count", "Deliveries": "Count", "DeliveryLatency": "Seconds",
	"HeldStreams": "Count", "HeldStreamsOpened": "Count", "WebhookSubscriptions": "Count", "WebhookVerifications": "Count",
	"Refusals": "Count", "StoreRequests": "Count", "StoreThrottles": "Count", "QueueDepth": "Count", "QueueAge": "Seconds",
}

func names(ps []emfcheck.Point) []string {
	var ns []string
	for _, p := range ps {
		ns = append(ns, p.Name)
	}
	return ns
}

package lambdatest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// InvokeAPI is a fake of the Lambda Invoke API (POST
// /2015-03-31/functions/NAME/invocations) in front of functions whose
// sandboxes are fake Runtime APIs, for the asynchronous invocations a
// function makes of itself: an Event invocation is answered 202 and
// queued on the next target (round robin), as Lambda would start it in
// any sandbox. Point a function's SDK at it with AWS_ENDPOINT_URL_LAMBDA.
// Other invocation types are refused (501): nothing here waits for a
// result. Safe for concurrent use.
type InvokeAPI struct {
	ts   *httptest.Server
	opts *InvokeOptions

	mu       sync.Mutex
	targets  []*Server
	next     int
	invs     []*Invocation
	payloads [][]byte
	added    chan struct{}
}

// NewInvokeAPI starts a fake Invoke API that queues invocations on
// targets with opts (nil: the targets' defaults); it is closed when the
// test ends.
func NewInvokeAPI(tb testing.TB, opts *InvokeOptions, targets ...*Server) *InvokeAPI {
	a := &InvokeAPI{opts: opts, targets: targets, added: make(chan struct{}, 100)}
	a.ts = httptest.NewServer(http.HandlerFunc(a.serve))
	tb.Cleanup(a.ts.Close)
	return a
}

// URL is the API's endpoint.
func (a *InvokeAPI) URL() string { return a.ts.URL }

// Invocations returns the invocations queued so far, in order.
func (a *InvokeAPI) Invocations() []*Invocation {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*Invocation(nil), a.invs...)
}

// Payloads returns the events of the invocations queued so far, in order.
func (a *InvokeAPI) Payloads() [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([][]byte(nil), a.payloads...)
}

// Added receives once per queued invocation.
func (a *InvokeAPI) Added() <-chan struct{} { return a.added }

func (a *InvokeAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/2015-03-31/functions/") || !strings.HasSuffix(r.URL.Path, "/invocations") {
		http.Error(w, `{"message":"not found"}`, http.StatusNotFound)
		return
	}
	if t := r.Header.Get("X-Amz-Invocation-Type"); t != "Event" {
		http.Error(w, `{"message":"the fake Invoke API takes only Event invocations, not `+t+`"}`, http.StatusNotImplemented)
		return
	}
	payload, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	target := a.targets[a.next%len(a.targets)]
	a.next++
	a.invs = append(a.invs, target.Invoke(payload, a.opts))
	a.payloads = append(a.payloads, payload)
	a.mu.Unlock()
	select {
	case a.added <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusAccepted)
}

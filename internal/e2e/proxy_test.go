package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// seen is what a test backend saw of one request.
type seen struct {
	backend          int
	host             string
	contentLength    int64
	transferEncoding []string
	body             string
}

// testBackends starts n HTTP servers that record what they see (requests
// returns the requests whose bodies were read, arrivals counts requests as
// soon as their headers arrive). /sse streams an event, waits for release
// to be closed, and streams another.
func testBackends(t *testing.T, n int, release <-chan struct{}) (urls []string, requests func() []seen, arrivals *atomic.Int64) {
	var mu sync.Mutex
	var log []seen
	arrivals = new(atomic.Int64)
	for i := range n {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrivals.Add(1)
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			log = append(log, seen{i, r.Host, r.ContentLength, r.TransferEncoding, string(body)})
			mu.Unlock()
			if r.URL.Path != "/sse" {
				fmt.Fprintf(w, "backend %d", i)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: 1\ndata: first\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, "id: 2\ndata: second\n\n")
		}))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	return urls, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(log)
	}, arrivals
}

func TestProxyRoundRobin(t *testing.T) {
	urls, requests, _ := testBackends(t, 3, nil)
	p := NewProxy(t, urls...)

	for i := range 7 {
		req, _ := http.NewRequest(http.MethodPost, p.URL+"/mcp", strings.NewReader(fmt.Sprintf("request %d", i)))
		req.Host = "client.example:1234"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("backend %d", i%3); string(body) != want {
			t.Errorf("request %d answered by %q, want %q", i, body, want)
		}
	}
	if got, want := p.Counts(), []int64{3, 2, 2}; !slices.Equal(got, want) {
		t.Errorf("Counts() = %v, want %v", got, want)
	}
	for i, s := range requests() {
		if s.host != "client.example:1234" {
			t.Errorf("request %d reached backend %d with Host %q, want the client's", i, s.backend, s.host)
		}
		if want := fmt.Sprintf("request %d", i); s.body != want {
			t.Errorf("request %d body = %q, want %q", i, s.body, want)
		}
	}
}

// TestProxyBuffersRequestBody sends a chunked body in two parts, some time
// apart: the backend must get it whole, with a Content-Length.
func TestProxyBuffersRequestBody(t *testing.T) {
	urls, requests, arrivals := testBackends(t, 1, nil)
	p := NewProxy(t, urls...)

	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(`{"jsonrpc":"2.0",`))
		time.Sleep(200 * time.Millisecond)
		if n := arrivals.Load(); n != 0 {
			pw.CloseWithError(fmt.Errorf("the backend got the request (%d) before its body was complete", n))
			return
		}
		pw.Write([]byte(`"method":"ping","id":1}`))
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/mcp", pr) // unknown length: chunked
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := requests()
	if len(got) != 1 {
		t.Fatalf("backend saw %d requests, want 1", len(got))
	}
	want := `{"jsonrpc":"2.0","method":"ping","id":1}`
	if got[0].body != want || got[0].contentLength != int64(len(want)) || len(got[0].transferEncoding) != 0 {
		t.Errorf("backend got body %q, Content-Length %d, Transfer-Encoding %v; want %q, %d, none",
			got[0].body, got[0].contentLength, got[0].transferEncoding, want, len(want))
	}
}

// TestProxyStreamsSSE checks that an SSE event reaches the client while the
// backend is still writing the response.
func TestProxyStreamsSSE(t *testing.T) {
	release := make(chan struct{})
	urls, _, _ := testBackends(t, 2, release)
	p := NewProxy(t, urls...)

	resp, err := http.Get(p.URL + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stream ended early")
			}
			return l
		case <-time.After(5 * time.Second):
			t.Fatal("no SSE line within 5s: the proxy buffers the response")
		}
		return ""
	}
	for _, want := range []string{"id: 1", "data: first", ""} {
		if got := next(); got != want {
			t.Fatalf("got line %q, want %q", got, want)
		}
	}
	close(release) // only now does the backend write the second event
	for _, want := range []string{"id: 2", "data: second", ""} {
		if got := next(); got != want {
			t.Fatalf("got line %q, want %q", got, want)
		}
	}
	if l, ok := <-lines; ok {
		t.Fatalf("got line %q after the last event, want the end of the stream", l)
	}
}

// TestProxyDeadBackend checks that a request to a dead backend gets 502 and
// is not retried on another backend.
func TestProxyDeadBackend(t *testing.T) {
	urls, requests, _ := testBackends(t, 2, nil)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	p := NewProxy(t, urls[0], dead.URL, urls[1])

	var codes []int
	for range 3 {
		resp, err := http.Post(p.URL+"/mcp", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if want := []int{200, 502, 200}; !slices.Equal(codes, want) {
		t.Errorf("status codes %v, want %v", codes, want)
	}
	if n := len(requests()); n != 2 {
		t.Errorf("live backends saw %d requests, want 2 (no retry)", n)
	}
	if got, want := p.Counts(), []int64{1, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("Counts() = %v, want %v", got, want)
	}
}

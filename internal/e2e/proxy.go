package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a round-robin reverse proxy for tests, standing in for API
// Gateway or a Lambda Function URL in front of many instances: each
// incoming HTTP request goes to the next backend in turn, whatever its
// session.
//
// Like the real thing, it buffers each request body completely before
// forwarding it (streaming request bodies through httputil.ReverseProxy to
// a Go server that answers before reading the whole body hangs a few
// percent of calls, golang/go#40747), and it keeps the client's Host
// header. Unlike a buffered API Gateway, it streams responses as they are
// written, so SSE events arrive one by one. It retries nothing: a request
// sent to a dead backend gets 502.
//
// Proxy is safe for concurrent use.
type Proxy struct {
	// URL is the proxy's base URL, http://127.0.0.1:PORT, on a port of its
	// own; clients use URL+"/mcp".
	URL string

	backends  []*url.URL
	next      atomic.Uint64
	counts    []atomic.Int64
	transport *http.Transport
	server    *http.Server

	log *logSink // one line per request
}

// NewProxy starts a proxy in front of backends (base URLs such as
// http://127.0.0.1:8080, e.g. Cluster.BaseURLs) and stops it when the test
// ends, printing its access log if the test failed.
func NewProxy(t testing.TB, backends ...string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("e2e.NewProxy: %v", err)
	}
	return NewProxyOn(t, l, backends...)
}

// NewProxyOn is NewProxy on a listener of the caller's, for a test that
// must know the proxy's URL before it starts the backends (an OAuth
// resource URL).
func NewProxyOn(t testing.TB, l net.Listener, backends ...string) *Proxy {
	t.Helper()
	if len(backends) == 0 {
		t.Fatal("e2e.NewProxy: no backends")
	}
	p := &Proxy{
		counts: make([]atomic.Int64, len(backends)),
		log:    newLogSink(t, filepath.Join(t.ArtifactDir(), "proxy.log")),
		transport: &http.Transport{
			Proxy:               nil, // never an HTTP_PROXY from the environment
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     30 * time.Second,
		},
	}
	for _, b := range backends {
		u, err := url.Parse(b)
		if err != nil {
			t.Fatalf("e2e.NewProxy: backend %q: %v", b, err)
		}
		p.backends = append(p.backends, u)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(pr.In.Context().Value(backendKey{}).(*url.URL))
			pr.Out.Host = pr.In.Host // SetURL set the backend's; keep the client's
		},
		Transport:     p.transport,
		FlushInterval: -1, // flush every write: SSE flows event by event
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.logf("  %s %s -> backend error: %v", r.Method, r.URL.Path, err)
			w.WriteHeader(http.StatusBadGateway)
		},
		// A backend killed mid-response is expected here: into the
		// proxy's own log with it, not the test's stderr.
		ErrorLog: log.New(p.log, "proxy: ", log.Ltime|log.Lmicroseconds),
	}

	p.URL = "http://" + l.Addr().String()
	p.server = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.serve(w, r, rp)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go p.server.Serve(l)
	t.Cleanup(func() {
		p.Close()
		if t.Failed() {
			p.DumpLog(t, 0, 500)
		}
	})
	return p
}

type backendKey struct{}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, rp *httputil.ReverseProxy) {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		p.logf("  %s %s: reading request body: %v", r.Method, r.URL.Path, err)
		http.Error(w, "proxy: reading request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	r.Body = http.NoBody
	if len(body) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}

	i := int((p.next.Add(1) - 1) % uint64(len(p.backends)))
	p.counts[i].Add(1)
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	rp.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), backendKey{}, p.backends[i])))
	p.logf("%s %s%s -> %d: %d %s (session %q, %v)", r.Method, r.URL.Path, describeRPC(body), i, rec.status,
		rec.Header().Get("Content-Type"), r.Header.Get("Mcp-Session-Id"), time.Since(start).Round(time.Millisecond))
}

// describeRPC names the JSON-RPC message in body for the access log:
// " ping #1", " notifications/initialized", " response #0", " batch".
func describeRPC(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	if body[0] == '[' {
		return " batch"
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return " (not JSON-RPC)"
	}
	s := " " + msg.Method
	if msg.Method == "" {
		s = " response"
	}
	if msg.ID != nil {
		s += " #" + string(msg.ID)
	}
	return s
}

// Counts returns how many requests each backend was sent, in backend
// order.
func (p *Proxy) Counts() []int64 {
	counts := make([]int64, len(p.counts))
	for i := range p.counts {
		counts[i] = p.counts[i].Load()
	}
	return counts
}

// Total returns the number of requests forwarded so far.
func (p *Proxy) Total() int64 {
	var n int64
	for _, c := range p.Counts() {
		n += c
	}
	return n
}

// CloseIdleConnections closes the proxy's idle connections to the
// backends, e.g. after a backend was restarted.
func (p *Proxy) CloseIdleConnections() { p.transport.CloseIdleConnections() }

// Close stops the proxy, closing open connections (and streams). The test
// cleanup calls it; calling it again does nothing.
func (p *Proxy) Close() {
	p.server.Close()
	p.transport.CloseIdleConnections()
}

func (p *Proxy) logf(format string, args ...any) {
	p.log.Write([]byte(time.Now().Format("15:04:05.000 ") + fmt.Sprintf(format, args...) + "\n"))
}

// Mark returns a position in the access log, for DumpLog.
func (p *Proxy) Mark() int { return p.log.Mark() }

// LinesSince returns the access log lines written since mark.
func (p *Proxy) LinesSince(mark int) []string {
	lines, _ := p.log.Since(mark, math.MaxInt)
	return lines
}

// DumpLog writes the access log since mark (0: from the start), at most its
// last limit lines, to t's log. The log has one line per request: method,
// path, JSON-RPC method and id, backend, status, content type, session.
func (p *Proxy) DumpLog(t testing.TB, mark, limit int) {
	t.Helper()
	p.log.dump(t, fmt.Sprintf("proxy %s access log (%d requests, per backend %v)", p.URL, p.Total(), p.Counts()), mark, limit)
}

// statusRecorder records the status code of a response and passes
// flushes through.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and friends.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Package heldclients holds many idle MCP streams open, for the tests
// and benchmarks that measure what idle held streams cost a server
// (internal/costs BenchmarkScaleCostModel, internal/e2e
// BenchmarkHeldStreamsLoad, pkg/mcp TestIdleHeldStreamReads) and check
// what they get (pkg/mcp TestHeldStreamsAtScale): 2025-11-25 sessions
// subscribed to a resource with their GET stream open (resumed with
// Last-Event-ID when the server ends it), and 2026-07-28
// subscriptions/listen streams. Open opens them in the calling process.
//
// Or the clients run in a process of their own so that their memory and
// sockets are not the server's: the test starts its own test binary
// again with Start; that binary's TestMain calls Main first, which runs
// the clients when the environment asks for them.
//
// The protocol between the two is lines on the child's stdout: "open"
// once every stream sent its first event, then "delivered ..." once every
// stream got a notifications/resources/updated (or the wait timed out),
// with the count of streams that got one, the count that got more than
// one, and each stream's arrival time (Unix nanoseconds, sorted). The
// child ends when its stdin is closed.
package heldclients

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Environment of the child process.
const (
	envURLs = "MCPUSH_HELDCLIENTS_URLS" // comma-separated MCP endpoints: stream i uses URLs[i % len]
	envN    = "MCPUSH_HELDCLIENTS_N"
	envEra  = "MCPUSH_HELDCLIENTS_ERA" // "2025", "2026" or "both" (even streams 2025)
	envURI  = "MCPUSH_HELDCLIENTS_URI"
	envWait = "MCPUSH_HELDCLIENTS_WAIT" // how long to wait for the event, a Go duration
)

// Options say what streams a child holds.
type Options struct {
	URLs []string // MCP endpoints; stream i uses URLs[i%len(URLs)]
	N    int      // streams
	Era  string   // "2025", "2026" or "both" (even-numbered streams 2025)
	URI  string   // the resource every stream subscribes to
	Wait time.Duration
}

// Main runs the clients if the environment asks for them, and then exits
// the process; otherwise it returns. Call it first in TestMain.
func Main() {
	if os.Getenv(envURLs) == "" {
		return
	}
	os.Exit(run())
}

// RaiseFileLimit raises the soft limit of open files to the hard one.
func RaiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// Child is a running client process.
type Child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

// Start runs the clients of o in a new process of the running test binary
// and waits until every stream is open (at most limit).
func Start(tb testing.TB, o Options, limit time.Duration) *Child {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	wait := o.Wait
	if wait == 0 {
		wait = 30 * time.Second
	}
	cmd.Env = append(os.Environ(), envURLs+"="+strings.Join(o.URLs, ","), envN+"="+strconv.Itoa(o.N),
		envEra+"="+o.Era, envURI+"="+o.URI, envWait+"="+wait.String())
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c := &Child{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	c.lines.Buffer(make([]byte, 64<<10), 64<<20)
	tb.Cleanup(c.Stop)
	done := make(chan string, 1)
	go func() {
		c.lines.Scan()
		done <- c.lines.Text()
	}()
	select {
	case line := <-done:
		if line != "open" {
			tb.Fatalf("heldclients: the child said %q, want open", line)
		}
	case <-time.After(limit):
		tb.Fatalf("heldclients: %d streams not open within %v", o.N, limit)
	}
	return c
}

// Pid returns the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Delivery is what the streams of one child got of one event.
type Delivery struct {
	Got, Duplicates int     // streams that got the event; of them, those that got it more than once
	Arrivals        []int64 // when each stream got it first, Unix nanoseconds, sorted
}

// Latencies returns the arrivals of ds since t, sorted.
func Latencies(t time.Time, ds ...Delivery) []time.Duration {
	var out []time.Duration
	for _, d := range ds {
		for _, a := range d.Arrivals {
			out = append(out, time.Duration(a-t.UnixNano()))
		}
	}
	slices.Sort(out)
	return out
}

// Percentile returns the p-th percentile (0-100) of sorted, 0 if empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Delivered waits for the child's report that every stream got the event.
func (c *Child) Delivered() (Delivery, error) {
	if !c.lines.Scan() {
		return Delivery{}, fmt.Errorf("heldclients: no report: %v", c.lines.Err())
	}
	f := strings.Fields(c.lines.Text())
	if len(f) < 3 || f[0] != "delivered" {
		return Delivery{}, fmt.Errorf("heldclients: the child said %q", c.lines.Text())
	}
	var d Delivery
	d.Got, _ = strconv.Atoi(f[1])
	d.Duplicates, _ = strconv.Atoi(f[2])
	for _, s := range f[3:] {
		v, _ := strconv.ParseInt(s, 10, 64)
		d.Arrivals = append(d.Arrivals, v)
	}
	return d, nil
}

// Stop closes the child's stdin and waits for it to end.
func (c *Child) Stop() {
	if c.stdin != nil {
		c.stdin.Close()
		c.stdin = nil
		c.cmd.Wait()
	}
}

// Stream is one held stream as its client sees it: a 2025-11-25 session
// with its GET stream (resumed with Last-Event-ID when the server ends
// it), or a 2026-07-28 subscriptions/listen stream.
type Stream struct {
	mu       sync.Mutex
	rec      Record
	opened   chan struct{}
	openOnce sync.Once
	c        *http.Client // nil: client
}

// http is the client of s's requests.
func (s *Stream) http() *http.Client {
	if s.c != nil {
		return s.c
	}
	return client
}

// Record is what a stream got so far.
type Record struct {
	Updated int         // notifications/resources/updated received
	Seqs    []int64     // sequences of the events' notifications/message (2025)
	First   time.Time   // when the first notifications/resources/updated arrived
	Last    time.Time   // when the last resources/updated or notifications/message arrived
	Ends    []time.Time // when the server ended the GET stream by itself
}

// Record returns a copy of what s got so far.
func (s *Stream) Record() Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rec
	r.Seqs = slices.Clone(r.Seqs)
	r.Ends = slices.Clone(r.Ends)
	return r
}

// Opened is closed once the stream sent its first event.
func (s *Stream) Opened() <-chan struct{} { return s.opened }

// OpenOptions say what streams Open opens.
type OpenOptions struct {
	URLs       []string         // MCP endpoints; stream i uses URLs[i%len(URLs)]
	URI        string           // the resource every stream subscribes to
	N          int              // streams
	Era2025    func(i int) bool // whether stream i is a 2025-11-25 GET stream (else a 2026-07-28 listen stream)
	Concurrent int              // streams opening at a time
	Relisten   bool             // listen again when the server ends a listen stream; otherwise that is an error
	// ConnPerRequest sends every request on a connection of its own, as a
	// plain client without keep-alive does.
	ConnPerRequest bool
}

// Open opens the streams of o in this process. They run until ctx ends;
// wait waits for them. errf is told of every error.
func Open(ctx context.Context, errf func(format string, args ...any), o OpenOptions) (streams []*Stream, wait func()) {
	var wg sync.WaitGroup
	streams = make([]*Stream, o.N)
	sem := make(chan struct{}, o.Concurrent)
	for i := range streams {
		s := &Stream{opened: make(chan struct{})}
		if o.ConnPerRequest {
			s.c = plainClient
		}
		streams[i] = s
		url := o.URLs[i%len(o.URLs)]
		wg.Go(func() {
			sem <- struct{}{}
			go func() {
				select {
				case <-s.opened:
				case <-ctx.Done():
				}
				<-sem
			}()
			if o.Era2025(i) {
				s.getStream(ctx, errf, url, o.URI)
			} else {
				s.listen(ctx, errf, url, o.URI, i+1, o.Relisten)
			}
		})
	}
	return streams, wg.Wait
}

// WaitOpen waits until every stream sent its first event.
func WaitOpen(streams []*Stream, limit time.Duration) error {
	deadline := time.After(limit)
	for i, s := range streams {
		select {
		case <-s.opened:
		case <-deadline:
			return fmt.Errorf("stream %d of %d did not open within %v", i, len(streams), limit)
		}
	}
	return nil
}

// eraOf returns which streams of era ("2025", "2026" or "both": the even
// ones) are 2025-11-25 GET streams.
func eraOf(era string) func(i int) bool {
	switch era {
	case "2025":
		return func(int) bool { return true }
	case "2026":
		return func(int) bool { return false }
	}
	return func(i int) bool { return i%2 == 0 }
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}

// plainClient opens a connection per request (OpenOptions.ConnPerRequest).
var plainClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}

func run() int {
	RaiseFileLimit()
	n, _ := strconv.Atoi(os.Getenv(envN))
	wait, err := time.ParseDuration(os.Getenv(envWait))
	if err != nil {
		wait = 30 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan string, 16)
	errf := func(format string, args ...any) {
		select {
		case errs <- fmt.Sprintf(format, args...):
		default:
		}
	}
	streams, waitStreams := Open(ctx, errf, OpenOptions{
		URLs: strings.Split(os.Getenv(envURLs), ","), URI: os.Getenv(envURI), N: n,
		Era2025: eraOf(os.Getenv(envEra)), Concurrent: 100, Relisten: true,
	})
	defer func() { cancel(); waitStreams() }()
	deadline := time.After(5 * time.Minute)
	for _, s := range streams {
		select {
		case <-s.opened:
		case e := <-errs:
			fmt.Println("error:", e)
			return 1
		case <-deadline:
			fmt.Println("error: streams not open within 5 minutes")
			return 1
		}
	}
	fmt.Println("open")
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	count := func() (got, dup int) {
		for _, s := range streams {
			s.mu.Lock()
			if s.rec.Updated >= 1 {
				got++
			}
			if s.rec.Updated > 1 {
				dup++
			}
			s.mu.Unlock()
		}
		return
	}
	// Until every stream got the event, then a little longer for any
	// second copy; at most wait after the first arrival.
	var firstSeen time.Time
	for {
		got, _ := count()
		if got > 0 && firstSeen.IsZero() {
			firstSeen = time.Now()
		}
		if got == n || (!firstSeen.IsZero() && time.Since(firstSeen) > wait) || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	got, dup := count()
	var b strings.Builder
	fmt.Fprintf(&b, "delivered %d %d", got, dup)
	var at []int64
	for _, s := range streams {
		s.mu.Lock()
		if !s.rec.First.IsZero() {
			at = append(at, s.rec.First.UnixNano())
		}
		s.mu.Unlock()
	}
	slices.Sort(at)
	for _, a := range at {
		fmt.Fprintf(&b, " %d", a)
	}
	fmt.Println(b.String())
	<-ctx.Done()
	return 0
}

func (s *Stream) got(data string) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Data struct {
				Sequence int64 `json:"sequence"`
			} `json:"data"`
		} `json:"params"`
	}
	json.Unmarshal([]byte(data), &m)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.Method {
	case "notifications/resources/updated":
		s.rec.Updated++
		s.rec.Last = time.Now()
		if s.rec.First.IsZero() {
			s.rec.First = s.rec.Last
		}
	case "notifications/message":
		s.rec.Seqs = append(s.rec.Seqs, m.Params.Data.Sequence)
		s.rec.Last = time.Now()
	}
}

// readSSE reads one SSE response, handing each data line to s, and
// returns the last event id.
func (s *Stream) readSSE(resp *http.Response) string {
	defer resp.Body.Close()
	last := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			last = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			s.openOnce.Do(func() { close(s.opened) })
			if v != "" {
				s.got(v)
			}
		}
	}
	return last
}

func (s *Stream) post(ctx context.Context, url, sid, body string) error {
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := s.http().Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %d", body, resp.StatusCode)
	}
	return nil
}

// getStream runs a 2025-11-25 client: initialize, subscribe to uri, and
// its GET stream, resumed after each end until ctx ends.
func (s *Stream) getStream(ctx context.Context, errf func(string, ...any), url, uri string) {
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"heldclients","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := s.http().Do(req)
	if err != nil {
		errf("initialize: %v", err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		errf("initialize: %d", resp.StatusCode)
		return
	}
	for _, body := range []string{`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"` + uri + `"}}`} {
		if err := s.post(ctx, url, sid, body); err != nil {
			errf("%v", err)
			return
		}
	}
	last := ""
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := s.http().Do(req)
		if err != nil {
			if ctx.Err() == nil {
				errf("GET stream: %v", err)
			}
			return
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
			errf("GET stream: %d", resp.StatusCode)
			return
		}
		if id := s.readSSE(resp); id != "" {
			last = id
		}
		if ctx.Err() == nil {
			s.mu.Lock()
			s.rec.Ends = append(s.rec.Ends, time.Now())
			s.mu.Unlock()
			time.Sleep(time.Second) // the retry interval
		}
	}
}

// listen runs a 2026-07-28 subscriptions/listen stream on uri until ctx
// ends. If the server ends it, it listens again if relisten, and is an
// error if not.
func (s *Stream) listen(ctx context.Context, errf func(string, ...any), url, uri string, id int, relisten bool) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":[%q]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, id, uri)
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		resp, err := s.http().Do(req)
		if err != nil {
			if ctx.Err() == nil {
				errf("listen: %v", err)
			}
			return
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
			errf("listen: %d", resp.StatusCode)
			return
		}
		s.readSSE(resp)
		if !relisten && ctx.Err() == nil {
			errf("listen stream %d ended by itself", id)
			return
		}
	}
}

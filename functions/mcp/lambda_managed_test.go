package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// heldStream is what one held SSE stream delivered.
type heldStream struct {
	name    string
	status  int
	opened  time.Time
	ended   time.Time
	events  []testutil.SSEEvent
	readErr error
}

// updates counts its notifications/resources/updated of uri.
func (s *heldStream) updates(uri string) int {
	n := 0
	for _, ev := range s.events {
		if strings.Contains(ev.Data, `"notifications/resources/updated"`) && strings.Contains(ev.Data, `"`+uri+`"`) {
			n++
		}
	}
	return n
}

// openStream sends req and reads its SSE events until the stream ends,
// announcing on ready once the stream is open and its first event (the
// priming event, or the acknowledgement of a listen) has arrived. It runs
// in its own goroutine: it reports through the returned heldStream only.
func openStream(c *http.Client, name string, req *http.Request, ready chan<- string) *heldStream {
	s := &heldStream{name: name, opened: time.Now()}
	announced := false
	announce := func() {
		if !announced {
			announced = true
			ready <- name
		}
	}
	defer announce()
	resp, err := c.Do(req)
	if err != nil {
		s.readErr = err
		return s
	}
	defer resp.Body.Close()
	s.status = resp.StatusCode
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		s.readErr = fmt.Errorf("not an SSE stream: %s %q", resp.Header.Get("Content-Type"), b)
		return s
	}
	br := bufio.NewReader(resp.Body)
	var block strings.Builder
	for {
		line, err := br.ReadString('\n')
		block.WriteString(line)
		if line == "\n" || (err != nil && strings.TrimSpace(block.String()) != "") {
			s.events = append(s.events, testutil.ParseSSE([]byte(block.String()))...)
			block.Reset()
			announce()
		}
		if err != nil {
			if err != io.EOF {
				s.readErr = err
			}
			break
		}
	}
	s.ended = time.Now()
	return s
}

// TestLambdaManagedInstances runs the MCP function the way Lambda Managed
// Instances run it: ONE process with AWS_LAMBDA_MAX_CONCURRENCY=32, to
// which the fake Runtime API hands up to 32 invocations at once
// (aws-lambda-go polls /next 32 times at once; each response goes back
// under its own request id). In that process, at the same time: 6
// 2025-era GET streams and 4 2026-era subscriptions/listen streams held
// open, and 8 ordinary requests (tool calls, pings) answered meanwhile.
// One event ingested then reaches every held stream exactly once; the
// streams are held to the invocation deadline (closed 2 s before it, the
// GET streams with retry:), not closed after the on-demand StreamHold.
func TestLambdaManagedInstances(t *testing.T) {
	const (
		maxConcurrency = 32
		getStreams     = 6
		listenStreams  = 4
		requests       = 8
		timeout        = 14 * time.Second // of every invocation
	)
	mcpBin := testenv.BuildBinary(t, "./functions/mcp")
	ingestBin := testenv.BuildBinary(t, "./functions/sns-ingest")
	store := "MCPUSH_STORE=sqlite:" + filepath.Join(t.TempDir(), "mcpush.db")
	ingest := lambdatest.StartFunction(t, ingestBin, store)
	f := lambdatest.StartFunction(t, mcpBin, store, "MCPUSH_AUTH=none", fmt.Sprintf("AWS_LAMBDA_MAX_CONCURRENCY=%d", maxConcurrency))
	if got := f.API.MaxConcurrency(); got != maxConcurrency {
		t.Fatalf("the fake Runtime API allows %d invocations at once, want %d", got, maxConcurrency)
	}
	client := &http.Client{Transport: &lambdatest.Transport{Server: f.API, Invoke: lambdatest.InvokeOptions{Streaming: true, Timeout: timeout}}}
	url := "https://" + lambdatest.DefaultDomain + "/mcp"
	const topicURI = "events://orders"

	// 2025-era sessions subscribed to the topic.
	sessions := make([]string, getStreams)
	for i := range sessions {
		resp, body := testutil.PostRead(t, client, url, "", testutil.RPC(1, "initialize", map[string]any{
			"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "lmi", "version": "1"},
		}))
		if sessions[i] = resp.Header.Get("Mcp-Session-Id"); resp.StatusCode != http.StatusOK || sessions[i] == "" {
			t.Fatalf("initialize: %d %s", resp.StatusCode, body)
		}
		hdr := []string{"Mcp-Protocol-Version", "2025-11-25"}
		testutil.PostRead(t, client, url, sessions[i], `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr...)
		if resp, body := testutil.PostRead(t, client, url, sessions[i], testutil.RPC(2, "resources/subscribe", map[string]any{"uri": topicURI}), hdr...); resp.StatusCode != http.StatusOK {
			t.Fatalf("subscribe: %d %s", resp.StatusCode, body)
		}
	}
	if got := f.API.MaxInFlight(); got != 1 {
		t.Fatalf("%d invocations at once during the sequential setup, want 1", got)
	}

	// The held streams, all open at once.
	ready := make(chan string, getStreams+listenStreams)
	results := make(chan *heldStream, getStreams+listenStreams)
	for i, session := range sessions {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		go func() { results <- openStream(client, fmt.Sprintf("GET stream %d", i), req, ready) }()
	}
	for i := range listenStreams {
		body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["` + topicURI +
			`"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		go func() { results <- openStream(client, fmt.Sprintf("listen stream %d", i), req, ready) }()
	}
	for range getStreams + listenStreams {
		select {
		case <-ready:
		case <-time.After(time.Minute):
			t.Fatal("the streams did not all open within a minute")
		}
	}
	if got := f.API.InFlight(); got != getStreams+listenStreams {
		t.Errorf("%d invocations in flight with every stream open, want %d (one per held stream)", got, getStreams+listenStreams)
	}

	// Ordinary requests while the streams are held: each its own
	// invocation, answered at once.
	var wg sync.WaitGroup
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := sessions[i%len(sessions)]
			body := testutil.RPC(10+i, "ping", nil)
			if i%2 == 0 {
				body = testutil.RPC(10+i, "tools/call", map[string]any{"name": "events_recent", "arguments": map[string]any{"topic": "orders"}})
			}
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var m testutil.Message
			if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &m) != nil || m.Error != nil || m.Result == nil || string(m.ID) != fmt.Sprint(10+i) {
				t.Errorf("request %d (%s): %d %s", i, body, resp.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	if got := f.API.InFlight(); got != getStreams+listenStreams {
		t.Errorf("%d invocations in flight after the requests, want the %d held streams", got, getStreams+listenStreams)
	}

	// One event reaches every held stream.
	if r := ingest.Invoke(t, fixture(t, "sns-event"), &lambdatest.InvokeOptions{Timeout: 30 * time.Second}); r.Err != nil {
		t.Fatalf("ingest: %v", r.Err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	for range getStreams + listenStreams {
		var s *heldStream
		select {
		case s = <-results:
		case <-ctx.Done():
			t.Fatal("the held streams did not all end by twice the invocation timeout")
		}
		if s.readErr != nil || s.status != http.StatusOK {
			t.Errorf("%s: %d %v", s.name, s.status, s.readErr)
			continue
		}
		if n := s.updates(topicURI); n != 1 {
			t.Errorf("%s: %d resources/updated of %s, want exactly 1; events %+v", s.name, n, topicURI, s.events)
		}
		// Held to the deadline (closed StreamMargin = 2 s before it), not
		// ended StreamHold (5 s) after the event as on demand.
		if held, least := s.ended.Sub(s.opened), timeout-2*time.Second-time.Second; held < least {
			t.Errorf("%s ended after %v: want it held to the invocation deadline (>= %v; the on-demand hold is %v)", s.name, held, least, mcp.DefaultStreamHold)
		}
		last := s.events[len(s.events)-1]
		if strings.HasPrefix(s.name, "GET") && last.Retry == "" {
			t.Errorf("%s does not end with retry: %+v", s.name, last)
		}
		if strings.HasPrefix(s.name, "listen") && !strings.Contains(last.Data, `"result"`) {
			t.Errorf("%s does not end with the listen result: %+v", s.name, last)
		}
	}

	// Every stream and at least one request ran at once in the one
	// process; never more than AWS_LAMBDA_MAX_CONCURRENCY.
	if got := f.API.MaxInFlight(); got < getStreams+listenStreams+1 || got > maxConcurrency {
		t.Errorf("at most %d invocations ran at once, want %d..%d", got, getStreams+listenStreams+1, maxConcurrency)
	}
	t.Logf("at most %d invocations in flight at once in one process", f.API.MaxInFlight())
	for _, want := range []string{`"maxConcurrency":32`, `"streamHold":"deadline"`} {
		if !strings.Contains(f.Out.String(), want) {
			t.Errorf("the start-up log lacks %s", want)
		}
	}
	// One access-log record per invocation, each with its own Lambda
	// request id (from the invocation's context, not a global). A
	// stream's record follows its end, and the process's output reaches
	// f.Out through a pipe: wait for the last ones a little.
	want := 4*getStreams + listenStreams + requests
	var lines []string
	records := 0
	for wait := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		lines, records = nil, 0
		for _, line := range strings.Split(f.Out.String(), "\n") {
			var rec struct{ Msg string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request" {
				lines = append(lines, line)
				records++
			}
		}
		if records >= want || time.Now().After(wait) {
			break
		}
	}
	ids := map[string]bool{}
	for _, line := range lines {
		var rec struct{ RequestID string }
		_ = json.Unmarshal([]byte(line), &rec)
		if rec.RequestID == "" || ids[rec.RequestID] {
			t.Errorf("access-log record with a missing or repeated request id: %s", line)
		}
		ids[rec.RequestID] = true
	}
	if records < want {
		t.Errorf("%d access-log records, want one per invocation (at least %d)", records, want)
	}
}

// TestLambdaManagedInstancesBuffered is TestLambdaManagedInstances through
// the buffered path (httpadapter, as behind a BUFFERED Function URL or an
// HTTP API): one process with AWS_LAMBDA_MAX_CONCURRENCY=16 has 4 GET long
// polls waiting at once while 4 requests are answered; one event ingested
// then answers every poll with it, each under its own invocation.
func TestLambdaManagedInstancesBuffered(t *testing.T) {
	const polls, requests = 4, 4
	mcpBin := testenv.BuildBinary(t, "./functions/mcp")
	ingestBin := testenv.BuildBinary(t, "./functions/sns-ingest")
	store := "MCPUSH_STORE=sqlite:" + filepath.Join(t.TempDir(), "mcpush.db")
	ingest := lambdatest.StartFunction(t, ingestBin, store)
	f := lambdatest.StartFunction(t, mcpBin, store, "MCPUSH_AUTH=none", "MCPUSH_LAMBDA_MODE=buffered", "AWS_LAMBDA_MAX_CONCURRENCY=16",
		"MCPUSH_MAX_GET_STREAM=30s") // a poll window that outlasts the setup on a busy machine
	opts := &lambdatest.InvokeOptions{Timeout: 30 * time.Second}
	call := func(session, body string) *lambdatest.HTTPResponse {
		t.Helper()
		_, hr := f.Call(t, lambdatest.Edit(t, fixture(t, "mcp-tools-call"), lambdatest.All(lambdatest.WithCaller(""), lambdatest.WithSession(session), lambdatest.WithBody(body))), opts)
		if hr.StatusCode/100 != 2 {
			t.Fatalf("%s: %d %s", body, hr.StatusCode, hr.Body)
		}
		return hr
	}
	sessions := make([]string, polls)
	for i := range sessions {
		_, hr := f.Call(t, lambdatest.Edit(t, fixture(t, "mcp-initialize"), lambdatest.WithCaller("")), opts)
		if sessions[i] = hr.Header.Get("Mcp-Session-Id"); sessions[i] == "" {
			t.Fatalf("initialize: %d %s", hr.StatusCode, hr.Body)
		}
		call(sessions[i], `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		call(sessions[i], testutil.RPC(2, "resources/subscribe", map[string]any{"uri": "events://orders"}))
	}
	var waiting []*lambdatest.Invocation
	for _, session := range sessions {
		inv := f.API.Invoke(lambdatest.Edit(t, fixture(t, "mcp-get-stream"), lambdatest.All(lambdatest.WithCaller(""), lambdatest.WithSession(session))), &lambdatest.InvokeOptions{Timeout: time.Minute})
		<-inv.Started()
		waiting = append(waiting, inv)
	}
	// Requests answered while the polls wait, each in its own invocation.
	var answered []*lambdatest.Invocation
	for i := range requests {
		body := testutil.RPC(10+i, "ping", nil)
		answered = append(answered, f.API.Invoke(lambdatest.Edit(t, fixture(t, "mcp-tools-call"), lambdatest.All(lambdatest.WithCaller(""), lambdatest.WithSession(sessions[i%polls]), lambdatest.WithBody(body))), opts))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, inv := range answered {
		r, err := inv.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hr, err := r.HTTP()
		if err != nil || hr.StatusCode != http.StatusOK || !strings.Contains(string(hr.Body), fmt.Sprintf(`"id":%d`, 10+i)) {
			t.Errorf("request %d: %v %+v", i, err, hr)
		}
	}
	if got := f.API.InFlight(); got != polls {
		t.Errorf("%d invocations in flight after the requests, want the %d waiting polls", got, polls)
	}
	if r := ingest.Invoke(t, fixture(t, "sns-event"), opts); r.Err != nil {
		t.Fatalf("ingest: %v", r.Err)
	}
	for i, inv := range waiting {
		r, err := inv.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hr, err := r.HTTP()
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(hr.Body), `"notifications/resources/updated"`); n != 1 || !strings.Contains(string(hr.Body), "events://orders") {
			t.Errorf("poll %d answered %q: want one resources/updated of events://orders", i, hr.Body)
		}
		if evs := testutil.ParseSSE(hr.Body); len(evs) == 0 || evs[len(evs)-1].Retry == "" {
			t.Errorf("poll %d does not end with retry: %q", i, hr.Body)
		}
	}
	if got := f.API.MaxInFlight(); got < polls+1 {
		t.Errorf("at most %d invocations at once, want the %d polls and a request", got, polls)
	}
}

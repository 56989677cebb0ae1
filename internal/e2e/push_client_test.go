package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/mcpush/mcpush/internal/testenv"
)

// This file holds what the push tests (issue 4: SNS ingest, list_changed
// dedup, events to subscribers) share: a small Streamable HTTP client that
// keeps a GET stream open and resumes it with Last-Event-ID, a runner for
// the sns-ingest CLI, and the cluster they run against.

const (
	// pushProtocolVersion is the protocol version the push clients speak.
	pushProtocolVersion = "2025-11-25"
	// pushPollInterval and pushRegistryRefresh configure the server
	// processes (MCPUSH_POLL_INTERVAL, MCPUSH_REGISTRY_REFRESH); they are
	// the defaults, set explicitly because the tests time windows on them.
	pushPollInterval    = 100 * time.Millisecond
	pushRegistryRefresh = 500 * time.Millisecond
	// pushDeliveryTimeout bounds every wait for something to arrive.
	pushDeliveryTimeout = 30 * time.Second
	// pushRequestTimeout bounds one POST.
	pushRequestTimeout = 30 * time.Second
	// pushIngestTimeout bounds one run of sns-ingest (a batch of up to
	// ~30 records; slow on moto, which serialises requests).
	pushIngestTimeout = 3 * time.Minute
)

// pushEnv is a cluster of server processes on one store, behind a
// round-robin proxy, with the sns-ingest CLI configured for the same
// store.
type pushEnv struct {
	cluster *Cluster
	proxy   *Proxy
	ingest  *pushIngest
	hc      *http.Client // for POSTs and GET streams, through the proxy or not
}

// startPushEnv starts n server processes on a fresh store and a proxy in
// front of them; poll is their MCPUSH_POLL_INTERVAL (0: pushPollInterval);
// env (KEY=VALUE) is added to the environment of the servers and of the
// sns-ingest runs. Push tests are slow (processes, a shared store, waiting
// for polls), so they are skipped under -short.
func startPushEnv(t testing.TB, store Store, n int, poll time.Duration, env ...string) *pushEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping push end-to-end test in -short mode")
	}
	if poll == 0 {
		poll = pushPollInterval
	}
	storeEnv := append(slices.Clip(store.Env(t)), env...)
	ingest := &pushIngest{bin: testenv.BuildBinary(t, "./functions/sns-ingest"), env: storeEnv}
	serverEnv := append(slices.Clip(storeEnv),
		"MCPUSH_POLL_INTERVAL="+poll.String(),
		"MCPUSH_REGISTRY_REFRESH="+pushRegistryRefresh.String(),
		// Every client here is the anonymous principal: the load
		// benchmark's hundreds of sessions and their requests are not
		// abuse.
		"MCPUSH_MAX_SESSIONS_PER_PRINCIPAL=100000",
		"MCPUSH_MAX_SESSIONS_PER_HOUR=100000",
		"MCPUSH_MAX_REQUESTS_PER_MINUTE=10000000")
	c := StartCluster(t, n, &ClusterOptions{Env: serverEnv, ReadyPath: "/healthz"})
	p := NewProxy(t, c.BaseURLs()...)
	tr := &http.Transport{
		Proxy:               nil, // never an HTTP_PROXY from the environment
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &pushEnv{cluster: c, proxy: p, ingest: ingest, hc: &http.Client{Transport: tr}}
}

// pushClient is one MCP session, initialized through url. Its methods may
// be called from the test goroutine only (they fail the test).
type pushClient struct {
	t       testing.TB
	hc      *http.Client
	url     string // where requests go by default: the proxy's /mcp
	session string
	nextID  atomic.Int64
}

// connect initializes a session through e's proxy.
func (e *pushEnv) connect(t testing.TB, name string) *pushClient {
	t.Helper()
	c := &pushClient{t: t, hc: e.hc, url: e.proxy.URL + "/mcp"}
	params := map[string]any{
		"protocolVersion": pushProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": name, "version": "1"},
	}
	if _, err := c.callURL(c.url, "initialize", params); err != nil {
		t.Fatalf("%s: initialize: %v", name, err)
	}
	if c.session == "" {
		t.Fatalf("%s: initialize returned no Mcp-Session-Id", name)
	}
	c.notify("notifications/initialized", nil)
	return c
}

// call sends a request through the proxy and returns its result; a
// JSON-RPC error or a transport failure fails the test.
func (c *pushClient) call(method string, params any) json.RawMessage {
	c.t.Helper()
	return c.callAt(c.url, method, params)
}

// callAt is call with the request sent to url (e.g. one process's /mcp).
func (c *pushClient) callAt(url, method string, params any) json.RawMessage {
	c.t.Helper()
	res, err := c.callURL(url, method, params)
	if err != nil {
		c.t.Fatalf("session %s: %s via %s: %v", c.session, method, url, err)
	}
	return res
}

// notify sends a notification through the proxy; anything but 202 fails
// the test.
func (c *pushClient) notify(method string, params any) {
	c.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	resp, err := c.post(context.Background(), c.url, msg)
	if err != nil {
		c.t.Fatalf("session %s: %s: %v", c.session, method, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("session %s: %s: status %d %s, want 202", c.session, method, resp.StatusCode, body)
	}
}

func (c *pushClient) post(ctx context.Context, url string, msg any) (*http.Response, error) {
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", pushProtocolVersion)
	}
	return c.hc.Do(req)
}

// pushRPCMessage is a JSON-RPC message as the client reads it.
type pushRPCMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// callURL sends a request to url and returns its result. The response may
// be JSON or an SSE stream ending with the response.
func (c *pushClient) callURL(url, method string, params any) (json.RawMessage, error) {
	id := c.nextID.Add(1)
	msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	ctx, cancel := context.WithTimeout(context.Background(), pushRequestTimeout)
	defer cancel()
	resp, err := c.post(ctx, url, msg)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" && method == "initialize" {
		c.session = s
	}
	var reply pushRPCMessage
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		found := false
		err = pushReadSSE(resp.Body, func(ev pushSSEEvent) bool {
			var m pushRPCMessage
			if ev.data == "" || json.Unmarshal([]byte(ev.data), &m) != nil {
				return true
			}
			if m.Method == "" && string(m.ID) == strconv.FormatInt(id, 10) {
				reply, found = m, true
				return false
			}
			return true
		})
		if !found {
			return nil, fmt.Errorf("SSE response ended without the response (%v)", err)
		}
	} else if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return nil, fmt.Errorf("decoding the response: %v", err)
	}
	if reply.Error != nil {
		return nil, fmt.Errorf("JSON-RPC error %d: %s", reply.Error.Code, reply.Error.Message)
	}
	return reply.Result, nil
}

// subscribe subscribes the session to events://<topic>.
func (c *pushClient) subscribe(topic string) {
	c.t.Helper()
	c.call("resources/subscribe", map[string]any{"uri": "events://" + topic})
}

// setLevel sets the session's log level; "" leaves it unset.
func (c *pushClient) setLevel(level string) {
	c.t.Helper()
	if level != "" {
		c.call("logging/setLevel", map[string]any{"level": level})
	}
}

// pushSSEEvent is one dispatched SSE event.
type pushSSEEvent struct {
	id    string
	hasID bool
	data  string
	retry time.Duration // 0: no retry field
}

// pushReadSSE parses an event stream, calling f for every event (also those
// without data: a priming event carries only an id and retry) until f
// returns false or the stream ends; it returns the read error (nil at a
// clean end or when f stopped).
func pushReadSSE(r io.Reader, f func(pushSSEEvent) bool) error {
	br := bufio.NewReader(r)
	var (
		cur     pushSSEEvent
		data    []string
		hasData bool
		pending bool
	)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if pending {
				if hasData {
					cur.data = strings.Join(data, "\n")
				}
				if !f(cur) {
					return nil
				}
			}
			cur, data, hasData, pending = pushSSEEvent{}, nil, false, false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment: keepalive
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			cur.id, cur.hasID, pending = value, true, true
		case "data":
			data, hasData, pending = append(data, value), true, true
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
				cur.retry, pending = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
}

// pushMessage is a JSON-RPC message received on a GET stream.
type pushMessage struct {
	EventID string // the SSE event id, "g.<seq>"
	Method  string
	Params  json.RawMessage
	At      time.Time // when the client read it
}

// uri returns the params' uri (resources/updated).
func (m pushMessage) uri() string {
	var p struct {
		URI string `json:"uri"`
	}
	json.Unmarshal(m.Params, &p)
	return p.URI
}

// pushEventData is the data of a notifications/message carrying an event.
type pushEventData struct {
	Topic      string          `json:"topic"`
	Sequence   int64           `json:"sequence"`
	MessageID  string          `json:"messageId"`
	ReceivedAt time.Time       `json:"receivedAt"`
	Payload    json.RawMessage `json:"payload"`
}

// logMessage decodes the params of a notifications/message.
func (m pushMessage) logMessage() (level, logger string, data pushEventData) {
	var p struct {
		Level  string        `json:"level"`
		Logger string        `json:"logger"`
		Data   pushEventData `json:"data"`
	}
	json.Unmarshal(m.Params, &p)
	return p.Level, p.Logger, p.Data
}

// pushStream is a session's standalone GET stream, kept open the way an
// SSE client does: when the connection ends or fails it reconnects after
// the server's retry delay (default 1s), resuming with Last-Event-ID, and
// a status other than 200 (a dead backend behind the proxy: 502) is
// retried the same way. It records every message with its event id and
// arrival time, and reports event ids that go backwards (a message
// delivered twice). Safe for concurrent use.
type pushStream struct {
	c    *pushClient
	url  string
	stop context.CancelFunc
	done chan struct{}

	mu       sync.Mutex
	msgs     []pushMessage
	lastID   string // the Last-Event-ID to resume from
	lastSeq  int64  // seq of the last message
	retry    time.Duration
	connects int       // GETs answered 200
	resumes  int       // of which carried Last-Event-ID
	lastOpen time.Time // when the last GET was answered 200
	failures []string
	problems []string // deliveries out of order or repeated; fatal statuses
	conn     context.CancelFunc
	forced   bool
	changed  chan struct{} // closed and replaced on every change
}

// openStream opens the session's GET stream through the proxy and waits
// until the server answered it (200). The stream is closed when the test
// ends.
func (c *pushClient) openStream() *pushStream {
	c.t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	s := &pushStream{c: c, url: c.url, stop: stop, done: make(chan struct{}), retry: time.Second, changed: make(chan struct{})}
	go s.run(ctx)
	c.t.Cleanup(s.close)
	if !s.waitConnects(1, pushDeliveryTimeout) {
		c.t.Fatalf("session %s: GET stream not open after %v: %s", c.session, pushDeliveryTimeout, s.report())
	}
	return s
}

// close stops the stream and waits for its goroutine.
func (s *pushStream) close() {
	s.stop()
	<-s.done
}

// reconnect drops the current connection; the stream reconnects at once,
// resuming with Last-Event-ID.
func (s *pushStream) reconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forced = true
	if s.conn != nil {
		s.conn()
	}
}

func (s *pushStream) run(ctx context.Context) {
	defer close(s.done)
	for ctx.Err() == nil {
		err := s.connectOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		delay := s.retry
		if s.forced {
			delay, s.forced = 0, false
		}
		if err != nil {
			s.failures = append(s.failures, time.Now().Format("15:04:05.000 ")+err.Error())
		}
		s.broadcastLocked()
		s.mu.Unlock()
		if errors.Is(err, errPushSessionGone) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

var errPushSessionGone = errors.New("session not found (404)")

// connectOnce runs one GET until it ends.
func (s *pushStream) connectOnce(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.conn = cancel
	last := s.lastID
	s.mu.Unlock()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.c.session)
	req.Header.Set("Mcp-Protocol-Version", pushProtocolVersion)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := s.c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		err := fmt.Errorf("GET (Last-Event-ID %q): status %d %s", last, resp.StatusCode, bytes.TrimSpace(body))
		if resp.StatusCode == http.StatusNotFound {
			s.problem(err.Error())
			return errPushSessionGone
		}
		return err
	}
	s.mu.Lock()
	s.connects++
	s.lastOpen = time.Now()
	s.forced = false
	if last != "" {
		s.resumes++
	}
	s.broadcastLocked()
	s.mu.Unlock()
	err = pushReadSSE(resp.Body, func(ev pushSSEEvent) bool {
		s.receive(ev, time.Now())
		return true
	})
	if err == nil {
		err = errors.New("stream ended")
	}
	return err
}

// receive records one SSE event.
func (s *pushStream) receive(ev pushSSEEvent, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.broadcastLocked()
	if ev.retry > 0 {
		s.retry = ev.retry
	}
	if ev.data == "" {
		if ev.hasID {
			s.lastID = ev.id // a priming event: the position to resume from
		}
		return
	}
	var m pushRPCMessage
	if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
		s.problems = append(s.problems, fmt.Sprintf("event %s: not JSON-RPC: %q", ev.id, ev.data))
		return
	}
	if ev.hasID {
		s.lastID = ev.id
		if seq, ok := pushStreamSeq(ev.id); ok {
			if seq <= s.lastSeq {
				s.problems = append(s.problems, fmt.Sprintf("event %s (%s) after event seq %d: repeated or out of order", ev.id, m.Method, s.lastSeq))
			}
			s.lastSeq = seq
		} else {
			s.problems = append(s.problems, fmt.Sprintf("event id %q is not <stream>.<seq>", ev.id))
		}
	} else {
		s.problems = append(s.problems, fmt.Sprintf("message %s without an event id", m.Method))
	}
	s.msgs = append(s.msgs, pushMessage{EventID: ev.id, Method: m.Method, Params: m.Params, At: at})
}

func pushStreamSeq(id string) (int64, bool) {
	id, _, _ = strings.Cut(id, "~") // a GET stream's tag (pkg/mcp getEventID)
	i := strings.LastIndexByte(id, '.')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(id[i+1:], 10, 64)
	return n, err == nil
}

func (s *pushStream) problem(msg string) {
	s.mu.Lock()
	s.problems = append(s.problems, msg)
	s.broadcastLocked()
	s.mu.Unlock()
}

func (s *pushStream) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// waitUntil waits until cond holds for the messages received so far, or
// timeout passes; it reports whether cond held. cond runs under the
// stream's lock and must not keep msgs.
func (s *pushStream) waitUntil(timeout time.Duration, cond func(msgs []pushMessage) bool) bool {
	return s.waitState(time.Now().Add(timeout), func() bool { return cond(s.msgs) })
}

// waitProgressing waits until cond holds, for as long as messages keep
// arriving: it gives up when none arrived for stall. For slow stores
// (DynamoDB on moto serialises every request), where how long a whole
// delivery takes says little but a stalled one is a failure.
func (s *pushStream) waitProgressing(stall time.Duration, cond func(msgs []pushMessage) bool) bool {
	for {
		s.mu.Lock()
		n := len(s.msgs)
		s.mu.Unlock()
		if s.waitUntil(stall, cond) {
			return true
		}
		s.mu.Lock()
		m := len(s.msgs)
		s.mu.Unlock()
		if m == n {
			return false
		}
	}
}

// waitConnects waits until the stream has been answered n times.
func (s *pushStream) waitConnects(n int, timeout time.Duration) bool {
	return s.waitState(time.Now().Add(timeout), func() bool { return s.connects >= n })
}

func (s *pushStream) waitState(deadline time.Time, cond func() bool) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		s.mu.Lock()
		ok := cond()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			s.mu.Lock()
			defer s.mu.Unlock()
			return cond()
		}
	}
}

// messages returns a copy of the messages received so far.
func (s *pushStream) messages() []pushMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

func pushCountMethod(msgs []pushMessage, method string) int {
	n := 0
	for _, m := range msgs {
		if m.Method == method {
			n++
		}
	}
	return n
}

// pushCountUpdated counts notifications/resources/updated for events://<topic>.
func pushCountUpdated(msgs []pushMessage, topic string) int {
	n := 0
	for _, m := range msgs {
		if m.Method == "notifications/resources/updated" && m.uri() == "events://"+topic {
			n++
		}
	}
	return n
}

// stats returns the number of successful GETs and of resumes.
func (s *pushStream) stats() (connects, resumes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connects, s.resumes
}

// lastOpened returns when the last GET was answered 200.
func (s *pushStream) lastOpened() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastOpen
}

// problemList returns the delivery problems seen so far.
func (s *pushStream) problemList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.problems)
}

// report describes the stream for a failure message.
func (s *pushStream) report() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	methods := map[string]int{}
	for _, m := range s.msgs {
		methods[m.Method]++
	}
	return fmt.Sprintf("%d messages %v, last id %q, %d connects (%d resumes), failures %q, problems %q",
		len(s.msgs), methods, s.lastID, s.connects, s.resumes, pushLastN(s.failures, 5), s.problems)
}

func pushLastN(list []string, n int) []string {
	if len(list) > n {
		return list[len(list)-n:]
	}
	return list
}

// pushIngest runs the sns-ingest CLI against the cluster's store.
type pushIngest struct {
	bin string
	env []string // the store's environment
}

// pushSNSRecord is one SNS message to deliver.
type pushSNSRecord struct {
	MessageID string
	Message   string
}

// pushIngestSummary is the CLI's one line of output.
type pushIngestSummary struct {
	Accepted   int      `json:"accepted"`
	Duplicates int      `json:"duplicates"`
	Rejected   int      `json:"rejected"`
	Errors     []string `json:"errors"`
}

// pushTopicARN is the TopicArn of the SNS records the tests deliver.
const pushTopicARN = "arn:aws:sns:us-east-1:000000000000:mcpush-e2e"

// deliver runs `sns-ingest -event -` with one SNS event holding records,
// as Lambda would deliver a batch, and returns the CLI's summary and the
// time the CLI process had exited. It returns an error if the CLI fails
// or rejects a record. Safe for concurrent use.
func (p *pushIngest) deliver(records ...pushSNSRecord) (pushIngestSummary, time.Time, error) {
	var ev events.SNSEvent
	now := time.Now().UTC()
	for _, r := range records {
		ev.Records = append(ev.Records, events.SNSEventRecord{
			EventVersion:         "1.0",
			EventSubscriptionArn: pushTopicARN + ":0b5e1a2c-e2e0-4000-8000-000000000000",
			EventSource:          "aws:sns",
			SNS: events.SNSEntity{
				Type:              "Notification",
				MessageID:         r.MessageID,
				TopicArn:          pushTopicARN,
				Message:           r.Message,
				Timestamp:         now,
				SignatureVersion:  "1",
				MessageAttributes: map[string]any{},
			},
		})
	}
	in, err := json.Marshal(ev)
	if err != nil {
		return pushIngestSummary{}, time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), pushIngestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, "-event", "-")
	cmd.Env = append(processEnv(), p.env...)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	exited := time.Now()
	var sum pushIngestSummary
	if jerr := json.Unmarshal(stdout.Bytes(), &sum); jerr != nil && err == nil {
		err = fmt.Errorf("output %q is not a summary: %v", stdout.String(), jerr)
	}
	if err == nil && sum.Rejected > 0 {
		err = fmt.Errorf("%d records rejected: %q", sum.Rejected, sum.Errors)
	}
	if err != nil {
		return sum, exited, fmt.Errorf("sns-ingest -event - with %d records: %v\nstdout: %s\nstderr (last lines): %s",
			len(records), err, stdout.String(), pushTailLines(stderr.String(), 20))
	}
	return sum, exited, nil
}

// mustDeliver is deliver that fails the test on error; call it from the
// test goroutine only.
func (p *pushIngest) mustDeliver(t testing.TB, records ...pushSNSRecord) pushIngestSummary {
	t.Helper()
	sum, _, err := p.deliver(records...)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func pushTailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(pushLastN(lines, n), "\n")
}

// pushEventMessage is the SNS message body of an event on topic.
func pushEventMessage(topic string, data any) string {
	b, err := json.Marshal(map[string]any{"type": "event", "topic": topic, "data": data})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// pushRegistryMessage is the SNS message body of a registry change.
func pushRegistryMessage(kind, op string, items ...any) string {
	if items == nil {
		items = []any{}
	}
	b, err := json.Marshal(map[string]any{"type": "registry", "registry": kind, "op": op, "items": items})
	if err != nil {
		panic(err)
	}
	return string(b)
}

package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// The golden wire exchanges: each testdata/wire/*.txtar file is a script
// of HTTP requests (and SNS events) that TestWire replays in order
// against a real server on a fresh SQLite file, and the responses the
// server gave, normalised. The test fails when a response differs; run
//
//	go test -run TestWire ./pkg/mcp/ -update
//
// to rewrite the responses after a deliberate change of the wire, and
// read the diff.
//
// The archive format is txtar's (golang.org/x/tools/txtar, which this
// module does not depend on: parseWire reads the few lines of it): a
// comment, then files, each opened by a line "-- NAME --". The files are
//
//	request N    METHOD [stream WAIT TOTAL], header lines, a blank line, the body
//	response N   the status, the recorded headers, a blank line, the body
//	ingest N     the Message of an SNS notification the ingest handles
//	store N      "unavailable" or "available": the store's reads of
//	             sessions fail (notify.ErrUnavailable) from then on, or no
//	             longer (wireSetups names the exchanges that have the switch)
//	webhook N    what the exchange's webhook receiver got during step N:
//	             each request's method and path, headers and body, a
//	             POST's Standard Webhooks signature checked (wireHook)
//
// Responses and webhook files are written by the test; the others are
// the script. The server an exchange runs against is wireServer's,
// unless wireSetups names another for the file.
//
// A request without "stream" is read to its end before the next step.
// A streamed request's next step starts once WAIT messages (SSE events
// with data) came, or at once for 0; its response is what came when
// TOTAL messages did, and the stream is then closed. In requests,
// {{session}} and {{requestState}} are replaced by the last
// Mcp-Session-Id and requestState the server gave, {{subscription}} by
// the last X-MCP-Subscription-Id the webhook receiver got, the setup's
// placeholders ({{hook}}, {{secret}}) by their values, and {{pad N}} by
// N bytes of "x". In responses (and webhook files) those values, the
// errorId of an internal error, timestamps and SSE event ids are
// replaced by placeholders.
var update = flag.Bool("update", false, "rewrite the responses of testdata/wire/*.txtar")

// wireFile is one file of a txtar archive.
type wireFile struct {
	name string
	data string
}

// parseWire parses a txtar archive: its comment and files.
func parseWire(text string) (comment string, files []wireFile) {
	var cur *wireFile
	var b strings.Builder
	flush := func() {
		if cur == nil {
			comment = b.String()
		} else {
			cur.data = b.String()
			files = append(files, *cur)
		}
		b.Reset()
	}
	for line := range strings.Lines(text) {
		l := strings.TrimSuffix(line, "\n")
		if name, ok := strings.CutPrefix(l, "-- "); ok && strings.HasSuffix(name, " --") && len(name) > 3 {
			flush()
			cur = &wireFile{name: strings.TrimSpace(strings.TrimSuffix(name, " --"))}
			continue
		}
		b.WriteString(line)
	}
	flush()
	return comment, files
}

// formatWire is the txtar archive of comment and files.
func formatWire(comment string, files []wireFile) string {
	var b strings.Builder
	b.WriteString(comment)
	for _, f := range files {
		fmt.Fprintf(&b, "-- %s --\n", f.name)
		b.WriteString(f.data)
		if f.data != "" && !strings.HasSuffix(f.data, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// wireServer is the server every exchange runs against: the greet tool,
// the ask tool (a multi round-trip request in the 2026 era), and
// events://{topic} resources to subscribe to.
func wireServer(t *testing.T) (string, *sqlitestore.Store) {
	t.Helper()
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	srv := mcp.NewServer(&mcp.Implementation{Name: "wire", Version: "1.0.0"}, store, &mcp.ServerOptions{
		PollInterval: 20 * time.Millisecond,
		StateKeys:    [][]byte{[]byte("wire-test-key-0123456789abcdef0123")},
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "greet", Description: "Greets someone."}, greet)
	srv.AddTool(&mcp.Tool{Name: "ask", Description: "Asks for a name.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			raw, ok := req.InputResponses["name"]
			if !ok {
				return nil, &mcp.InputRequired{
					Requests: map[string]*mcp.InputRequest{"name": {Method: "elicitation/create",
						Params: &mcp.ElicitParams{Message: "Name?", RequestedSchema: map[string]any{"type": "object"}}}},
					State: []byte("asked"),
				}
			}
			var r mcp.ElicitResult
			if err := json.Unmarshal(raw, &r); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Hello, %v! (state %s)", r.Content["name"], req.State)}}}, nil
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "events://{topic}", Name: "events"},
		func(context.Context, *mcp.ServerRequest[*mcp.ReadResourceParams]) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	return ts.URL, store
}

// wireEnv is what an exchange runs against: the server's URL, the
// ingest of its store, and the setup's extras.
type wireEnv struct {
	url    string
	ingest *ingest.Ingester
	// drain, if set, runs the webhook deliveries the ingest handed off
	// (after each ingest step).
	drain func(context.Context)
	// hook, if set, is the webhook receiver whose requests the exchange
	// records.
	hook *wireHook
	// down, if set, is the switch of the store steps.
	down *atomic.Bool
	// vars are placeholders of requests and their values.
	vars map[string]string
}

// wireSetups are the servers of the exchanges that need another than
// wireServer's, by file name (without .txtar).
var wireSetups = map[string]func(*testing.T) *wireEnv{
	"2026_events_poll":    wireEvents,
	"2026_events_stream":  wireEventStreams,
	"2026_events_webhook": wireWebhooks,
	"refusals":            wireRefusals,
}

// wireDefault is the env of wireServer.
func wireDefault(t *testing.T) *wireEnv {
	url, store := wireServer(t)
	return &wireEnv{url: url, ingest: ingest.New(store, nil)}
}

// wireHeaders are the response headers an exchange records.
var wireHeaders = []string{"Allow", "Content-Type", "Mcp-Session-Id", "Retry-After"}

var (
	wireTime      = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
	wireEventID   = regexp.MustCompile(`(?m)^id: .*$`)
	wireState     = regexp.MustCompile(`("requestState":\s*)"([^"]*)"`)
	wireErrorID   = regexp.MustCompile(`"errorId":\s*"([^"]+)"`)
	wireKeepalive = regexp.MustCompile(`(?m)^:.*\n`)
)

// wireRun replays one exchange.
type wireRun struct {
	t    *testing.T
	env  *wireEnv
	vars map[string]string // placeholder -> the server's value
}

var wirePad = regexp.MustCompile(`\{\{pad (\d+)\}\}`)

// substitute replaces the placeholders of a request with their values.
func (r *wireRun) substitute(s string) string {
	for k, v := range r.vars {
		s = strings.ReplaceAll(s, k, v)
	}
	return wirePad.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.Atoi(wirePad.FindStringSubmatch(m)[1])
		return strings.Repeat("x", n)
	})
}

// normalise replaces the volatile parts of a response with placeholders,
// and learns the values later requests use.
func (r *wireRun) normalise(s string) string {
	if m := wireState.FindStringSubmatch(s); m != nil {
		r.vars["{{requestState}}"] = m[2]
	}
	s = wireState.ReplaceAllString(s, `$1"{{requestState}}"`)
	if m := wireErrorID.FindStringSubmatch(s); m != nil {
		r.vars["{{errorId}}"] = m[1] // also in the message
	}
	for k, v := range r.vars {
		if v != "" {
			s = strings.ReplaceAll(s, v, k)
		}
	}
	s = wireTime.ReplaceAllString(s, "{{time}}")
	s = wireEventID.ReplaceAllString(s, "id: {{event-id}}")
	return wireKeepalive.ReplaceAllString(s, "")
}

// wireStream is a response being read.
type wireStream struct {
	name   string
	head   string
	stream bool          // read in the background, normalised at the end
	raw    string        // the response of a request read to its end, to normalise
	msgs   chan struct{} // one per message with data
	done   chan string   // the body once total messages came or it ended
	cancel context.CancelFunc
}

// request sends the request spec (the request N file) and returns its
// response, read to its end (raw, not yet normalised) or, for a streamed
// request, being read.
func (r *wireRun) request(ctx context.Context, n, spec string) *wireStream {
	t := r.t
	head, body, _ := strings.Cut(r.substitute(spec), "\n\n")
	lines := strings.Split(strings.TrimSpace(head), "\n")
	first := strings.Fields(lines[0])
	wait, total := -1, -1
	if len(first) == 4 && first[1] == "stream" {
		wait, _ = strconv.Atoi(first[2])
		total, _ = strconv.Atoi(first[3])
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	var rd io.Reader
	if first[0] == http.MethodPost {
		rd = strings.NewReader(strings.TrimSpace(body))
	}
	req, err := http.NewRequestWithContext(ctx, first[0], r.env.url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range lines[1:] {
		k, v, ok := strings.Cut(h, ": ")
		if !ok {
			t.Fatalf("request %s: header line %q", n, h)
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("request %s: %v", n, err)
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		r.vars["{{session}}"] = id
	}
	var hb strings.Builder
	fmt.Fprintf(&hb, "%d\n", resp.StatusCode)
	for _, k := range wireHeaders {
		if v := resp.Header.Get(k); v != "" {
			fmt.Fprintf(&hb, "%s: %s\n", k, v)
		}
	}
	s := &wireStream{name: n, head: hb.String(), msgs: make(chan struct{}, 64), done: make(chan string, 1), cancel: cancel}
	if total < 0 {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil {
			t.Fatalf("request %s: %v", n, err)
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && len(b) > 0 {
			var ind bytes.Buffer
			if json.Indent(&ind, b, "", "  ") == nil {
				b = ind.Bytes()
			}
		}
		s.raw = s.head + "\n" + string(b)
		return s
	}
	s.stream = true
	go func() {
		defer resp.Body.Close()
		var body, event strings.Builder
		count := 0
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		data := false
		for count < total && sc.Scan() {
			line := sc.Text()
			if line == "" {
				if event.Len() > 0 {
					body.WriteString(event.String() + "\n")
					if data {
						count++
						s.msgs <- struct{}{}
					}
				}
				event.Reset()
				data = false
				continue
			}
			if strings.HasPrefix(line, "data: ") && len(line) > len("data: ") {
				data = true
			}
			event.WriteString(line + "\n")
		}
		s.done <- s.head + "\n" + body.String()
	}()
	for i := range wait {
		select {
		case <-s.msgs:
		case <-ctx.Done():
			t.Fatalf("request %s: %d of the %d messages to wait for came", n, i, wait)
		}
	}
	return s
}

// ingest has the SNS ingest handle message, as functions/sns-ingest
// does, and then runs the webhook deliveries it handed off.
func (r *wireRun) ingest(ctx context.Context, n, message string) {
	sum, err := r.env.ingest.Handle(ctx, events.SNSEvent{Records: []events.SNSEventRecord{{
		EventVersion: "1.0", EventSource: "aws:sns",
		SNS: events.SNSEntity{Type: "Notification", MessageID: "wire-" + n, TopicArn: "arn:aws:sns:us-east-1:123456789012:mcpush-events",
			Timestamp: time.Now(), Message: strings.TrimSpace(message), SignatureVersion: "1"},
	}}})
	if err != nil || sum.Accepted != 1 {
		r.t.Fatalf("ingest %s: %+v, %v", n, sum, err)
	}
	if r.env.drain != nil {
		r.env.drain(ctx)
	}
}

// store sets the store's switch: "unavailable" or "available".
func (r *wireRun) store(n, state string) {
	if r.env.down == nil {
		r.t.Fatalf("store %s: this exchange's store has no switch (wireSetups)", n)
	}
	switch strings.TrimSpace(state) {
	case "unavailable":
		r.env.down.Store(true)
	case "available":
		r.env.down.Store(false)
	default:
		r.t.Fatalf("store %s: %q, want unavailable or available", n, state)
	}
}

// TestWire replays each exchange of testdata/wire against a real server
// (SQLite, httptest) and compares the server's responses, normalised,
// with the file's (see update).
func TestWire(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "wire", "*.txtar"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no exchanges in testdata/wire: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			comment, files := parseWire(string(raw))
			setup := wireSetups[strings.TrimSuffix(filepath.Base(path), ".txtar")]
			if setup == nil {
				setup = wireDefault
			}
			env := setup(t)
			r := &wireRun{t: t, env: env, vars: map[string]string{}}
			maps.Copy(r.vars, env.vars)
			var streams []*wireStream
			got := map[string]string{}
			for _, f := range files {
				kind, n, _ := strings.Cut(f.name, " ")
				var s *wireStream
				switch kind {
				case "request":
					s = r.request(t.Context(), n, f.data)
					streams = append(streams, s)
				case "ingest":
					r.ingest(t.Context(), n, f.data)
				case "store":
					r.store(n, f.data)
				case "response", "webhook":
					continue
				default:
					t.Fatalf("%s: unknown file %q", path, f.name)
				}
				// What the receiver got during the step, first: it names
				// values (the subscription id) the response holds.
				if env.hook != nil {
					if text := r.webhooks(n); text != "" {
						got["webhook "+n] = text
					}
				}
				if s != nil && !s.stream {
					s.done <- r.normalise(s.raw)
				}
			}
			for _, s := range streams {
				select {
				case text := <-s.done:
					if s.stream {
						text = r.normalise(text)
					}
					got[s.name] = text
				case <-time.After(20 * time.Second):
					t.Fatalf("request %s: its messages did not all come", s.name)
				}
				s.cancel()
			}
			// The archive as the server answers it: every request
			// followed by its response, and every step by what the
			// webhook receiver got during it.
			var out []wireFile
			for _, f := range files {
				kind, n, _ := strings.Cut(f.name, " ")
				switch kind {
				case "response", "webhook":
					continue
				case "request":
					out = append(out, f, wireFile{name: "response " + n, data: got[n]})
				default:
					out = append(out, f)
				}
				if text, ok := got["webhook "+n]; ok {
					out = append(out, wireFile{name: "webhook " + n, data: text})
				}
			}
			want := formatWire(comment, out)
			if *update {
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(string(raw), want); diff != "" {
				t.Errorf("%s: the wire changed (-file +server); if on purpose, run go test -run TestWire ./pkg/mcp/ -update:\n%s", path, diff)
			}
		})
	}
}

package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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
// module does not depend on: wireArchive parses the few lines of it): a
// comment, then files, each opened by a line "-- NAME --". The files are
//
//	request N    METHOD [stream WAIT TOTAL], header lines, a blank line, the body
//	response N   the status, the recorded headers, a blank line, the body
//	ingest N     the Message of an SNS notification the ingest handles
//
// A request without "stream" is read to its end before the next step.
// A streamed request's next step starts once WAIT messages (SSE events
// with data) came, or at once for 0; its response is what came when
// TOTAL messages did, and the stream is then closed. In requests,
// {{session}} and {{requestState}} are replaced by the last
// Mcp-Session-Id and requestState the server gave; in responses those
// values, timestamps and SSE event ids are replaced by placeholders.
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

// wireHeaders are the response headers an exchange records.
var wireHeaders = []string{"Content-Type", "Mcp-Session-Id"}

var (
	wireTime      = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
	wireEventID   = regexp.MustCompile(`(?m)^id: .*$`)
	wireState     = regexp.MustCompile(`("requestState":\s*)"([^"]*)"`)
	wireKeepalive = regexp.MustCompile(`(?m)^:.*\n`)
)

// wireRun replays one exchange.
type wireRun struct {
	t    *testing.T
	url  string
	vars map[string]string // placeholder -> the server's value
}

// substitute replaces the placeholders of a request with their values.
func (r *wireRun) substitute(s string) string {
	for k, v := range r.vars {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

// normalise replaces the volatile parts of a response with placeholders,
// and learns the values later requests use.
func (r *wireRun) normalise(s string) string {
	if m := wireState.FindStringSubmatch(s); m != nil {
		r.vars["{{requestState}}"] = m[2]
	}
	s = wireState.ReplaceAllString(s, `$1"{{requestState}}"`)
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
	msgs   chan struct{} // one per message with data
	done   chan string   // the body once total messages came or it ended
	cancel context.CancelFunc
}

// request sends the request spec (the request N file) and returns its
// response, read to its end or, for a streamed request, being read.
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
	req, err := http.NewRequestWithContext(ctx, first[0], r.url, rd)
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
		s.done <- r.normalise(s.head + "\n" + string(b))
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
// does.
func (r *wireRun) ingest(ctx context.Context, n, message string, store *sqlitestore.Store) {
	sum, err := ingest.New(store, nil).Handle(ctx, events.SNSEvent{Records: []events.SNSEventRecord{{
		EventVersion: "1.0", EventSource: "aws:sns",
		SNS: events.SNSEntity{Type: "Notification", MessageID: "wire-" + n, TopicArn: "arn:aws:sns:us-east-1:123456789012:mcpush-events",
			Timestamp: time.Now(), Message: strings.TrimSpace(message), SignatureVersion: "1"},
	}}})
	if err != nil || sum.Accepted != 1 {
		r.t.Fatalf("ingest %s: %+v, %v", n, sum, err)
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
			url, store := wireServer(t)
			r := &wireRun{t: t, url: url, vars: map[string]string{}}
			var streams []*wireStream
			got := map[string]string{}
			for _, f := range files {
				kind, n, _ := strings.Cut(f.name, " ")
				switch kind {
				case "request":
					s := r.request(t.Context(), n, f.data)
					streams = append(streams, s)
				case "ingest":
					r.ingest(t.Context(), n, f.data, store)
				case "response":
				default:
					t.Fatalf("%s: unknown file %q", path, f.name)
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
			// followed by its response.
			var out []wireFile
			for _, f := range files {
				kind, n, _ := strings.Cut(f.name, " ")
				switch kind {
				case "response":
					continue
				case "request":
					out = append(out, f, wireFile{name: "response " + n, data: got[n]})
				default:
					out = append(out, f)
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

package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	moto.Stop()
	os.Exit(code)
}

// heldStore is a store flavour for the held-stream tests: open returns a
// new Store on one shared backing database each time it is called (a
// Store of its own per "process").
type heldStore struct {
	name string
	open func(t *testing.T) notify.Store
}

// heldStores are SQLite (a file) and DynamoDB (moto, one table).
func heldStores(t *testing.T) []heldStore {
	path := filepath.Join(t.TempDir(), "held.db")
	return []heldStore{
		{"sqlite", func(t *testing.T) notify.Store {
			st, err := sqlitestore.New(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
		{"dynamodb", func() func(t *testing.T) notify.Store {
			var table string
			return func(t *testing.T) notify.Store {
				endpoint := moto.Start(t)
				client := moto.NewClient(context.Background(), endpoint)
				if table == "" {
					table = fmt.Sprintf("held-%d", time.Now().UnixNano())
					if err := dynamostore.CreateTable(context.Background(), client, table); err != nil {
						t.Fatal(err)
					}
				}
				return dynamostore.New(client, table, nil)
			}
		}()},
	}
}

// heldServer serves a server on st whose GET streams are held hold.
func heldServer(t *testing.T, st notify.Store, hold time.Duration, opts ...func(*mcp.ServerOptions)) string {
	so := &mcp.ServerOptions{
		DynamicRegistries: true,
		Limits:            mcp.Limits{MaxSessionsPerPrincipal: 100_000, MaxSessionsPerHour: 100_000, MaxRequestsPerMinute: 1_000_000},
	}
	for _, o := range opts {
		o(so)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "held", Version: "1"}, st, so)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "events://{topic}", Name: "events"},
		func(context.Context, *mcp.ServerRequest[*mcp.ReadResourceParams]) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, StreamHold: hold})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	return ts.URL
}

// publish ingests one event on topic through st, as the SNS ingest does.
func publish(t *testing.T, st notify.Store, topic, id string, data any) {
	msg, _ := json.Marshal(map[string]any{"type": "event", "topic": topic, "data": data})
	sum, err := ingest.New(st, nil).Handle(context.Background(), events.SNSEvent{Records: []events.SNSEventRecord{{
		EventVersion: "1.0", EventSource: "aws:sns",
		SNS: events.SNSEntity{Type: "Notification", MessageID: id, TopicArn: "arn:aws:sns:us-east-1:123456789012:mcpush-events",
			Timestamp: time.Now(), Message: string(msg), SignatureVersion: "1"},
	}}})
	if err != nil || sum.Accepted != 1 {
		t.Fatalf("ingest %s: %+v, %v", id, sum, err)
	}
}

// heldClient is one held stream as a client sees it: a 2025-11-25 session
// with its GET stream (resumed with Last-Event-ID when the server ends
// it), or a 2026-07-28 subscriptions/listen stream.
type heldClient struct {
	mu       sync.Mutex
	updated  int     // notifications/resources/updated received
	seqs     []int64 // sequences of the events' notifications/message (2025)
	lastAt   time.Time
	ends     []time.Time // when the server ended the stream by itself
	opened   chan struct{}
	openOnce sync.Once
}

func (c *heldClient) got(data string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var m struct {
		Method string `json:"method"`
		Params struct {
			Data struct {
				Sequence int64 `json:"sequence"`
			} `json:"data"`
		} `json:"params"`
	}
	json.Unmarshal([]byte(data), &m)
	switch m.Method {
	case "notifications/resources/updated":
		c.updated++
		c.lastAt = time.Now()
	case "notifications/message":
		c.seqs = append(c.seqs, m.Params.Data.Sequence)
		c.lastAt = time.Now()
	}
}

// readSSE reads one SSE response, handing each data line to c, and
// returns the last event id.
func (c *heldClient) readSSE(resp *http.Response) string {
	defer resp.Body.Close()
	last := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			last = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			c.openOnce.Do(func() { close(c.opened) })
			if v != "" {
				c.got(v)
			}
		}
	}
	return last
}

// getStream runs a 2025-11-25 client: initialize, subscribe to uri, and
// its GET stream, resumed after each end until ctx ends.
func (c *heldClient) getStream(ctx context.Context, t *testing.T, url, uri string) {
	sid := initialize(t, url, "2025-11-25")
	r := post(t, url, sid, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"`+uri+`"}}`)
	r.Body.Close()
	last := ""
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return // ctx ended
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
			t.Errorf("GET stream: %d", resp.StatusCode)
			return
		}
		if id := c.readSSE(resp); id != "" {
			last = id
		}
		if ctx.Err() == nil {
			c.mu.Lock()
			c.ends = append(c.ends, time.Now())
			c.mu.Unlock()
			time.Sleep(time.Second) // the retry interval
		}
	}
}

// listen runs a 2026-07-28 client's subscriptions/listen stream on uri
// until ctx ends.
func (c *heldClient) listen(ctx context.Context, t *testing.T, url, uri string, id int) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":[%q]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, id, uri)
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Errorf("listen: %d", resp.StatusCode)
		return
	}
	c.readSSE(resp)
	if ctx.Err() == nil {
		t.Errorf("listen stream %d ended by itself", id)
	}
}

// TestHeldStreamsAtScale is the regression test of issue 17's stuck
// streams: hundreds of held streams opened concurrently on one process
// (half 2025-11-25 GET streams, half 2026-07-28 listen streams, all on
// events://T), on SQLite and on DynamoDB, each with two events ingested
// by another process while they are idle: every stream gets each event
// exactly once (GET streams: both notifications/message in sequence
// order and two resources/updated; listen streams: two
// resources/updated), within the bound, and every GET stream, idle after
// the second event, ends at its hold and not before.
func TestHeldStreamsAtScale(t *testing.T) {
	for _, hs := range heldStores(t) {
		// moto serves one request at a time per table: fewer streams,
		// and a hold longer than their opening.
		perEra, hold := 150, 8*time.Second
		if hs.name == "dynamodb" {
			perEra, hold = 60, 30*time.Second
		}
		t.Run(hs.name, func(t *testing.T) {
			var counter storecount.Counter
			url := heldServer(t, storecount.Wrap(hs.open(t), &counter), hold)
			ingestStore := hs.open(t) // another process's store
			topic := fmt.Sprintf("T%d", time.Now().UnixNano())
			uri := ingest.EventURI(topic)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer func() { cancel(); wg.Wait() }()
			clients := make([]*heldClient, 2*perEra)
			opening := time.Now()
			sem := make(chan struct{}, 50) // 50 opened at a time
			for i := range clients {
				c := &heldClient{opened: make(chan struct{})}
				clients[i] = c
				wg.Add(1)
				go func() {
					defer wg.Done()
					sem <- struct{}{}
					go func() {
						select {
						case <-c.opened:
						case <-ctx.Done():
						}
						<-sem
					}()
					if i < perEra {
						c.getStream(ctx, t, url, uri)
					} else {
						c.listen(ctx, t, url, uri, i)
					}
				}()
			}
			for i, c := range clients {
				select {
				case <-c.opened:
				case <-time.After(60 * time.Second):
					t.Fatalf("stream %d did not open within 60 s", i)
				}
			}
			t.Logf("%s: %d streams open after %v", hs.name, len(clients), time.Since(opening).Round(time.Millisecond))
			counter.Reset()
			time.Sleep(time.Second) // every stream idle
			t.Logf("%s: store requests of the %d idle streams in 1 s: %v", hs.name, len(clients), counter.Counts())
			start := time.Now()
			publish(t, ingestStore, topic, topic+"-1", 1)
			publish(t, ingestStore, topic, topic+"-2", 2)
			t.Logf("%s: published after %v", hs.name, time.Since(start).Round(time.Millisecond))
			done := func(c *heldClient) bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				return c.updated >= 2
			}
			for time.Since(start) < 60*time.Second && !all(clients, done) {
				time.Sleep(50 * time.Millisecond)
			}
			delivered := time.Since(start)
			// Until every GET stream ended after its last event (at its
			// hold), or well past the hold.
			counter.Reset()
			waitEnd := time.Now()
			ended := func(c *heldClient) bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				return len(c.ends) > 0 && c.ends[len(c.ends)-1].After(c.lastAt)
			}
			for time.Since(waitEnd) < hold+5*time.Second && !all(clients[:perEra], ended) {
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("%s: store requests while held idle for %v: %v", hs.name, time.Since(waitEnd).Round(time.Second), counter.Counts())
			cancel()
			wg.Wait()
			var stuck []int
			for i, c := range clients {
				c.mu.Lock()
				var ended time.Time // the first end after the last event
				for _, e := range c.ends {
					if e.After(c.lastAt) {
						ended = e
						break
					}
				}
				switch {
				case c.updated != 2:
					stuck = append(stuck, i)
					t.Errorf("stream %d (%s) got %d resources/updated, want 2 (exactly once each)", i, era(i, perEra), c.updated)
				case i < perEra && !slices.Equal(c.seqs, []int64{1, 2}):
					t.Errorf("GET stream %d got event sequences %v, want [1 2]", i, c.seqs)
				case i < perEra && ended.IsZero():
					t.Errorf("GET stream %d did not end after its last event; want an end at its hold %v", i, hold)
				case i < perEra && ended.Before(c.lastAt.Add(hold-500*time.Millisecond)):
					t.Errorf("GET stream %d ended %v after its last event, before its hold %v", i, ended.Sub(c.lastAt), hold)
				case i < perEra && ended.After(c.lastAt.Add(hold+2*time.Second)):
					t.Errorf("GET stream %d ended %v after its last event; want its hold %v", i, ended.Sub(c.lastAt), hold)
				}
				c.mu.Unlock()
			}
			t.Logf("%s: %d streams (%d per era): every event on every stream within %v; %d not delivered",
				hs.name, len(clients), perEra, delivered.Round(time.Millisecond), len(stuck))
		})
	}
}

func all[T any](xs []T, f func(T) bool) bool {
	for _, x := range xs {
		if !f(x) {
			return false
		}
	}
	return true
}

func era(i, perEra int) string {
	if i < perEra {
		return "2025 GET"
	}
	return "2026 listen"
}

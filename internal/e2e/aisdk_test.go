package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// aisdkVersion is the @ai-sdk/mcp version test/node/package.json pins.
const aisdkVersion = "2.0.99"

// aisdkDeliveryWait is how long an event published with sns-ingest may
// take to reach the receiver, whoever delivers it (the ingest right
// after its append, a sweep, a queue's worker).
const aisdkDeliveryWait = 20 * time.Second

// aisdkLine is one line of test/node/aisdk/events.mjs's output.
type aisdkLine struct {
	Kind           string               `json:"kind"`
	Status         int                  `json:"status"`
	Type           string               `json:"type"`
	WebhookID      string               `json:"webhookId"`
	SubscriptionID string               `json:"subscriptionId"`
	Event          *mcp.EventOccurrence `json:"event"`
	Result         struct {
		ID     string  `json:"id"`
		Cursor *string `json:"cursor"`
	} `json:"result"`
	Callback string `json:"callback"`
	Command  string `json:"command"`
	Message  string `json:"message"`
}

// aisdkClient drives events.mjs: commands on its stdin, its lines on a
// channel.
type aisdkClient struct {
	stdin  io.WriteCloser
	lines  chan aisdkLine
	mu     sync.Mutex
	stderr strings.Builder
}

func (c *aisdkClient) send(t *testing.T, cmd string) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		t.Fatalf("events.mjs %s: %v", cmd, err)
	}
}

// next returns the next line of one of kinds within timeout, collecting
// the request lines it passes in reqs.
func (c *aisdkClient) next(t *testing.T, timeout time.Duration, reqs *[]aisdkLine, kinds ...string) aisdkLine {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.mu.Lock()
				defer c.mu.Unlock()
				t.Fatalf("events.mjs exited; stderr:\n%s", c.stderr.String())
			}
			if l.Kind == "request" && reqs != nil {
				*reqs = append(*reqs, l)
			}
			if l.Kind == "error" {
				t.Fatalf("events.mjs: %s: %s", l.Command, l.Message)
			}
			for _, k := range kinds {
				if l.Kind == k {
					return l
				}
			}
		case <-deadline:
			t.Fatalf("events.mjs: no %v within %v", kinds, timeout)
		}
	}
}

// startAISDK runs events.mjs against url with token, its receiver on port.
func startAISDK(t *testing.T, url, token string, port int) *aisdkClient {
	t.Helper()
	node := testenv.Node22(t)
	testenv.NodePackage(t, "@ai-sdk/mcp", aisdkVersion)
	script := filepath.Join(testenv.RepoRoot(t), "test", "node", "aisdk", "events.mjs")
	if _, err := os.Stat(script); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script)
	cmd.Env = append(processEnv(),
		"MCPUSH_NODE_DIR="+testenv.NodeDir(t),
		"MCP_URL="+url, "MCP_TOKEN="+token, "RECEIVER_PORT="+strconv.Itoa(port))
	c := &aisdkClient{lines: make(chan aisdkLine, 100)}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.stderr.Write(p)
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.stdin = stdin
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l aisdkLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Logf("events.mjs: %s", sc.Bytes())
				continue
			}
			c.lines <- l
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	c.next(t, 30*time.Second, nil, "ready")
	return c
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestAISDKWebhook: the Vercel AI SDK (@ai-sdk/mcp, pinned) as a
// third-party Events client, on SQLite and on DynamoDB (moto), the server
// with MCPUSH_AUTH=oauth (webhooks need a principal). Its client
// subscribes by webhook (experimental_events.subscribe) with its own
// receiver (experimental_createMCPEventWebhook) answering the
// verification; three events are published with sns-ingest and the
// receiver gets, within aisdkDeliveryWait, the two that match the
// subscription's arguments (region=eu), each delivery verified by the SDK
// (2xx; it answers 401 to a bad signature, which a forged delivery checks),
// with the poll eventIds; the SDK unsubscribes, and a later event reaches
// no one. The test depends only on "published with sns-ingest, received
// within N seconds", not on which process delivers.
func TestAISDKWebhook(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the AI SDK webhook test")
	}
	rig := newWebhookRig(t)
	for _, store := range []Store{SQLiteStore(), DynamoDBStore()} {
		t.Run(store.Name, func(t *testing.T) {
			testAISDKWebhook(t, rig, store)
		})
	}
}

func testAISDKWebhook(t *testing.T, rig *webhookRig, store Store) {
	port := testenv.FreePort(t)
	origin := "http://127.0.0.1:" + strconv.Itoa(port)
	storeEnv, env := rig.env(t, store, "aisdk-e2e-key-0123456789abcdef0123456789ab", origin)
	c := StartCluster(t, 1, &ClusterOptions{Binary: rig.bin, Env: env, ReadyPath: "/healthz"})
	url := c.URL(0)
	alice := rig.as.Token(t, "alice", "alice-secret", url, oauthScope)
	ingest := rig.ingest(t, storeEnv)

	sdk := startAISDK(t, url, alice, port)
	var reqs []aisdkLine
	// The event type reaches the server's registry copy within its refresh.
	var sub aisdkLine
	deadline := time.Now().Add(15 * time.Second)
	for {
		sdk.send(t, `subscribe order.created {"region":"eu"}`)
		l := sdk.nextAny(t, 30*time.Second, &reqs)
		if l.Kind == "subscribed" {
			sub = l
			break
		}
		if time.Now().After(deadline) || !strings.Contains(l.Message, "Unknown MCP event") {
			t.Fatalf("subscribe: %s: %s", l.Command, l.Message)
		}
		time.Sleep(200 * time.Millisecond)
	}
	id := sub.Result.ID
	if !strings.HasPrefix(id, "sub_") {
		t.Fatalf("subscribe result: %+v", sub.Result)
	}

	published := time.Now()
	ingest.mustDeliver(t,
		pushSNSRecord{MessageID: "m-1", Message: pushEventMessage("orders", map[string]any{"region": "eu", "n": 1})},
		pushSNSRecord{MessageID: "m-2", Message: pushEventMessage("orders", map[string]any{"region": "us", "n": 2})},
		pushSNSRecord{MessageID: "m-3", Message: pushEventMessage("orders", map[string]any{"region": "eu", "n": 3})})
	var got []string
	for range 2 {
		l := sdk.next(t, aisdkDeliveryWait, &reqs, "event")
		if l.SubscriptionID != id || l.Event == nil || l.Event.Name != "order.created" {
			t.Fatalf("event: %+v", l)
		}
		var data struct {
			Region string `json:"region"`
			N      int    `json:"n"`
		}
		if err := json.Unmarshal(l.Event.Data, &data); err != nil || data.Region != "eu" {
			t.Errorf("event data %s: %v", l.Event.Data, err)
		}
		got = append(got, l.Event.EventID)
	}
	received := time.Since(published)
	if want := []string{mcp.EventID("order.created", "m-1"), mcp.EventID("order.created", "m-3")}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("events %v, want %v (in order)", got, want)
	}

	// A forged delivery (the subscription's callback and id, a signature
	// under another secret) is refused by the SDK's receiver: it verifies
	// the signature, rather than accepting anything sent to the URL.
	forged := `{"eventId":"evt_forged","name":"order.created","timestamp":"2026-12-02T00:00:00Z","data":{"region":"eu"}}`
	if !strings.HasPrefix(sub.Callback, origin+"/hooks?") {
		t.Fatalf("the SDK's callback %q", sub.Callback)
	}
	freq, _ := http.NewRequest(http.MethodPost, sub.Callback, strings.NewReader(forged))
	freq.Header.Set("Content-Type", "application/json")
	freq.Header.Set("webhook-id", "evt_forged")
	freq.Header.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
	freq.Header.Set("webhook-signature", "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	freq.Header.Set("X-MCP-Subscription-Id", id)
	resp, err := http.DefaultClient.Do(freq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a forged delivery: HTTP %d, want 401", resp.StatusCode)
	}

	sdk.send(t, "unsubscribe")
	sdk.next(t, 30*time.Second, &reqs, "unsubscribed")
	ingest.mustDeliver(t, pushSNSRecord{MessageID: "m-4", Message: pushEventMessage("orders", map[string]any{"region": "eu", "n": 4})})
	quiet := time.After(2 * time.Second)
drain:
	for {
		select {
		case l, ok := <-sdk.lines:
			if !ok {
				break drain
			}
			if l.Kind == "event" {
				t.Errorf("an event after the unsubscribe: %+v", l)
			}
			if l.Kind == "request" {
				reqs = append(reqs, l) // the last event's, printed after its answer
			}
		case <-quiet:
			break drain
		}
	}

	// Every request from the server was verified and accepted by the SDK's
	// receiver: the verification (its challenge echoed) and each event.
	var verifications, events int
	for _, r := range reqs {
		if r.SubscriptionID != id || r.WebhookID == "evt_forged" {
			continue
		}
		switch {
		case r.WebhookID == mcp.EventID("order.created", "m-4"):
			t.Errorf("a delivery after the unsubscribe: %+v", r)
		case r.Status < 200 || r.Status > 299:
			t.Errorf("the SDK's receiver answered %d to %s %q", r.Status, r.Type, r.WebhookID)
		case r.Type == "verification":
			verifications++
		case r.Type == "":
			events++
		}
	}
	if verifications != 1 || events < 2 {
		t.Errorf("the receiver accepted %d verifications and %d events; want 1 and at least 2", verifications, events)
	}
	t.Logf("%s: %d requests from the server, all verified by @ai-sdk/mcp %s; both events received %v after the publish began", store.Name, verifications+events, aisdkVersion, received.Round(time.Millisecond))
}

// nextAny returns the next subscribed, unsubscribed or error line.
func (c *aisdkClient) nextAny(t *testing.T, timeout time.Duration, reqs *[]aisdkLine) aisdkLine {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.mu.Lock()
				defer c.mu.Unlock()
				t.Fatalf("events.mjs exited; stderr:\n%s", c.stderr.String())
			}
			switch l.Kind {
			case "request":
				*reqs = append(*reqs, l)
			case "subscribed", "unsubscribed", "error":
				return l
			}
		case <-deadline:
			t.Fatalf("events.mjs: no answer within %v", timeout)
		}
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/oauthtest"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// webhookRecord is one request as test/node/webhooks/receiver.mjs (the npm
// standardwebhooks verifier) saw it.
type webhookRecord struct {
	ID             string          `json:"id"`
	SubscriptionID string          `json:"subscriptionId"`
	Verified       []bool          `json:"verified"`
	Accepted       bool            `json:"accepted"`
	Type           string          `json:"type"`
	EventID        string          `json:"eventId"`
	Body           json.RawMessage `json:"body"`
}

// startNodeReceiver runs receiver.mjs with secret and returns its origin
// and its records. Under CI=true a missing Node or package fails.
func startNodeReceiver(t *testing.T, secret string) (string, <-chan webhookRecord) {
	t.Helper()
	port, lines := testenv.WebhookReceiver(t, "WEBHOOK_SECRETS="+secret, "WEBHOOK_MODE=any")
	records := make(chan webhookRecord, 100)
	go func() {
		defer close(records)
		for line := range lines {
			var r webhookRecord
			if json.Unmarshal(line, &r) == nil {
				records <- r
			}
		}
	}()
	return "http://127.0.0.1:" + strconv.Itoa(port), records
}

// webhookRig is what the end-to-end webhook tests share: an
// authorization server whose client alice has oauthScope, and the
// binaries of the server and of sns-ingest.
type webhookRig struct {
	as             *oauthtest.Server
	bin, ingestBin string
}

// newWebhookRig starts the authorization server and builds the binaries.
func newWebhookRig(t *testing.T) *webhookRig {
	t.Helper()
	return &webhookRig{
		as: oauthtest.Start(t, &oauthtest.Options{
			Scopes:  []string{oauthScope},
			Clients: []oauthtest.Client{{ID: "alice", Secret: "alice-secret", Scope: oauthScope}},
		}),
		bin:       ServerBinary(t),
		ingestBin: testenv.BuildBinary(t, "./functions/sns-ingest"),
	}
}

// env returns the environment of sns-ingest on store, with the state key
// stateKey and the receiver's origin allowed (whichever process delivers
// checks the callback again before every POST), and that of the server:
// the same with MCPUSH_AUTH=oauth against the rig's authorization server.
func (r *webhookRig) env(t *testing.T, store Store, stateKey, origin string) (ingestEnv, serverEnv []string) {
	ingestEnv = append(store.Env(t), "MCPUSH_STATE_KEYS="+stateKey, "MCPUSH_WEBHOOK_ALLOW="+origin)
	serverEnv = slices.Concat(ingestEnv, []string{
		"MCPUSH_AUTH=oauth",
		"MCPUSH_OAUTH_ISSUER=" + r.as.Issuer,
		"MCPUSH_OAUTH_SCOPES=" + oauthScope,
		interopGORACE(),
	})
	return ingestEnv, serverEnv
}

// ingest returns sns-ingest with env, after it put the event type
// order.created (topic orders, argument region) in the events registry.
func (r *webhookRig) ingest(t *testing.T, env []string) *pushIngest {
	t.Helper()
	ingest := &pushIngest{bin: r.ingestBin, env: env}
	ingest.mustDeliver(t, pushSNSRecord{MessageID: "reg-1", Message: `{"type":"registry","registry":"events","op":"put","items":[{"name":"order.created","topic":"orders","inputSchema":{"type":"object","properties":{"region":{"type":"string"}}}}]}`})
	return ingest
}

// nextWebhook returns the receiver's next record within timeout.
func nextWebhook(t *testing.T, records <-chan webhookRecord, timeout time.Duration) webhookRecord {
	t.Helper()
	select {
	case r, ok := <-records:
		if !ok {
			t.Fatal("receiver.mjs exited")
		}
		return r
	case <-time.After(timeout):
		t.Fatalf("no webhook within %v", timeout)
	}
	return webhookRecord{}
}

// TestWebhookE2E: webhook delivery end to end with auth on (MCPUSH_AUTH=
// oauth against a real authorization server), the receiver the npm
// standardwebhooks verifier (every request it accepts verified by a third
// party): on SQLite and on DynamoDB with one process, and with three
// behind the round-robin proxy on DynamoDB, one of them killed between
// the subscribe and the event. An anonymous subscribe is 401 (no token);
// alice subscribes (the verification handshake reaches the receiver,
// verified), an event published through sns-ingest arrives once, signed,
// with the poll eventId and her subscription id; a refresh on any process
// keeps the id and reports the delivery; after her unsubscribe another
// event reaches no one.
func TestWebhookE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the multi-process webhook test")
	}
	rig := newWebhookRig(t)
	for _, tc := range []struct {
		n     int
		store Store
		kill  bool
	}{{1, SQLiteStore(), false}, {1, DynamoDBStore(), false}, {3, DynamoDBStore(), true}} {
		t.Run(fmt.Sprintf("%d processes %s", tc.n, tc.store.Name), func(t *testing.T) {
			testWebhookE2E(t, rig, tc.n, tc.store, tc.kill)
		})
	}
}

func testWebhookE2E(t *testing.T, rig *webhookRig, n int, store Store, kill bool) {
	secret := mcp.NewWebhookSecret()
	origin, records := startNodeReceiver(t, secret)
	storeEnv, env := rig.env(t, store, "webhook-e2e-key-0123456789abcdef0123456789", origin)
	var l net.Listener
	if n > 1 {
		var err error
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		env = append(env, "MCPUSH_RESOURCE_URL=http://"+l.Addr().String()+"/mcp")
	}
	c := StartCluster(t, n, &ClusterOptions{Binary: rig.bin, Env: env, ReadyPath: "/healthz"})
	url := c.URL(0)
	if n > 1 {
		url = NewProxyOn(t, l, c.BaseURLs()...).URL + "/mcp"
	}
	alice := rig.as.Token(t, "alice", "alice-secret", url, oauthScope)
	ingest := rig.ingest(t, storeEnv)

	call := func(token, method, params string) (int, map[string]any, *struct {
		Code int             `json:"code"`
		Data json.RawMessage `json:"data"`
	}) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		hdr := []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method}
		if token != "" {
			hdr = append(hdr, "Authorization", "Bearer "+token)
		}
		resp, b := testutil.PostRead(t, nil, url, "", body, hdr...)
		var r struct {
			Result map[string]any
			Error  *struct {
				Code int             `json:"code"`
				Data json.RawMessage `json:"data"`
			}
		}
		if resp.StatusCode == 200 {
			text := string(b)
			if i := strings.LastIndex(text, "data: "); i >= 0 {
				text = text[i+len("data: "):]
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &r); err != nil {
				t.Fatalf("%s: %q: %v", method, b, err)
			}
		}
		return resp.StatusCode, r.Result, r.Error
	}
	hook := origin + "/hooks/alice"
	params := `"name":"order.created","arguments":{"region":"eu"},"delivery":{"mode":"webhook","url":"` + hook + `","secret":"` + secret + `"}`
	if status, _, _ := call("", "events/subscribe", params); status != 401 {
		t.Errorf("subscribe without a token: HTTP %d, want 401", status)
	}
	// The event type reaches every process's registry copy within its refresh.
	var id string
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, res, rerr := call(alice, "events/subscribe", params)
		if status == 200 && rerr == nil {
			id, _ = res["id"].(string)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("subscribe: HTTP %d %+v", status, rerr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	v := nextWebhook(t, records, 10*time.Second)
	if v.Type != "verification" || !v.Accepted || v.SubscriptionID != id || !strings.HasPrefix(v.ID, "msg_verification_") {
		t.Fatalf("verification: %+v", v)
	}
	if kill {
		if err := c.Kill(1); err != nil {
			t.Fatal(err)
		}
	}
	ingest.mustDeliver(t,
		pushSNSRecord{MessageID: "m-us", Message: pushEventMessage("orders", map[string]any{"region": "us", "n": 1})},
		pushSNSRecord{MessageID: "m-eu", Message: pushEventMessage("orders", map[string]any{"region": "eu", "n": 2})})
	ev := nextWebhook(t, records, 10*time.Second)
	if !ev.Accepted || ev.Type != "" || ev.SubscriptionID != id || ev.ID != mcp.EventID("order.created", "m-eu") || ev.EventID != ev.ID {
		t.Fatalf("event: %+v", ev)
	}
	var occ struct {
		Name   string          `json:"name"`
		Data   json.RawMessage `json:"data"`
		Cursor string          `json:"cursor"`
	}
	if err := json.Unmarshal(ev.Body, &occ); err != nil || occ.Name != "order.created" || !strings.Contains(string(occ.Data), `"n":2`) || !strings.HasPrefix(occ.Cursor, "ev1.") {
		t.Errorf("event body %s: %v", ev.Body, err)
	}
	if kill {
		// The killed process back: it refreshes the subscription another
		// process stored.
		if err := c.Restart(1); err != nil {
			t.Fatal(err)
		}
	}
	// A refresh on every process. (The delivery is recorded by the
	// deliverer's release just after the receiver's 2xx: a refresh at
	// once may come before it, so the first may ask again, briefly.)
	for i := range n {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			status, res, rerr := call(alice, "events/subscribe", params)
			if status != 200 || rerr != nil || res["id"] != id {
				t.Fatalf("refresh: HTTP %d %+v %+v", status, res, rerr)
			}
			ds, _ := res["deliveryStatus"].(map[string]any)
			if ds != nil && ds["active"] == true && ds["lastDeliveryAt"] != nil {
				break
			}
			if i > 0 || time.Now().After(deadline) {
				t.Errorf("refresh deliveryStatus: %+v", res["deliveryStatus"])
				break
			}
		}
	}
	if status, _, rerr := call(alice, "events/unsubscribe", `"name":"order.created","arguments":{"region":"eu"},"delivery":{"url":"`+hook+`"}`); status != 200 || rerr != nil {
		t.Fatalf("unsubscribe: HTTP %d %+v", status, rerr)
	}
	ingest.mustDeliver(t, pushSNSRecord{MessageID: "m-after", Message: pushEventMessage("orders", map[string]any{"region": "eu", "n": 3})})
	select {
	case r := <-records:
		t.Errorf("a request after the unsubscribe: %+v", r)
	case <-time.After(time.Second):
	}
}

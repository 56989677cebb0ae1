package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/oauthtest"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// adminScope is the servers' default MCPUSH_ADMIN_SCOPE.
const adminScope = "mcpush:admin"

// TestAdminE2E: the operator's view end to end, on SQLite and on
// DynamoDB: the built server with OAuth against a real authorization
// server, a real webhook receiver, events through sns-ingest, and the
// built CLI. An admin's token (the admin scope) sees the admin tools and,
// through `mcpush admin webhooks`, lists alice's subscription with its
// last attempts, counts it, suspends it (an event then waits), resumes
// it (the event arrives), replays it from a cursor and from a time (the
// events arrive again), is refused a foreign cursor, and deletes it.
// Alice's token (no admin scope) neither sees nor can call them: tools
// lists none, `mcpush admin` says "not an admin", a raw tools/call is an
// unknown tool, and nothing changes. No output holds a secret.
func TestAdminE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the multi-process admin test")
	}
	as := oauthtest.Start(t, &oauthtest.Options{
		Scopes: []string{oauthScope, adminScope},
		Clients: []oauthtest.Client{
			{ID: "alice", Secret: "alice-secret", Scope: oauthScope},
			{ID: "ops", Secret: "ops-secret", Scope: oauthScope + " " + adminScope},
		},
	})
	bin := ServerBinary(t)
	ingestBin := testenv.BuildBinary(t, "./functions/sns-ingest")
	cli := testenv.BuildBinary(t, "./cmd/mcpush")
	for _, store := range []Store{SQLiteStore(), DynamoDBStore()} {
		t.Run(store.Name, func(t *testing.T) { testAdminE2E(t, as, bin, ingestBin, cli, store) })
	}
}

func testAdminE2E(t *testing.T, as *oauthtest.Server, bin, ingestBin, cli string, store Store) {
	secret := mcp.NewWebhookSecret()
	sec, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	// The receiver: verifies every delivery; counts the events' POSTs
	// (a replay repeats webhook-ids, which the Receiver would not hand
	// to Handle again); fails them while down is set.
	var down atomic.Bool
	var mu sync.Mutex
	var events []string // the data of each event POST, in order
	var cursors []string
	recv := &webhook.Receiver{
		Secrets: func(string) []webhook.Secret { return []webhook.Secret{sec} },
		Handle: func(d webhook.Delivery) error {
			if d.Event != nil && d.Event.Cursor != nil {
				mu.Lock()
				cursors = append(cursors, *d.Event.Cursor)
				mu.Unlock()
			}
			return nil
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		buf.ReadFrom(r.Body)
		var occ struct {
			Name string          `json:"name"`
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal(buf.Bytes(), &occ) == nil && occ.Name == "order.created" {
			if down.Load() {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			mu.Lock()
			events = append(events, string(occ.Data))
			mu.Unlock()
		}
		r.Body = readCloser{bytes.NewReader(buf.Bytes())}
		recv.ServeHTTP(w, r)
	}))
	defer srv.Close()
	received := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), events...)
	}

	storeEnv := append(store.Env(t),
		"MCPUSH_STATE_KEYS=admin-e2e-key-0123456789abcdef0123456789ab",
		"MCPUSH_WEBHOOK_ALLOW="+srv.URL)
	env := append(storeEnv,
		"MCPUSH_AUTH=oauth",
		"MCPUSH_OAUTH_ISSUER="+as.Issuer,
		"MCPUSH_OAUTH_SCOPES="+oauthScope,
		interopGORACE())
	c := StartCluster(t, 1, &ClusterOptions{Binary: bin, Env: env, ReadyPath: "/healthz"})
	url := c.URL(0)
	alice := as.Token(t, "alice", "alice-secret", url, oauthScope)
	ops := as.Token(t, "ops", "ops-secret", url, oauthScope+" "+adminScope)
	ingest := &pushIngest{bin: ingestBin, env: storeEnv}
	ingest.mustDeliver(t, pushSNSRecord{MessageID: "reg-1", Message: `{"type":"registry","registry":"events","op":"put","items":[{"name":"order.created","topic":"orders"}]}`})

	// Alice subscribes (the server verifies the callback in the call).
	body := `{"jsonrpc":"2.0","id":1,"method":"events/subscribe","params":{"name":"order.created","delivery":{"mode":"webhook","url":"` + srv.URL + `/hooks/alice","secret":"` + secret + `"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	var id string
	waitUntil(t, "alice's subscription", 20, func() bool {
		resp, b := testutil.PostRead(t, nil, url, "", body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "events/subscribe", "Authorization", "Bearer "+alice)
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"id":"sub_`) {
			return false
		}
		_, rest, _ := strings.Cut(string(b), `"id":"sub_`)
		id = "sub_" + rest[:strings.Index(rest, `"`)]
		return true
	})

	// The CLI, with a bearer token; all it prints is checked for secrets.
	var printed strings.Builder
	mcpush := func(token string, args ...string) (int, string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, cli, append([]string{"--url", url, "--header", "Authorization: Bearer " + token}, args...)...)
		cmd.Env = processEnv()
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		printed.WriteString(out.String() + errb.String())
		return code, out.String(), errb.String()
	}
	list := func() delivery.ListResult {
		t.Helper()
		code, out, errb := mcpush(ops, "admin", "webhooks", "list", "--type", "order.created", "--json")
		var res delivery.ListResult
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("admin webhooks list: exit %d, %s %s", code, out, errb)
		}
		return res
	}
	view := func() delivery.View {
		t.Helper()
		res := list()
		if len(res.Subscriptions) != 1 || res.Subscriptions[0].ID != id {
			t.Fatalf("admin webhooks list = %+v, want %s only", res, id)
		}
		return res.Subscriptions[0]
	}

	ingest.mustDeliver(t, pushSNSRecord{MessageID: "m1", Message: pushEventMessage("orders", map[string]any{"n": 1})})
	waitUntil(t, "event 1", 20, func() bool { return len(received()) == 1 })
	var v delivery.View
	waitUntil(t, "the attempt recorded", 20, func() bool { v = view(); return len(v.Attempts) == 1 })
	if v.Principal == "" || v.Type != "order.created" || v.State != delivery.StateActive || v.Watermark != 1 ||
		v.Attempts[0].Status != 204 || v.Attempts[0].Category != delivery.AttemptOK || v.Attempts[0].LatencyMS <= 0 {
		t.Errorf("alice's subscription: %+v", v)
	}
	if code, out, _ := mcpush(ops, "admin", "webhooks", "list", "--principal", v.Principal); code != 0 || !strings.Contains(out, id+"  topic=orders type=order.created") || !strings.Contains(out, "status=204 ok") {
		t.Errorf("admin webhooks list --principal: exit %d:\n%s", code, out)
	}
	if code, out, _ := mcpush(ops, "admin", "webhooks", "counts", "--json"); code != 0 || !strings.Contains(out, `"order.created": {`) || !strings.Contains(out, `"total": 1`) {
		t.Errorf("admin webhooks counts: exit %d:\n%s", code, out)
	}

	// Suspended: an event waits; resumed: it arrives.
	if code, out, errb := mcpush(ops, "admin", "webhooks", "suspend", id, "--topic", "orders"); code != 0 || !strings.Contains(out, `"state": "suspended"`) {
		t.Fatalf("suspend: exit %d: %s %s", code, out, errb)
	}
	ingest.mustDeliver(t, pushSNSRecord{MessageID: "m2", Message: pushEventMessage("orders", map[string]any{"n": 2})})
	time.Sleep(2 * time.Second)
	if n := len(received()); n != 1 {
		t.Errorf("%d events delivered while suspended, want 0", n-1)
	}
	if code, out, errb := mcpush(ops, "admin", "webhooks", "resume", id, "--topic", "orders"); code != 0 || !strings.Contains(out, `"state": "active"`) {
		t.Fatalf("resume: exit %d: %s %s", code, out, errb)
	}
	waitUntil(t, "event 2 after resume", 20, func() bool { return len(received()) == 2 })

	// Replay from event 1's cursor: event 2 again; from a time before
	// both: both again.
	mu.Lock()
	first := cursors[0]
	mu.Unlock()
	waitUntil(t, "the claim released", 20, func() bool { return !view().Delivering })
	if code, out, errb := mcpush(ops, "admin", "webhooks", "replay", id, "--topic", "orders", "--cursor", first); code != 0 || !strings.Contains(out, `"watermark": 1`) {
		t.Fatalf("replay --cursor: exit %d: %s %s", code, out, errb)
	}
	waitUntil(t, "event 2 replayed", 20, func() bool { return len(received()) == 3 })
	waitUntil(t, "the claim released", 20, func() bool { return !view().Delivering })
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	if code, out, errb := mcpush(ops, "admin", "webhooks", "replay", id, "--topic", "orders", "--since", since); code != 0 || !strings.Contains(out, `"watermark": 0`) {
		t.Fatalf("replay --since: exit %d: %s %s", code, out, errb)
	}
	waitUntil(t, "events 1 and 2 replayed", 20, func() bool { return len(received()) == 5 })
	if got := received(); got[2] != got[1] || got[3] != got[0] || got[4] != got[1] {
		t.Errorf("deliveries %q: want 1, 2, then 2, then 1, 2", got)
	}
	waitUntil(t, "the claim released", 20, func() bool { return !view().Delivering })
	// A bad request changes nothing: a cursor that is not this
	// subscription's.
	before := view()
	if code, _, errb := mcpush(ops, "admin", "webhooks", "replay", id, "--topic", "orders", "--cursor", "ev1.forged.sig"); code != 1 || !strings.Contains(errb, "cursor") {
		t.Errorf("replay with a forged cursor: exit %d: %s", code, errb)
	}
	if after := view(); after.Watermark != before.Watermark || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("a refused replay changed the subscription: %+v -> %+v", before, after)
	}

	// Not an admin: alice sees no admin tool and cannot call one.
	if code, out, _ := mcpush(alice, "tools"); code != 0 || strings.Contains(out, "admin_") {
		t.Errorf("alice's tools: exit %d:\n%s", code, out)
	}
	if code, out, _ := mcpush(ops, "tools"); code != 0 || !strings.Contains(out, "admin_webhooks_list") {
		t.Errorf("the admin's tools: exit %d:\n%s", code, out)
	}
	if code, _, errb := mcpush(alice, "admin", "webhooks", "list"); code != 1 || !strings.Contains(errb, "not an admin") || !strings.Contains(errb, "hint: ") {
		t.Errorf("alice's admin webhooks list: exit %d: %s", code, errb)
	}
	for _, args := range [][]string{
		{"admin", "webhooks", "delete", id, "--topic", "orders"},
		{"call", "admin_webhook_suspend", "topic=orders", "id=" + id},
	} {
		if code, _, errb := mcpush(alice, args...); code != 1 || !strings.Contains(errb, "not an admin") && !strings.Contains(errb, "unknown tool") {
			t.Errorf("alice: %q: exit %d: %s", args, code, errb)
		}
	}
	if after := view(); after.State != delivery.StateActive || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("alice's refused calls changed the subscription: %+v", after)
	}

	// Delete.
	if code, out, errb := mcpush(ops, "admin", "webhooks", "delete", id, "--topic", "orders"); code != 0 || !strings.Contains(out, `"deleted": true`) {
		t.Fatalf("delete: exit %d: %s %s", code, out, errb)
	}
	if res := list(); len(res.Subscriptions) != 0 {
		t.Errorf("after delete: %+v", res)
	}
	if strings.Contains(printed.String(), "whsec_") || strings.Contains(printed.String(), secret[6:]) {
		t.Errorf("the CLI printed a secret:\n%s", printed.String())
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

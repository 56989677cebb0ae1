package webhook

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
)

// nodeRecord is one line of test/node/webhooks/receiver.mjs.
type nodeRecord struct {
	ID             string `json:"id"`
	SubscriptionID string `json:"subscriptionId"`
	ContentType    string `json:"contentType"`
	Verified       []bool `json:"verified"`
	Accepted       bool   `json:"accepted"`
	Type           string `json:"type"`
	EventID        string `json:"eventId"`
}

// nodeReceiver runs receiver.mjs (the npm standardwebhooks verifier) with
// secrets and mode ("any" or "all"); it returns the receiver's URL and a
// channel of its records. Under CI=true a missing Node or package fails.
func nodeReceiver(t *testing.T, mode string, secrets ...Secret) (string, <-chan nodeRecord) {
	t.Helper()
	var revealed []string
	for _, s := range secrets {
		revealed = append(revealed, s.Reveal())
	}
	port, lines := testenv.WebhookReceiver(t, "WEBHOOK_SECRETS="+strings.Join(revealed, ","), "WEBHOOK_MODE="+mode)
	records := make(chan nodeRecord, 100)
	go func() {
		defer close(records)
		for line := range lines {
			var r nodeRecord
			if json.Unmarshal(line, &r) == nil {
				records <- r
			}
		}
	}()
	return "http://127.0.0.1:" + strconv.Itoa(port) + "/hooks/1", records
}

func next(t *testing.T, records <-chan nodeRecord) nodeRecord {
	t.Helper()
	select {
	case r, ok := <-records:
		if !ok {
			t.Fatal("receiver.mjs exited")
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no record from receiver.mjs in 10 s")
	}
	return nodeRecord{}
}

// TestThirdPartyVerifier: deliveries and the verification handshake are
// verified by the npm standardwebhooks package, a verifier that is not
// ours: an event, a gap and a terminated envelope signed with one secret;
// a rotation's dual-signed message verifies under each of the two secrets
// (mode "all"); and a message signed with an unrelated secret is refused
// (401, http_4xx), so the check is not vacuous.
func TestThirdPartyVerifier(t *testing.T) {
	oldS, newS := newSecret(t, 32), newSecret(t, 64)
	ctx := context.Background()

	t.Run("one secret", func(t *testing.T) {
		url, records := nodeReceiver(t, "any", newS)
		s := NewSender(Policy{Allow: []Origin{mustOrigin(t, url)}})
		if o := s.Verify(ctx, url, "sub_a", []Secret{newS}); !o.OK() {
			t.Fatalf("Verify: %+v", o)
		}
		if r := next(t, records); !r.Accepted || r.Type != "verification" || !strings.HasPrefix(r.ID, "msg_verification_") || r.SubscriptionID != "sub_a" {
			t.Errorf("verification: %+v", r)
		}
		ev, _ := EventBody("evt_u1", "order.created", time.Now(), json.RawMessage(`{"text":"naïve ☃","n":1.5e300}`), "c1")
		gap, _ := GapBody("c2")
		term, _ := TerminatedBody(-32001, "ended", nil)
		for _, m := range []Message{{ID: "evt_u1", Body: ev}, {ID: ControlID(ControlGap), Body: gap}, {ID: ControlID(ControlTerminated), Body: term}} {
			m.SubscriptionID, m.URL, m.Secrets = "sub_a", url, []Secret{newS}
			if o := s.Send(ctx, m); !o.OK() {
				t.Errorf("%s: %+v", m.ID, o)
			}
			if r := next(t, records); !r.Accepted || r.ID != m.ID || r.ContentType != "application/json" {
				t.Errorf("%s: %+v", m.ID, r)
			}
		}
		o := s.Send(ctx, Message{ID: "evt_x", SubscriptionID: "sub_a", URL: url, Body: ev, Secrets: []Secret{oldS}})
		if o.Status != 401 || o.Category != CategoryHTTP4xx {
			t.Errorf("unrelated secret: %+v", o)
		}
		if r := next(t, records); r.Accepted || r.Verified[0] {
			t.Errorf("unrelated secret: %+v", r)
		}
	})

	t.Run("rotation", func(t *testing.T) {
		url, records := nodeReceiver(t, "all", oldS, newS)
		s := NewSender(Policy{Allow: []Origin{mustOrigin(t, url)}})
		ev, _ := EventBody("evt_r", "order.created", time.Now(), json.RawMessage(`{}`), "")
		if o := s.Send(ctx, Message{ID: "evt_r", SubscriptionID: "sub_b", URL: url, Body: ev, Secrets: []Secret{newS, oldS}}); !o.OK() {
			t.Errorf("dual-signed: %+v", o)
		}
		if r := next(t, records); !r.Accepted || len(r.Verified) != 2 || !r.Verified[0] || !r.Verified[1] {
			t.Errorf("dual-signed: %+v", r)
		}
		// Signed with the new secret only: the old one does not verify it.
		if o := s.Send(ctx, Message{ID: "evt_n", SubscriptionID: "sub_b", URL: url, Body: ev, Secrets: []Secret{newS}}); o.Status != 401 {
			t.Errorf("new only, both required: %+v", o)
		}
		if r := next(t, records); r.Verified[0] || !r.Verified[1] {
			t.Errorf("new only: %+v", r)
		}
	})
}

func mustOrigin(t *testing.T, raw string) Origin {
	t.Helper()
	o, err := ParseAllow(strings.TrimSuffix(raw, "/hooks/1"))
	if err != nil || len(o) != 1 {
		t.Fatalf("ParseAllow(%q): %v", raw, err)
	}
	return o[0]
}

// TestReceiverThirdPartySigned: webhook.Receiver accepts messages signed
// by the npm standardwebhooks package (test/node/webhooks/sign.mjs), an
// event and a verification envelope (whose challenge it echoes), and
// refuses one whose body was changed after signing.
func TestReceiverThirdPartySigned(t *testing.T) {
	node := testenv.Node22(t)
	dir := testenv.NodeDir(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks", "package.json")); err != nil {
		testenv.RequireComponent(t, "standardwebhooks (npm, test/node)", err)
	}
	rig := newReceiverRig(t, nil)
	now := time.Now().Unix()
	ev, _ := EventBody("evt_n1", "order.created", time.Now(), json.RawMessage(`{"text":"naïve ☃"}`), "c1")
	verification := `{"type":"verification","challenge":"abc123"}`
	type msg struct {
		Secret    string `json:"secret"`
		ID        string `json:"id"`
		Timestamp int64  `json:"timestamp"`
		Body      string `json:"body"`
	}
	in, _ := json.Marshal([]msg{
		{rig.sec.Reveal(), "evt_n1", now, string(ev)},
		{rig.sec.Reveal(), "msg_verification_n2", now, verification},
		{rig.sec.Reveal(), "evt_n3", now, string(ev)},
	})
	cmd := exec.Command(node, filepath.Join(testenv.RepoRoot(t), "test", "node", "webhooks", "sign.mjs"))
	cmd.Env = append(os.Environ(), testenv.NodeDirEnv+"="+dir)
	cmd.Stdin = strings.NewReader(string(in))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sign.mjs: %v", err)
	}
	var headers []map[string]string
	if err := json.Unmarshal(out, &headers); err != nil || len(headers) != 3 {
		t.Fatalf("sign.mjs output %q: %v", out, err)
	}
	bodies := []string{string(ev), verification, strings.Replace(string(ev), "naïve", "naive", 1)}
	want := []int{http.StatusNoContent, http.StatusOK, http.StatusUnauthorized}
	for i, h := range headers {
		req, _ := http.NewRequest(http.MethodPost, rig.srv.URL, strings.NewReader(bodies[i]))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		req.Header.Set(HeaderSubscriptionID, "sub_known")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want[i] {
			t.Errorf("message %d: %d %s, want %d", i, resp.StatusCode, b, want[i])
		}
		if i == 1 && strings.TrimSpace(string(b)) != `{"challenge":"abc123"}` {
			t.Errorf("verification answer %s", b)
		}
	}
	if len(rig.handled) != 2 {
		t.Errorf("handled %d", len(rig.handled))
	}
}

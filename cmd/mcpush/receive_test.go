package main

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// startReceive runs `mcpush events receive` with args on a free loopback
// port until the returned stop is called; stop returns the exit status.
func startReceive(t *testing.T, e *env, args ...string) (string, func() int) {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() { code <- run(ctx, append([]string{"events", "receive", "--listen", addr}, args...), e) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(e.stderr.(interface{ String() string }).String(), "receiving webhooks at") {
		if time.Now().After(deadline) {
			t.Fatalf("events receive did not start: %s", e.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "http://" + addr + "/hooks", func() int { cancel(); return <-code }
}

// TestEventsReceive: `mcpush events receive` answers the verification
// handshake, prints a verified event as one line (or one JSON line per
// delivery with --json), refuses a delivery signed with another secret
// (401, not printed; stderr says the signature did not verify), accepts either secret of a rotation, and exits 130
// when interrupted.
func TestEventsReceive(t *testing.T) {
	const s1 = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	const s2 = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	sec1, _ := webhook.ParseSecret(s1)
	sec2, _ := webhook.ParseSecret(s2)
	other, _ := webhook.ParseSecret("whsec_" + strings.Repeat("B", 32))
	ctx := context.Background()
	ev, _ := webhook.EventBody("evt_1", "order.created", time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC), json.RawMessage(`{"id": 1, "note": "a\u001b[31mred"}`), "c1")
	gap, _ := webhook.GapBody("c2")

	for _, asJSON := range []bool{false, true} {
		e, out, errb := testEnv("")
		args := []string{"--secret", s1, "--secret", s2}
		if asJSON {
			args = append(args, "--json")
		}
		hook, stop := startReceive(t, e, args...)
		u, _ := url.Parse(hook)
		allow, err := webhook.ParseAllow("http://" + u.Host)
		if err != nil {
			t.Fatal(err)
		}
		sender := webhook.NewSender(webhook.Policy{Allow: allow})
		if o := sender.Verify(ctx, hook, "sub_1", []webhook.Secret{sec1}); !o.OK() {
			t.Errorf("Verify: %+v", o)
		}
		for _, m := range []webhook.Message{
			{ID: "evt_1", Body: ev, Secrets: []webhook.Secret{sec2}},
			{ID: webhook.ControlID(webhook.ControlGap), Body: gap, Secrets: []webhook.Secret{sec1}},
		} {
			m.SubscriptionID, m.URL = "sub_1", hook
			if o := sender.Send(ctx, m); !o.OK() {
				t.Errorf("%s: %+v", m.ID, o)
			}
		}
		if o := sender.Send(ctx, webhook.Message{ID: "evt_2", SubscriptionID: "sub_1", URL: hook, Body: ev, Secrets: []webhook.Secret{other}}); o.Status != 401 {
			t.Errorf("another secret: %+v", o)
		}
		if code := stop(); code != 130 {
			t.Errorf("interrupted: exit %d: %s", code, errb)
		}
		if !strings.Contains(errb.String(), "MCPUSH_WEBHOOK_ALLOW=http://"+u.Host+" where the server AND sns-ingest run") || !strings.Contains(errb.String(), "MCPUSH_AUTH=oauth or iam") {
			t.Errorf("stderr does not say what to allow where, and that webhooks need auth: %s", errb)
		}
		if !strings.Contains(errb.String(), "answered 401 to a delivery of subscription sub_1: signature did not verify (wrong --secret?)") {
			t.Errorf("stderr does not report the refused delivery: %s", errb)
		}
		got := out.String()
		if strings.Contains(got, "\x1b") || strings.Contains(got, s1) || strings.Contains(errb.String(), s1) {
			t.Errorf("output has an escape or the secret: %q %q", got, errb)
		}
		if !asJSON {
			want := "sub_1\t2026-11-27T03:00:00.000Z\torder.created\tevt_1\t{\"id\":1,\"note\":\"a\\u001b[31mred\"}\tc1\n"
			if got != want {
				t.Errorf("stdout:\n%q\nwant\n%q", got, want)
			}
			if !strings.Contains(errb.String(), "answered the verification of subscription sub_1") || !strings.Contains(errb.String(), "resume from cursor c2") {
				t.Errorf("stderr: %s", errb)
			}
			continue
		}
		lines := strings.Split(strings.TrimSpace(got), "\n")
		if len(lines) != 3 {
			t.Fatalf("%d JSON lines: %s", len(lines), got)
		}
		var types []string
		for _, l := range lines {
			var rec struct {
				SubscriptionID, WebhookID string
				Body                      map[string]any
			}
			if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.SubscriptionID != "sub_1" || rec.WebhookID == "" {
				t.Errorf("line %s: %v", l, err)
			}
			typ, _ := rec.Body["type"].(string)
			if id, ok := rec.Body["eventId"].(string); ok {
				typ = "event " + id
			}
			types = append(types, typ)
		}
		if strings.Join(types, ",") != "verification,event evt_1,gap" {
			t.Errorf("deliveries: %v", types)
		}
	}
}

// TestEventsReceiveUsage: no --listen or a bad secret is a usage error
// that does not echo the secret.
func TestEventsReceiveUsage(t *testing.T) {
	for _, args := range [][]string{
		{"events", "receive", "--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		{"events", "receive", "--listen", "127.0.0.1:0", "--secret", "whsec_c2VjcmV0LXZhbHVl"},
	} {
		e, _, errb := testEnv("")
		if code := run(context.Background(), args, e); code != 2 {
			t.Errorf("%v: exit %d: %s", args, code, errb)
		}
		if strings.Contains(errb.String(), "c2VjcmV0LXZhbHVl") {
			t.Errorf("the secret is echoed: %s", errb)
		}
	}
}

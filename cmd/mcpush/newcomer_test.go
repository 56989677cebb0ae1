package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// newEventsServer serves a server with the event type order.created
// (topic orders, argument region) on a SQLite store; with allow (a
// receiver's origin) it serves webhooks, with principalHeader as the
// authenticator.
func newEventsServer(t *testing.T, allow string) (string, *sqlitestore.Store) {
	t.Helper()
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := &mcp.ServerOptions{DynamicRegistries: true, Events: true, EventsPollInterval: 10 * time.Millisecond}
	sopts := &mcp.StreamableOptions{LocalhostOnly: true}
	if allow != "" {
		origins, err := webhook.ParseAllow(allow)
		if err != nil {
			t.Fatal(err)
		}
		opts.Webhooks = &mcp.WebhookOptions{Sender: webhook.NewSender(webhook.Policy{Allow: origins})}
		sopts.Authenticator = principalHeader{}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "cli-test", Version: "1"}, store, opts)
	h := mcp.NewStreamableHandler(srv, sopts)
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
	item := json.RawMessage(`{"name":"order.created","topic":"orders","inputSchema":{"type":"object","properties":{"region":{"type":"string"}}}}`)
	if _, _, err := store.ApplyRegistry(context.Background(), notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order.created": item}, "m1"); err != nil {
		t.Fatal(err)
	}
	return ts.URL, store
}

// TestNewcomerWebhook: the webhook path as docs/cli.md tells it works the
// first time. `events receive` without a secret generates one and prints
// it; `events subscribe` with it passes the verification (which runs
// inside the subscribe call, signed with that secret); with another
// secret the subscribe fails with CallbackEndpointError and a hint about
// the secret, and the receiver says "signature did not verify (wrong
// --secret?)" for the verification it refused. `events subscribe`
// without any secret is a usage error (exit 2) with a hint to start the
// receiver first, and makes no request.
func TestNewcomerWebhook(t *testing.T) {
	ctx := context.Background()
	re, _, rerr := testEnv("")
	hook, stop := startReceive(t, re)
	u, _ := url.Parse(hook)
	m := regexp.MustCompile(`secret: (whsec_[A-Za-z0-9+/=]+) \(generated`).FindStringSubmatch(rerr.String())
	if m == nil {
		t.Fatalf("events receive without a secret printed none: %s", rerr)
	}
	secret := m[1]
	if _, err := webhook.ParseSecret(secret); err != nil {
		t.Fatalf("the generated secret: %v", err)
	}
	srvURL, store := newEventsServer(t, "http://"+u.Host)

	as := []string{"--header", "X-Principal: newcomer"}
	e, out, errb := testEnv(srvURL)
	if code := run(ctx, append(as, "events", "subscribe", "order.created", "region=eu", "--callback", hook, "--secret", secret), e); code != 0 {
		t.Fatalf("subscribe with the receiver's secret: exit %d: %s", code, errb)
	}
	var res mcp.SubscribeEventsResult
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil || !strings.HasPrefix(res.ID, "sub_") {
		t.Fatalf("subscribe: %q: %v", out.String(), err)
	}
	if !strings.Contains(rerr.String(), "answered the verification of subscription "+res.ID) {
		t.Errorf("the receiver did not answer the verification: %s", rerr)
	}

	// Another secret: a new subscription (other arguments), verified
	// with it, refused by the receiver.
	e, _, errb = testEnv(srvURL)
	if code := run(ctx, append(as, "events", "subscribe", "order.created", "region=us", "--callback", hook, "--secret", mcp.NewWebhookSecret()), e); code != 1 {
		t.Errorf("subscribe with another secret: exit %d, want 1: %s", code, errb)
	}
	if got := errb.String(); !strings.Contains(got, "CallbackEndpointError") || !strings.Contains(got, "hint: the receiver at "+hook+" refused the server's signed verification POST") || !strings.Contains(got, "pass the receiver's secret with --secret") {
		t.Errorf("subscribe with another secret: stderr %q", got)
	}
	if !strings.Contains(rerr.String(), "answered 401 to the verification of subscription sub_") || !strings.Contains(rerr.String(), "signature did not verify (wrong --secret?)") {
		t.Errorf("the receiver did not report the refused verification: %s", rerr)
	}

	// No secret at all: a usage error before any request.
	before, _, err := store.TopicWebhooks(ctx, "orders", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	e, out, errb = testEnv(srvURL)
	e.httpTransport = roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("no request expected") })
	if code := run(ctx, append(as, "events", "subscribe", "order.created", "--callback", hook), e); code != 2 {
		t.Errorf("subscribe without a secret: exit %d, want 2: %s", code, errb)
	}
	if got := errb.String(); !strings.Contains(got, "needs --secret") || !strings.Contains(got, "hint: ") || !strings.Contains(got, "mcpush events receive --listen ADDR' (it prints one)") || regexp.MustCompile(`whsec_[A-Za-z0-9+/]{20}`).MatchString(out.String()+got) {
		t.Errorf("subscribe without a secret: stdout %q, stderr %q", out, got)
	}
	after, _, err := store.TopicWebhooks(ctx, "orders", "", 100)
	if err != nil || len(after) != len(before) || len(after) != 1 {
		t.Errorf("subscriptions: %d before, %d after (%v); want the one", len(before), len(after), err)
	}
	if code := stop(); code != 130 {
		t.Errorf("events receive: exit %d", code)
	}
}

// TestEventsSecret: `events secret` prints a fresh secret that
// webhook.ParseSecret takes, another each time, on stdout only.
func TestEventsSecret(t *testing.T) {
	seen := map[string]bool{}
	for range 3 {
		e, out, errb := testEnv("")
		if code := run(context.Background(), []string{"events", "secret"}, e); code != 0 || errb.String() != "" {
			t.Fatalf("events secret: exit %d: %s", code, errb)
		}
		s := strings.TrimSuffix(out.String(), "\n")
		if _, err := webhook.ParseSecret(s); err != nil || seen[s] || !strings.HasPrefix(s, "whsec_") {
			t.Errorf("events secret: %q: %v (seen: %v)", s, err, seen[s])
		}
		seen[s] = true
	}
}

// TestWebhooksWithoutAuth: on a server without webhooks (no
// authentication: events/subscribe is -32601 there today), `events
// subscribe` and `events unsubscribe` exit 1 with a hint that webhooks
// need MCPUSH_AUTH=oauth or iam.
func TestWebhooksWithoutAuth(t *testing.T) {
	srvURL, _ := newEventsServer(t, "")
	for _, args := range [][]string{
		{"events", "subscribe", "order.created", "--callback", "https://hooks.example.com/h", "--secret", mcp.NewWebhookSecret()},
		{"events", "unsubscribe", "order.created", "--callback", "https://hooks.example.com/h"},
	} {
		e, _, errb := testEnv(srvURL)
		if code := run(context.Background(), args, e); code != 1 || !strings.Contains(errb.String(), "hint: webhooks need a server with authentication (MCPUSH_AUTH=oauth or iam") {
			t.Errorf("%s: exit %d, stderr %q", args[1], code, errb)
		}
	}
}

// TestWebhookHints: the refusals of events/subscribe get their hint in
// either dialect of the Events error codes (matched on the code or the
// message's leading name), and other errors none.
func TestWebhookHints(t *testing.T) {
	data := func(reason string) json.RawMessage { return json.RawMessage(`{"reason":"` + reason + `"}`) }
	const cb = "http://127.0.0.1:9000/hook"
	for _, tc := range []struct {
		err  error
		want string // "" for no hint
	}{
		{&mcp.Error{Code: mcp.CodeMethodNotFound, Message: "method not found: events/subscribe"}, "MCPUSH_AUTH=oauth or iam"},
		{&mcp.Error{Code: mcp.CodeForbidden, Message: "Forbidden: events/subscribe needs an authenticated principal (this server runs without authentication: MCPUSH_AUTH=oauth or iam)"}, "mcpush login"},
		{&mcp.Error{Code: -32012, Message: "Forbidden: events/subscribe needs an authenticated principal"}, "mcpush login"},
		{&mcp.Error{Code: mcp.CodeUnsupported, Message: "Unsupported: webhooks need authentication: MCPUSH_AUTH=oauth or iam"}, "MCPUSH_AUTH=oauth or iam"},
		{&mcp.Error{Code: -32014, Message: "Unsupported: events/subscribe is for webhook delivery only"}, "'mcpush events list' shows the delivery modes"},
		{&mcp.Error{Code: mcp.CodeCallbackEndpointError, Message: "CallbackEndpointError: the callback did not pass verification (http_4xx)", Data: data("http_4xx")}, "pass the receiver's secret with --secret"},
		{&mcp.Error{Code: -32015, Message: "CallbackEndpointError: the callback did not pass verification (connection_refused)", Data: data("connection_refused")}, "MCPUSH_WEBHOOK_ALLOW where the server runs"},
		{&mcp.Error{Code: mcp.CodeCallbackEndpointError, Message: "CallbackEndpointError", Data: data("challenge_failed")}, "echoing the challenge"},
		{&mcp.Error{Code: mcp.CodeCallbackEndpointError, Message: "CallbackEndpointError", Data: data("timeout")}, "in time"},
		{&mcp.Error{Code: mcp.CodeInvalidParams, Message: "invalid params: delivery.url: not https"}, ""},
		{errors.New("connection reset"), ""},
	} {
		got := hint(webhookHint(fmt.Errorf("events/subscribe: %w", tc.err), cb))
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%v: hint %q, want one with %q", tc.err, got, tc.want)
		}
	}
}

// TestPerCommandHelp: `mcpush help COMMAND` and `mcpush COMMAND --help`
// print that command's help (its usage and one example), the same both
// ways, far shorter than the full help; `mcpush help` and `mcpush --help`
// the full help, which lists every command; an unknown command is a usage
// error.
func TestPerCommandHelp(t *testing.T) {
	ctx := context.Background()
	help := func(args ...string) (int, string, string) {
		e, out, errb := testEnv("")
		code := run(ctx, args, e)
		return code, out.String(), errb.String()
	}
	_, full, _ := help("help")
	if _, g, _ := help("--help"); g != full {
		t.Errorf("--help differs from help")
	}
	fullLines := strings.Count(full, "\n")
	for _, c := range commands {
		if !strings.Contains(full, strings.TrimSpace(c.usage)) {
			t.Errorf("the full help lacks %s", c.name)
		}
		words := strings.Fields(c.name)
		code, got, errb := help(append([]string{"help"}, words...)...)
		if code != 0 || errb != "" {
			t.Errorf("help %s: exit %d, stderr %q", c.name, code, errb)
		}
		if !strings.Contains(got, strings.TrimSpace(c.usage)) || !strings.Contains(got, "example:\n  "+c.example+"\n") || !strings.Contains(c.example, "mcpush ") || !strings.Contains(c.example, " "+c.name) {
			t.Errorf("help %s:\n%s", c.name, got)
		}
		if n := strings.Count(got, "\n"); n > 20 || n*3 > fullLines {
			t.Errorf("help %s: %d lines (the full help: %d)", c.name, n, fullLines)
		}
		if c.name == "help" {
			continue
		}
		code, again, _ := help(append(words, "--help")...)
		if code != 0 || again != got {
			t.Errorf("%s --help: exit %d:\n%s\nwant\n%s", c.name, code, again, got)
		}
	}
	if code, got, _ := help("events", "poll", "-h", "order.created"); code != 0 || !strings.HasPrefix(got, "usage:\n  events poll NAME") {
		t.Errorf("events poll -h: exit %d: %q", code, got)
	}
	if code, got, _ := help("help", "events"); code != 0 || !strings.Contains(got, "events receive --listen") || !strings.Contains(got, "events secret") || strings.Contains(got, "login [") {
		t.Errorf("help events: exit %d:\n%s", code, got)
	}
	if code, _, errb := help("help", "frob"); code != 2 || !strings.Contains(errb, `no command "frob"`) {
		t.Errorf("help frob: exit %d, %q", code, errb)
	}
}

// TestEventsMaxAge: --max-age and --since on events poll and stream send
// maxAgeMs: after a cursor, an event older than that is skipped (and the
// result says truncated), a newer one returned; with --follow only the
// first poll carries it; without --cursor, with both, or with a bad value
// they are a usage error (exit 2).
func TestEventsMaxAge(t *testing.T) {
	ctx := context.Background()
	srvURL, store := newEventsServer(t, "")
	first, err := pollFromNow(ctx, srvURL)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, at := range []time.Time{now.Add(-2 * time.Hour), now.Add(-time.Minute)} {
		if _, _, err := store.AppendTopicEvent(ctx, "orders", fmt.Sprintf("age-%d", i), at, json.RawMessage(fmt.Sprintf(`{"region":"eu","n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	old, recent := mcp.EventID("order.created", "age-0"), mcp.EventID("order.created", "age-1")
	for _, flags := range [][]string{nil, {"--max-age", "1h"}, {"--since", now.Add(-30 * time.Minute).UTC().Format(time.RFC3339)}} {
		e, out, errb := testEnv(srvURL)
		if code := run(ctx, append([]string{"events", "poll", "order.created", "--cursor", *first.Cursor}, flags...), e); code != 0 {
			t.Fatalf("poll %v: exit %d: %s", flags, code, errb)
		}
		var res mcp.PollEventsResult
		if err := json.Unmarshal([]byte(out.String()), &res); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ev := range res.Events {
			ids = append(ids, ev.EventID)
		}
		want, trunc := []string{old, recent}, false
		if flags != nil {
			want, trunc = []string{recent}, true
		}
		if strings.Join(ids, ",") != strings.Join(want, ",") || res.Truncated != trunc {
			t.Errorf("poll %v: events %v truncated %v; want %v %v", flags, ids, res.Truncated, want, trunc)
		}
	}
	// --follow: the floor bounds where the replay starts, not what
	// follows (an event appended later with an old timestamp is printed).
	fctx, fcancel := context.WithTimeout(ctx, 2500*time.Millisecond)
	e, out, errb := testEnv(srvURL)
	done := make(chan int)
	go func() {
		done <- run(fctx, []string{"events", "poll", "order.created", "--follow", "--cursor", *first.Cursor, "--max-age", "1h"}, e)
	}()
	time.Sleep(500 * time.Millisecond)
	if _, _, err := store.AppendTopicEvent(ctx, "orders", "age-late", now.Add(-3*time.Hour), json.RawMessage(`{"region":"eu","n":9}`)); err != nil {
		t.Fatal(err)
	}
	code := <-done
	fcancel()
	late := mcp.EventID("order.created", "age-late")
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); code != 130 || len(lines) != 2 || !strings.Contains(lines[0], recent) || !strings.Contains(lines[1], late) {
		t.Errorf("poll --follow --max-age 1h: exit %d, stdout %q, stderr %q", code, out, errb)
	}

	// The stream from the same cursor: both old events are skipped now.
	sctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	e, out, errb = testEnv(srvURL)
	code = run(sctx, []string{"events", "stream", "order.created", "--cursor", *first.Cursor, "--max-age", "1h"}, e)
	cancel()
	if code != 130 || !strings.Contains(out.String(), recent) || strings.Contains(out.String(), late) || strings.Contains(out.String(), old) || !strings.Contains(errb.String(), "truncated") {
		t.Errorf("stream --max-age 1h: exit %d, stdout %q, stderr %q", code, out, errb)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"events", "poll", "order.created", "--max-age", "1h"}, "--max-age needs --cursor"},
		{[]string{"events", "stream", "order.created", "--since", "2026-12-01T00:00:00Z"}, "--since needs --cursor"},
		{[]string{"events", "poll", "order.created", "--cursor", *first.Cursor, "--max-age", "1h", "--since", "2026-12-01T00:00:00Z"}, "exclude each other"},
		{[]string{"events", "poll", "order.created", "--cursor", *first.Cursor, "--max-age", "-5m"}, "want a positive duration"},
		{[]string{"events", "poll", "order.created", "--cursor", *first.Cursor, "--max-age", "ten minutes"}, "want a positive duration"},
		{[]string{"events", "stream", "order.created", "--cursor", *first.Cursor, "--since", "yesterday"}, "want an RFC 3339 time"},
		{[]string{"events", "poll", "order.created", "--cursor", *first.Cursor, "--since", now.Add(time.Hour).UTC().Format(time.RFC3339)}, "is in the future"},
		{[]string{"events", "list", "--max-age", "1h"}, "are for events poll, stream and subscribe"},
	} {
		e, _, errb := testEnv(srvURL)
		if code := run(ctx, tc.args, e); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errb, tc.want)
		}
	}
}

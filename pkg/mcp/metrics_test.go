package mcp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// metricSamples reads the process's metrics (metrics.Handler) by sample:
// `name{labels}` to value.
func metricSamples(t *testing.T) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	out := map[string]float64{}
	for line := range strings.Lines(rec.Body.String()) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestMetricsWebhookVerifications: each verification of a webhook
// endpoint counts once, by outcome (a receiver that answers the
// challenge: ok; one that echoes another: challenge_failed), and a
// refused request counts once by its status (a foreign Host: 403).
func TestMetricsWebhookVerifications(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.New(filepath.Join(t.TempDir(), "m.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	secret := newWhsec(32)
	recv := &webhook.Receiver{
		Secrets: func(string) []webhook.Secret { s, _ := webhook.ParseSecret(secret); return []webhook.Secret{s} },
		Handle:  func(webhook.Delivery) error { return nil },
	}
	good := httptest.NewServer(recv)
	defer good.Close()
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"challenge":"not-the-one"}`))
	}))
	defer liar.Close()
	allow, err := webhook.ParseAllow(good.URL + "," + liar.URL)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "metrics", Version: "1"}, st, &mcp.ServerOptions{
		Logger: slog.New(slog.DiscardHandler), DynamicRegistries: true, Events: true, RegistryRefresh: 20 * time.Millisecond,
		StateKeys: [][]byte{[]byte("metrics-webhook-key-0123456789abcdef01")},
		Webhooks:  &mcp.WebhookOptions{Sender: webhook.NewSender(webhook.Policy{Allow: allow}), MaxPerPrincipal: 3},
	})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: headerPrincipal{}})
	ts := httptest.NewServer(h)
	defer func() { ts.Close(); h.Close() }()
	item, _ := json.Marshal(notify.EventItem{Name: "order.created", Topic: "orders"}.WithDefaults())
	if _, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, map[string]json.RawMessage{"order.created": item}, "m-1"); err != nil {
		t.Fatal(err)
	}

	before := metricSamples(t)
	for _, url := range []string{good.URL, liar.URL} {
		r := whCall(t, ts.URL, "alice", "events/subscribe", `"name":"order.created","delivery":{"mode":"webhook","url":"`+url+`","secret":"`+secret+`"}`)
		if (r.Error == nil) != (url == good.URL) {
			t.Fatalf("subscribe %s: %+v", url, r)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Host = "evil.example"
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a foreign Host: %d", resp.StatusCode)
	}
	after := metricSamples(t)
	for k, want := range map[string]float64{
		`mcpush_webhook_verifications_total{outcome="ok"}`:               1,
		`mcpush_webhook_verifications_total{outcome="challenge_failed"}`: 1,
		`mcpush_refusals_total{status="403"}`:                            1,
	} {
		if got := after[k] - before[k]; got != want {
			t.Errorf("%s grew by %v, want %v", k, got, want)
		}
	}
}

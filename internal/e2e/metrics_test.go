package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metricSample is a sample line of the Prometheus text format.
var metricSample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})?) (\S+)$`)

// scrapeMetrics reads base's /metrics and returns its samples by name
// and labels; a line that is neither a comment nor a sample fails the
// test.
func scrapeMetrics(t *testing.T, base string) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") {
			continue
		}
		m := metricSample.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("/metrics: not a line of the text format: %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", line, err)
		}
		out[m[1]] = v
	}
	return out
}

// TestMetricsScrape runs a real local server (MCPUSH_METRICS unset:
// prometheus, /metrics on its listener) and a real sns-ingest run on one
// store, drives a scripted workload, and checks the server's counts
// exactly: one GET stream held and then closed, one 403 (a foreign
// Origin) and one 404 (an unknown session), no other refusal, no store
// throttle; the store requests it made are counted by access.
func TestMetricsScrape(t *testing.T) {
	e := startPushEnv(t, SQLiteStore(), 1, 0)
	base := "http://" + e.cluster.Addr(0)
	if m := scrapeMetrics(t, base); m[`mcpush_held_streams{kind="get"}`] != 0 {
		t.Fatalf("held streams before any: %v", m)
	}

	c := e.connect(t, "metrics")
	c.subscribe("orders")
	s := c.openStream()
	// The stream counts itself held once its loop runs, just after its
	// first bytes reached the client.
	if m := waitMetric(t, base, `mcpush_held_streams{kind="get"}`, 1); m[`mcpush_held_streams{kind="get"}`] != 1 || m[`mcpush_held_streams_opened_total{kind="get"}`] != 1 {
		t.Errorf("with a GET stream open: held %v, opened %v; want 1, 1",
			m[`mcpush_held_streams{kind="get"}`], m[`mcpush_held_streams_opened_total{kind="get"}`])
	}

	// sns-ingest delivers an event, which the stream receives.
	e.ingest.mustDeliver(t, pushSNSRecord{MessageID: "metrics-1", Message: pushEventMessage("orders", map[string]int{"n": 1})})
	if !s.waitUntil(pushDeliveryTimeout, func(msgs []pushMessage) bool { return pushCountUpdated(msgs, "orders") >= 1 }) {
		t.Fatalf("the event did not arrive: %s", s.report())
	}

	// Two refusals: a foreign Origin (403), an unknown session (404).
	for _, r := range []struct {
		header, value string
		want          int
	}{
		{"Origin", "http://evil.example", http.StatusForbidden},
		{"Mcp-Session-Id", "no-such-session", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", pushProtocolVersion)
		if r.header != "Mcp-Session-Id" {
			req.Header.Set("Mcp-Session-Id", c.session)
		}
		req.Header.Set(r.header, r.value)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != r.want {
			t.Fatalf("%s: %s: %d, want %d", r.header, r.value, resp.StatusCode, r.want)
		}
	}

	s.close()
	m := waitMetric(t, base, `mcpush_held_streams{kind="get"}`, 0)
	for k, want := range map[string]float64{
		`mcpush_held_streams{kind="get"}`:              0,
		`mcpush_held_streams_opened_total{kind="get"}`: 1,
		`mcpush_refusals_total{status="403"}`:          1,
		`mcpush_refusals_total{status="404"}`:          1,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	for k, v := range m {
		switch {
		case strings.HasPrefix(k, "mcpush_refusals_total") && k != `mcpush_refusals_total{status="403"}` && k != `mcpush_refusals_total{status="404"}`:
			t.Errorf("an unexpected refusal: %s = %v", k, v)
		case strings.HasPrefix(k, "mcpush_store_throttles_total") && v != 0:
			t.Errorf("store throttles: %s = %v", k, v)
		case strings.HasPrefix(k, "mcpush_events_ingested_total"):
			t.Errorf("the server ingested nothing (sns-ingest did): %s = %v", k, v)
		}
	}
	if m[`mcpush_store_requests_total{access="read"}`] < 1 || m[`mcpush_store_requests_total{access="write"}`] < 1 {
		t.Errorf("store requests: read %v, write %v", m[`mcpush_store_requests_total{access="read"}`], m[`mcpush_store_requests_total{access="write"}`])
	}
}

// waitMetric scrapes base until the sample key is want, at most 10 s, and
// returns the last scrape.
func waitMetric(t *testing.T, base, key string, want float64) map[string]float64 {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := scrapeMetrics(t, base); m[key] == want || time.Now().After(deadline) {
			return m
		}
	}
}

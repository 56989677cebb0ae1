package metrics

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/emfcheck"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/webhook"
	"go.opentelemetry.io/otel/metric"
)

// sum adds the values of the points named name whose dimensions include
// dims.
func sum(ps []emfcheck.Point, name string, dims map[string]string) (total float64, n int) {
outer:
	for _, p := range ps {
		if p.Name != name {
			continue
		}
		for k, v := range dims {
			if p.Dimensions[k] != v {
				continue outer
			}
		}
		for _, v := range p.Values {
			total += v
			n++
		}
	}
	return total, n
}

// TestFlushEMF: a Flush prints valid EMF lines of what was counted since
// the previous one (counters as differences, gauges when they change,
// histograms as values), with the Function dimension and the metric's
// own, in the namespace set up; a Flush with nothing new prints nothing.
func TestFlushEMF(t *testing.T) {
	var out bytes.Buffer
	now := time.UnixMilli(1_700_000_000_123)
	Setup(Options{Exporter: envconfig.MetricsEMF, Namespace: "test/ns", Function: "fn", Out: &out, Now: func() time.Time { return now }})
	t.Cleanup(func() { Setup(Options{}) })
	ctx := context.Background()
	if err := Flush(ctx); err != nil { // what earlier tests counted
		t.Fatal(err)
	}
	out.Reset()

	EventsIngested(ctx, Accepted, 3)
	EventsIngested(ctx, Rejected, 1)
	EventsIngested(ctx, Failed, 0) // nothing
	FanOut(ctx, 7)
	Delivery(ctx, ModeWebhook, "")
	Delivery(ctx, ModeWebhook, webhook.CategoryHTTP5xx)
	Delivery(ctx, ModeWebhook, "a-category-nobody-knows")
	DeliveryLatency(ctx, ModeWebhook, 30*time.Millisecond)
	DeliveryLatency(ctx, ModeWebhook, 30*time.Millisecond)
	closed := HeldStream(ctx, StreamListen)
	Refusal(ctx, 401)
	Refusal(ctx, 200) // not a refusal
	StoreRequest(ctx, Read, false)
	StoreRequest(ctx, Write, true)
	QueueState(ctx, QueueDelivery, 4, 2*time.Second)
	WebhookSubscriptions(ctx, 5, 1)
	WebhookVerification(ctx, webhook.CategoryChallengeFailed)
	if err := Flush(ctx); err != nil {
		t.Fatal(err)
	}
	docs, err := emfcheck.Lines(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "\n") != len(docs) {
		t.Errorf("%d lines, %d EMF documents:\n%s", strings.Count(out.String(), "\n"), len(docs), out.String())
	}
	ps := emfcheck.Points(docs)
	for _, p := range ps {
		if p.Namespace != "test/ns" || p.Dimensions["Function"] != "fn" {
			t.Errorf("%s: namespace %q, dimensions %v", p.Name, p.Namespace, p.Dimensions)
		}
	}
	if ts := docs[0]["_aws"].(map[string]any)["Timestamp"]; ts != float64(now.UnixMilli()) {
		t.Errorf("Timestamp %v, want %d", ts, now.UnixMilli())
	}
	for _, c := range []struct {
		name  string
		dims  map[string]string
		total float64
		n     int
		unit  string
	}{
		{"EventsIngested", map[string]string{"Outcome": "accepted"}, 3, 1, "Count"},
		{"EventsIngested", map[string]string{"Outcome": "rejected"}, 1, 1, "Count"},
		{"EventsIngested", map[string]string{"Outcome": "failed"}, 0, 0, ""},
		{"FanOutSessions", nil, 7, 1, "Count"}, // its bucket's mean: the one value
		{"Deliveries", map[string]string{"Mode": "webhook", "Outcome": "ok"}, 1, 1, "Count"},
		{"Deliveries", map[string]string{"Mode": "webhook", "Outcome": "http_5xx"}, 1, 1, "Count"},
		{"Deliveries", map[string]string{"Mode": "webhook", "Outcome": "other"}, 1, 1, "Count"},
		{"DeliveryLatency", map[string]string{"Mode": "webhook"}, 2 * 0.03, 2, "Seconds"},
		{"HeldStreams", map[string]string{"Kind": "listen"}, 1, 1, "Count"},
		{"HeldStreamsOpened", map[string]string{"Kind": "listen"}, 1, 1, "Count"},
		{"Refusals", map[string]string{"Status": "401"}, 1, 1, "Count"},
		{"Refusals", map[string]string{"Status": "200"}, 0, 0, ""},
		{"StoreRequests", map[string]string{"Access": "read"}, 1, 1, "Count"},
		{"StoreRequests", map[string]string{"Access": "write"}, 1, 1, "Count"},
		{"StoreThrottles", map[string]string{"Access": "write"}, 1, 1, "Count"},
		{"StoreThrottles", map[string]string{"Access": "read"}, 0, 0, ""},
		{"QueueDepth", map[string]string{"Queue": "delivery"}, 4, 1, "Count"},
		{"QueueAge", map[string]string{"Queue": "delivery"}, 2, 1, "Seconds"},
		{"WebhookSubscriptions", map[string]string{"Status": "active"}, 5, 1, "Count"},
		{"WebhookSubscriptions", map[string]string{"Status": "suspended"}, 1, 1, "Count"},
		{"WebhookVerifications", map[string]string{"Outcome": "challenge_failed"}, 1, 1, "Count"},
	} {
		total, n := sum(ps, c.name, c.dims)
		if math.Abs(total-c.total) > 1e-9 || n != c.n {
			t.Errorf("%s %v: %v in %d values, want %v in %d", c.name, c.dims, total, n, c.total, c.n)
		}
		for _, p := range ps {
			if p.Name == c.name && c.unit != "" && p.Unit != c.unit {
				t.Errorf("%s: unit %q, want %q", c.name, p.Unit, c.unit)
			}
		}
	}

	// Each point has the dimensions Set says, or its rollup.
	info := map[string]Info{}
	for _, i := range Set() {
		info[i.Name] = i
	}
	for _, p := range ps {
		var got []string
		for k := range p.Dimensions {
			got = append(got, k)
		}
		i := info[p.Name]
		if !sameSet(got, i.Dimensions) && !sameSet(got, i.Rollup) {
			t.Errorf("%s: dimensions %v, Set says %v (rollup %v)", p.Name, got, i.Dimensions, i.Rollup)
		}
	}
	if len(info) != 13 {
		t.Errorf("Set: %d metrics", len(info))
	}

	// Deliveries also roll up by Mode alone (the failure rate's total).
	var rolled []float64
	for _, p := range ps {
		if p.Name == "Deliveries" && len(p.Dimensions) == 2 && p.Dimensions["Mode"] == "webhook" {
			rolled = append(rolled, p.Values...)
		}
	}
	if len(rolled) != 3 || rolled[0]+rolled[1]+rolled[2] != 3 {
		t.Errorf("Deliveries by Function and Mode: %v, want 3 ones", rolled)
	}

	// Only what changed: the held stream closes, one more refusal.
	out.Reset()
	closed()
	Refusal(ctx, 401)
	if err := Flush(ctx); err != nil {
		t.Fatal(err)
	}
	docs, err = emfcheck.Lines(out.String())
	if err != nil {
		t.Fatal(err)
	}
	ps = emfcheck.Points(docs)
	var names []string
	for _, p := range ps {
		names = append(names, p.Name+"="+strings.Trim(strings.Join(strings.Fields(strings.Trim(strings.ReplaceAll(fmtValues(p.Values), ",", " "), "[]")), " "), " "))
	}
	if got, want := strings.Join(names, " "), "HeldStreams=0 Refusals=1"; got != want {
		t.Errorf("second flush: %s, want %s\n%s", got, want, out.String())
	}
	out.Reset()
	if err := Flush(ctx); err != nil || out.Len() != 0 {
		t.Errorf("a flush with nothing new: %v, printed %q", err, out.String())
	}
}

func fmtValues(vs []float64) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, formatFloat(v))
	}
	return strings.Join(parts, ",")
}

// TestFlushHistogramBounded: a histogram's values are split into lines
// of at most 100, and scaled down past 1,000 observations in one Flush;
// each value is the mean of its bucket's observations since the last
// Flush.
func TestFlushHistogramBounded(t *testing.T) {
	var out bytes.Buffer
	Setup(Options{Exporter: envconfig.MetricsEMF, Function: "fn", Out: &out})
	t.Cleanup(func() { Setup(Options{}) })
	ctx := context.Background()
	Flush(ctx)
	out.Reset()
	for range 250 {
		DeliveryLatency(ctx, ModeStream, time.Second)
	}
	Flush(ctx)
	docs, err := emfcheck.Lines(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if total, n := sum(emfcheck.Points(docs), "DeliveryLatency", map[string]string{"Mode": "stream"}); n != 250 || len(docs) != 3 || total != 250 {
		t.Errorf("250 observations: %d values (%v) in %d lines, want 250 in 3", n, total, len(docs))
	}
	// Two buckets: (0.5, 1] gets 0.6 and 1.0 (mean 0.8), (2.5, 5] gets 3.
	out.Reset()
	for _, d := range []time.Duration{600 * time.Millisecond, time.Second, 3 * time.Second} {
		DeliveryLatency(ctx, ModeStream, d)
	}
	Flush(ctx)
	if docs, err = emfcheck.Lines(out.String()); err != nil {
		t.Fatal(err)
	}
	if ps := emfcheck.Points(docs); len(ps) != 1 || len(ps[0].Values) != 3 ||
		math.Abs(ps[0].Values[0]-0.8) > 1e-9 || math.Abs(ps[0].Values[1]-0.8) > 1e-9 || math.Abs(ps[0].Values[2]-3) > 1e-9 {
		t.Errorf("values %+v, want 0.8, 0.8, 3", ps)
	}
	out.Reset()
	for range 5000 {
		DeliveryLatency(ctx, ModeStream, time.Second)
	}
	Flush(ctx)
	if docs, err = emfcheck.Lines(out.String()); err != nil {
		t.Fatal(err)
	}
	if _, n := sum(emfcheck.Points(docs), "DeliveryLatency", nil); n != 1000 || len(docs) != 10 {
		t.Errorf("5,000 observations: %d values in %d lines, want 1,000 in 10", n, len(docs))
	}
}

// TestFlushOff: without EMF, Flush prints nothing.
func TestFlushOff(t *testing.T) {
	var out bytes.Buffer
	Setup(Options{Exporter: envconfig.MetricsPrometheus, Out: &out})
	t.Cleanup(func() { Setup(Options{}) })
	Refusal(context.Background(), 403)
	if err := Flush(context.Background()); err != nil || out.Len() != 0 {
		t.Errorf("Flush: %v, printed %q", err, out.String())
	}
}

// sample is a line of the text format: a name, labels and a value.
var sample = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (\+Inf|-Inf|NaN|-?[0-9.eE+-]+)$`)

// scrape serves Handler once and returns its body, checking that it is
// the text format: every metric of the set with HELP and TYPE, each
// sample under its TYPE; and its samples by name and labels.
func scrape(t *testing.T) (string, map[string]float64) {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	body := rec.Body.String()
	typed := map[string]string{}
	samples := map[string]float64{}
	var current string
	for line := range strings.Lines(body) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "# HELP "):
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 {
				t.Fatalf("bad TYPE line %q", line)
			}
			current, typed[f[2]] = f[2], f[3]
		case sample.MatchString(line):
			name := line[:strings.IndexAny(line, "{ ")]
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
			if name != current && base != current {
				t.Errorf("sample %q outside its TYPE (%s)", line, current)
			}
			i := strings.LastIndexByte(line, ' ')
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				t.Errorf("sample %q: %v", line, err)
			}
			samples[line[:i]] = v
		default:
			t.Errorf("not a line of the text format: %q", line)
		}
	}
	if len(typed) != len(defs) {
		t.Errorf("%d metrics typed, want %d:\n%s", len(typed), len(defs), body)
	}
	if typed["mcpush_fanout_sessions"] != "histogram" || typed["mcpush_held_streams"] != "gauge" || typed["mcpush_refusals_total"] != "counter" {
		t.Errorf("types %v", typed)
	}
	return body, samples
}

// TestHandler: /metrics is the Prometheus text format, cumulative:
// histograms with cumulative buckets ending in +Inf, _sum and _count.
func TestHandler(t *testing.T) {
	ctx := context.Background()
	_, before := scrape(t)
	FanOut(ctx, 3)
	Refusal(ctx, 429)
	body, after := scrape(t)
	for s, want := range map[string]float64{
		`mcpush_refusals_total{status="429"}`:       1,
		`mcpush_fanout_sessions_bucket{le="2"}`:     0,
		`mcpush_fanout_sessions_bucket{le="5"}`:     1,
		`mcpush_fanout_sessions_bucket{le="50000"}`: 1,
		`mcpush_fanout_sessions_bucket{le="+Inf"}`:  1,
		`mcpush_fanout_sessions_sum`:                3,
		`mcpush_fanout_sessions_count`:              1,
	} {
		if _, ok := after[s]; !ok {
			t.Errorf("no sample %s in:\n%s", s, body)
		}
		if got := after[s] - before[s]; got != want {
			t.Errorf("%s grew by %v, want %v", s, got, want)
		}
	}
}

// TestOutcomes: every failure category of pkg/webhook is an outcome of
// its own; anything else is "other", so the dimension stays bounded.
func TestOutcomes(t *testing.T) {
	for _, c := range []string{webhook.CategoryConnectionRefused, webhook.CategoryTimeout, webhook.CategoryTLS, webhook.CategoryHTTP4xx,
		webhook.CategoryHTTP5xx, webhook.CategoryChallengeFailed, webhook.CategoryRedirect, webhook.CategoryBlockedAddress,
		webhook.CategoryBodyTooLarge, webhook.CategoryInvalidMessage} {
		if got := outcome(c); got != c {
			t.Errorf("outcome(%q) = %q", c, got)
		}
	}
	for c, want := range map[string]string{"": OutcomeOK, "ok": OutcomeOK, "arn:aws:iam::1:user/x": OutcomeOther} {
		if got := outcome(c); got != want {
			t.Errorf("outcome(%q) = %q, want %q", c, got, want)
		}
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// TestMetricDocs: docs/operations.md lists every metric of the set by its
// CloudWatch and Prometheus names, with its unit.
func TestMetricDocs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range Set() {
		if row := "| `" + i.Name + "` (" + i.Unit + ") | `" + i.Prometheus + "`"; !strings.Contains(string(b), row) {
			t.Errorf("docs/operations.md has no row starting %q", row)
		}
	}
	// Its example EMF lines are valid.
	docs, err := emfcheck.Lines(string(b))
	if err != nil || len(docs) < 2 {
		t.Errorf("the example EMF lines of docs/operations.md: %d, %v", len(docs), err)
	}
}

// TestMeter: the API's instruments as meter implements them: a counter
// only grows, an up-down counter goes both ways, a gauge keeps its last
// value, a histogram's buckets are (lower, upper] with one above the last
// bound; each attribute set is its own series.
func TestMeter(t *testing.T) {
	ctx := context.Background()
	m := &meter{}
	c, _ := m.Int64Counter(defRefusals.name)
	u, _ := m.Int64UpDownCounter(defHeldStreams.name)
	g, _ := m.Float64Gauge(defQueueAge.name)
	h, _ := m.Float64Histogram(defDeliveryLatency.name, metric.WithExplicitBucketBoundaries(1, 5))
	a, b := with("k", "a"), with("k", "b")
	c.Add(ctx, 2, a)
	c.Add(ctx, -5, a) // ignored
	c.Add(ctx, 1, b)
	u.Add(ctx, 3, a)
	u.Add(ctx, -2, a)
	g.Record(ctx, 7, a)
	g.Record(ctx, 4, a)
	for _, v := range []float64{0.5, 1, 1.5, 5, 6} {
		h.Record(ctx, v, a)
	}
	got := map[string]string{}
	for _, s := range m.collect() {
		v := formatFloat(s.value)
		if s.hist != nil {
			v = fmt.Sprint(s.hist.counts, s.hist.sum, s.hist.count)
		}
		got[s.key()] = v
	}
	want := map[string]string{
		defRefusals.name + "{k=a}":        "2",
		defRefusals.name + "{k=b}":        "1",
		defHeldStreams.name + "{k=a}":     "1",
		defQueueAge.name + "{k=a}":        "4",
		defDeliveryLatency.name + "{k=a}": "[2 2 1] 14 5",
	}
	if !maps.Equal(got, want) {
		t.Errorf("collected %v, want %v", got, want)
	}
}

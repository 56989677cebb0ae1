package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/envconfig"
	"go.opentelemetry.io/otel/attribute"
)

// Options configure the process's exporter (Setup).
type Options struct {
	// Exporter is where the metrics go (envconfig.ReadMetrics):
	// envconfig.MetricsEMF prints EMF lines to Out at each Flush;
	// MetricsPrometheus and MetricsOff print nothing (Handler serves the
	// counts in either case).
	Exporter envconfig.MetricsExporter
	// Namespace is the CloudWatch namespace of the EMF lines; empty:
	// envconfig.DefaultMetricsNamespace.
	Namespace string
	// Function is the value of every EMF line's Function dimension: the
	// Lambda function's name (AWS_LAMBDA_FUNCTION_NAME, one per function,
	// what template.yaml's alarms name), else the command's name.
	Function string
	// Out receives the EMF lines (os.Stdout in Lambda).
	Out io.Writer
	// Now is the clock of the EMF Timestamp; nil: time.Now.
	Now func() time.Time
}

// exporter is the process's exporter: Setup's options and, for EMF, what
// the last Flush saw.
var exporter struct {
	mu   sync.Mutex
	opts Options
	// last are the cumulative values the last Flush saw, by series: a
	// Flush prints the differences.
	last map[string]float64
}

// Setup sets the process's exporter: mains call it once, at start-up,
// with the configuration envconfig.ReadMetrics read. Without it (tests,
// libraries) the counts are kept and Flush prints nothing.
func Setup(o Options) {
	if o.Namespace == "" {
		o.Namespace = envconfig.DefaultMetricsNamespace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	exporter.mu.Lock()
	defer exporter.mu.Unlock()
	exporter.opts = o
	// What was counted before Setup (an init's store requests) goes
	// into the first Flush.
	exporter.last = map[string]float64{}
}

// Flush prints, in EMF mode, one or more EMF lines with what was counted
// since the last Flush (counters and histograms: the differences; gauges:
// their values when they changed), all in a single Write; nothing when
// nothing changed, or in another mode. pkg/serve calls it at the end of
// each Lambda invocation of the MCP function; Wrap calls it after each
// invocation of a handler. It is safe for concurrent use (Lambda Managed
// Instances serve several invocations at once: each Flush prints what
// all of them counted since the previous one). A write error is returned,
// and the differences it lost are not printed again.
func Flush(ctx context.Context) error {
	exporter.mu.Lock()
	defer exporter.mu.Unlock()
	o := exporter.opts
	if o.Exporter != envconfig.MetricsEMF || o.Out == nil {
		return nil
	}
	lines := emfLines(instruments.collect(), exporter.last, o)
	if len(lines) == 0 {
		return nil
	}
	// One write of every line: log records that other goroutines write
	// to the same stdout fall between flushes, not inside one.
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	_, err := io.WriteString(o.Out, b.String())
	return err
}

// Wrap returns h, flushing the metrics (Flush) after each call: put it
// around a Lambda handler, lambda.StartHandlerFunc(metrics.Wrap(h)), so
// that each invocation prints the EMF lines of what it counted before it
// returns. A failed Flush does not fail the invocation.
func Wrap[In, Out any](h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		defer Flush(context.WithoutCancel(ctx))
		return h(ctx, in)
	}
}

// series is one data point of a metric: its definition, its attributes,
// and its value (counters and gauges) or buckets (histograms).
type series struct {
	def   def
	attrs attribute.Set
	kind  int // kindSum, kindGauge or kindHistogram
	value float64
	hist  *histPoint
}

const (
	kindSum       = iota // a monotonic sum: a counter
	kindGauge            // a gauge or an up-down counter: a level
	kindHistogram        // a histogram
)

// histPoint is a histogram data point: counts per bucket (len(bounds)+1,
// the last one above the last bound), their sum and number.
type histPoint struct {
	bounds []float64
	counts []uint64
	sums   []float64 // per bucket: the sum of its observations (meter's; nil: unknown)
	sum    float64
	count  uint64
}

// key names a series (and, with a suffix, one of its buckets) in
// exporter.last.
func (s *series) key() string {
	return s.def.name + "{" + s.attrs.Encoded(attribute.DefaultEncoder()) + "}"
}

// EMF limits (CloudWatch's Embedded Metric Format specification): at most
// 100 metrics in a directive, 30 dimensions in a dimension set, 100
// values in a metric's array.
const (
	emfMaxMetrics    = 100
	emfMaxDimensions = 30
	emfMaxValues     = 100
	// emfMaxHistLines bounds the lines of one histogram series in a
	// Flush: beyond emfMaxHistLines*emfMaxValues observations, the values
	// printed are scaled down (docs/operations.md).
	emfMaxHistLines = 10
)

// emfLine is one EMF document.
type emfLine map[string]any

// emfLines turns ss into EMF documents of what changed since last (which
// it updates): one line per set of dimension values, holding every
// counter and gauge of that set, and lines of their own for histograms
// (an array of at most emfMaxValues values per line).
func emfLines(ss []series, last map[string]float64, o Options) []emfLine {
	ts := o.Now().UnixMilli()
	type group struct {
		attrs  attribute.Set
		values map[string]float64
		defs   []def
	}
	var groups []*group
	byAttrs := map[string]*group{}
	var lines []emfLine
	for _, s := range ss {
		k := s.key()
		switch s.kind {
		case kindSum, kindGauge:
			prev, seen := last[k]
			last[k] = s.value
			v := s.value
			if s.kind == kindSum {
				v -= prev
				if v == 0 {
					continue
				}
			} else if seen && v == prev {
				continue
			}
			ak := s.attrs.Encoded(attribute.DefaultEncoder()) + "|" + strings.Join(s.def.rollup, ",")
			g := byAttrs[ak]
			if g == nil || len(g.defs) == emfMaxMetrics {
				g = &group{attrs: s.attrs, values: map[string]float64{}}
				byAttrs[ak] = g
				groups = append(groups, g)
			}
			g.values[s.def.emf] = v
			g.defs = append(g.defs, s.def)
		case kindHistogram:
			vals := histValues(s.hist, last, k)
			for len(vals) > 0 {
				n := min(len(vals), emfMaxValues)
				lines = append(lines, emfDoc(o, ts, s.attrs, []def{s.def}, map[string]any{s.def.emf: vals[:n]}))
				vals = vals[n:]
			}
		}
	}
	var out []emfLine
	for _, g := range groups {
		vals := make(map[string]any, len(g.values))
		for n, v := range g.values {
			vals[n] = v
		}
		out = append(out, emfDoc(o, ts, g.attrs, g.defs, vals))
	}
	return append(out, lines...)
}

// emfDoc is the EMF document of metrics ds with values vals, and the
// dimensions Function and attrs (each key capitalised: outcome becomes
// Outcome): one dimension set of them all, and one of Function and the
// metrics' rollup keys when they have one.
func emfDoc(o Options, ts int64, attrs attribute.Set, ds []def, vals map[string]any) emfLine {
	dims := []string{"Function"}
	doc := emfLine{"Function": o.Function}
	for _, kv := range attrs.ToSlice() {
		name := dimensionName(string(kv.Key))
		if len(dims) < emfMaxDimensions {
			dims = append(dims, name)
		}
		doc[name] = kv.Value.AsString()
	}
	sets := [][]string{dims}
	if len(ds) > 0 && len(ds[0].rollup) > 0 {
		// Every metric of a line shares its rollup (emfLines groups them
		// so).
		rollup := []string{"Function"}
		for _, k := range ds[0].rollup {
			rollup = append(rollup, dimensionName(k))
		}
		sets = append(sets, rollup)
	}
	ms := make([]map[string]string, 0, len(ds))
	for _, d := range ds {
		ms = append(ms, map[string]string{"Name": d.emf, "Unit": d.unit})
	}
	for n, v := range vals {
		doc[n] = v
	}
	doc["_aws"] = map[string]any{
		"Timestamp": ts,
		"CloudWatchMetrics": []map[string]any{{
			"Namespace":  o.Namespace,
			"Dimensions": sets,
			"Metrics":    ms,
		}},
	}
	return doc
}

// dimensionName is an attribute key as a CloudWatch dimension name:
// capitalised (outcome: Outcome).
func dimensionName(key string) string {
	if key == "" {
		return key
	}
	return strings.ToUpper(key[:1]) + key[1:]
}

// histValues returns what a histogram series observed since last (which
// it updates) as EMF values: one value per observation, the mean of the
// observations of its bucket since last (exact for a bucket that got one;
// without the bucket's sums, the middle of the bucket), at most
// emfMaxHistLines*emfMaxValues of them (beyond that, each bucket's count
// is scaled down in proportion).
func histValues(h *histPoint, last map[string]float64, key string) []float64 {
	deltas := make([]float64, len(h.counts))
	means := make([]float64, len(h.counts))
	var total float64
	for i, c := range h.counts {
		k := key + "#" + strconv.Itoa(i)
		deltas[i] = float64(c) - last[k]
		last[k] = float64(c)
		total += deltas[i]
		means[i] = bucketValue(h.bounds, i)
		if i < len(h.sums) {
			ks := key + "#s" + strconv.Itoa(i)
			if ds := h.sums[i] - last[ks]; deltas[i] > 0 {
				means[i] = ds / deltas[i]
			}
			last[ks] = h.sums[i]
		}
	}
	if total <= 0 {
		return nil
	}
	limit := float64(emfMaxHistLines * emfMaxValues)
	scale := 1.0
	if total > limit {
		scale = limit / total
	}
	var vals []float64
	for i, d := range deltas {
		n := int(math.Round(d * scale))
		if d > 0 && n == 0 {
			n = 1
		}
		for range n {
			vals = append(vals, means[i])
		}
	}
	return vals
}

// bucketValue is the value that stands for bucket i of bounds when its
// observations are not known: the middle of (bounds[i-1], bounds[i]] (of
// [0, bounds[0]] for the first), the last bound for the bucket above it.
func bucketValue(bounds []float64, i int) float64 {
	switch {
	case len(bounds) == 0:
		return 0
	case i == 0:
		return max(bounds[0], 0) / 2
	case i >= len(bounds):
		return bounds[len(bounds)-1]
	}
	return (bounds[i-1] + bounds[i]) / 2
}

// Handler serves the process's metrics in the Prometheus text format
// (version 0.0.4), cumulative since the process started: the local
// server's /metrics. Every metric of the set is listed, with its HELP and
// TYPE, even before it has a series.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ss := instruments.collect()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, promText(ss))
	})
}

// promText is the text format of ss, metrics sorted by name.
func promText(ss []series) string {
	var b strings.Builder
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		d := defs[n]
		typ := "counter"
		switch n {
		case defFanOut.name, defDeliveryLatency.name:
			typ = "histogram"
		case defHeldStreams.name, defWebhookSubs.name, defQueueDepth.name, defQueueAge.name:
			typ = "gauge"
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", n, escapeHelp(d.help), n, typ)
		for _, s := range ss {
			if s.def.name != n {
				continue
			}
			if s.kind != kindHistogram {
				fmt.Fprintf(&b, "%s%s %s\n", n, labels(s.attrs, ""), formatFloat(s.value))
				continue
			}
			var cum uint64
			for i, c := range s.hist.counts {
				cum += c
				le := "+Inf"
				if i < len(s.hist.bounds) {
					le = formatFloat(s.hist.bounds[i])
				}
				fmt.Fprintf(&b, "%s_bucket%s %d\n", n, labels(s.attrs, le), cum)
			}
			fmt.Fprintf(&b, "%s_sum%s %s\n", n, labels(s.attrs, ""), formatFloat(s.hist.sum))
			fmt.Fprintf(&b, "%s_count%s %d\n", n, labels(s.attrs, ""), s.hist.count)
		}
	}
	return b.String()
}

// labels is the label set {k="v",...} of attrs, with le last when set;
// "" for none.
func labels(attrs attribute.Set, le string) string {
	var parts []string
	for _, kv := range attrs.ToSlice() {
		parts = append(parts, string(kv.Key)+`="`+escapeLabel(kv.Value.AsString())+`"`)
	}
	if le != "" {
		parts = append(parts, `le="`+le+`"`)
	}
	if len(parts) == 0 {
		return ""
	}
	return "{" + strings.Join(parts, ",") + "}"
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }

// formatFloat writes a sample value as the text format does: +Inf, -Inf,
// NaN, else the shortest decimal.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

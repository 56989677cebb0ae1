package metrics

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// meter implements OpenTelemetry's metrics API (metric.Meter) for the
// synchronous instruments the set uses: counters, up-down counters,
// gauges and explicit-bucket histograms, each kept cumulative in memory
// for the exporters (collect). Every other instrument is noop's. It
// stands in for the OpenTelemetry SDK, which would add about 0.8 MB to
// each Lambda binary (its tracing, logs, propagation and semantic
// conventions, none used here; docs/operations.md): the code that counts
// uses the API either way.
type meter struct {
	noop.Meter
	mu    sync.Mutex
	insts []*inst
}

// inst is one instrument's data: a point per attribute set.
type inst struct {
	name   string
	kind   int       // kindSum, kindGauge or kindHistogram
	bounds []float64 // histograms: the upper bounds of the buckets
	mu     sync.Mutex
	points map[attribute.Distinct]*point
}

// point is one series' cumulative data.
type point struct {
	attrs  attribute.Set
	value  float64   // a sum or a gauge's last value
	counts []uint64  // histograms: per bucket, the last one above the last bound
	sums   []float64 // histograms: the sum of each bucket's observations
	sum    float64
	count  uint64
}

// instrument registers an instrument of kind named name.
func (m *meter) instrument(name string, kind int, bounds []float64) *inst {
	i := &inst{name: name, kind: kind, bounds: slices.Clone(bounds), points: map[attribute.Distinct]*point{}}
	if kind == kindHistogram && !sort.Float64sAreSorted(i.bounds) {
		slices.Sort(i.bounds)
	}
	m.mu.Lock()
	m.insts = append(m.insts, i)
	m.mu.Unlock()
	return i
}

// at returns the point of attrs; i.mu is held.
func (i *inst) at(attrs attribute.Set) *point {
	p := i.points[attrs.Equivalent()]
	if p == nil {
		p = &point{attrs: attrs}
		if i.kind == kindHistogram {
			p.counts = make([]uint64, len(i.bounds)+1)
			p.sums = make([]float64, len(i.bounds)+1)
		}
		i.points[attrs.Equivalent()] = p
	}
	return p
}

func (i *inst) add(attrs attribute.Set, v float64) {
	i.mu.Lock()
	i.at(attrs).value += v
	i.mu.Unlock()
}

func (i *inst) set(attrs attribute.Set, v float64) {
	i.mu.Lock()
	i.at(attrs).value = v
	i.mu.Unlock()
}

func (i *inst) observe(attrs attribute.Set, v float64) {
	b, _ := slices.BinarySearch(i.bounds, v) // the first bound >= v: buckets are (lower, upper]
	i.mu.Lock()
	p := i.at(attrs)
	p.counts[b]++
	p.sums[b] += v
	p.sum += v
	p.count++
	i.mu.Unlock()
}

// collect returns every series of m now (cumulative), by metric name,
// then by attributes.
func (m *meter) collect() []series {
	m.mu.Lock()
	insts := slices.Clone(m.insts)
	m.mu.Unlock()
	var out []series
	for _, i := range insts {
		d, ok := defs[i.name]
		if !ok {
			continue
		}
		i.mu.Lock()
		for _, p := range i.points {
			s := series{def: d, attrs: p.attrs, kind: i.kind, value: p.value}
			if i.kind == kindHistogram {
				s.hist = &histPoint{bounds: i.bounds, counts: slices.Clone(p.counts), sums: slices.Clone(p.sums), sum: p.sum, count: p.count}
			}
			out = append(out, s)
		}
		i.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b series) int {
		return cmp.Or(cmp.Compare(a.def.name, b.def.name), cmp.Compare(a.attrs.Encoded(attribute.DefaultEncoder()), b.attrs.Encoded(attribute.DefaultEncoder())))
	})
	return out
}

// The instruments of the API that meter implements.

type int64Counter struct {
	noop.Int64Counter
	i *inst
}

func (c int64Counter) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	if v >= 0 { // a counter only grows
		c.i.add(metric.NewAddConfig(opts).Attributes(), float64(v))
	}
}

type int64UpDownCounter struct {
	noop.Int64UpDownCounter
	i *inst
}

func (c int64UpDownCounter) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	c.i.add(metric.NewAddConfig(opts).Attributes(), float64(v))
}

type int64Gauge struct {
	noop.Int64Gauge
	i *inst
}

func (g int64Gauge) Record(_ context.Context, v int64, opts ...metric.RecordOption) {
	g.i.set(metric.NewRecordConfig(opts).Attributes(), float64(v))
}

type float64Gauge struct {
	noop.Float64Gauge
	i *inst
}

func (g float64Gauge) Record(_ context.Context, v float64, opts ...metric.RecordOption) {
	g.i.set(metric.NewRecordConfig(opts).Attributes(), v)
}

type int64Histogram struct {
	noop.Int64Histogram
	i *inst
}

func (h int64Histogram) Record(_ context.Context, v int64, opts ...metric.RecordOption) {
	h.i.observe(metric.NewRecordConfig(opts).Attributes(), float64(v))
}

type float64Histogram struct {
	noop.Float64Histogram
	i *inst
}

func (h float64Histogram) Record(_ context.Context, v float64, opts ...metric.RecordOption) {
	h.i.observe(metric.NewRecordConfig(opts).Attributes(), v)
}

func (m *meter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return int64Counter{i: m.instrument(name, kindSum, nil)}, nil
}

func (m *meter) Int64UpDownCounter(name string, _ ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	return int64UpDownCounter{i: m.instrument(name, kindGauge, nil)}, nil
}

func (m *meter) Int64Gauge(name string, _ ...metric.Int64GaugeOption) (metric.Int64Gauge, error) {
	return int64Gauge{i: m.instrument(name, kindGauge, nil)}, nil
}

func (m *meter) Float64Gauge(name string, _ ...metric.Float64GaugeOption) (metric.Float64Gauge, error) {
	return float64Gauge{i: m.instrument(name, kindGauge, nil)}, nil
}

func (m *meter) Int64Histogram(name string, opts ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	return int64Histogram{i: m.instrument(name, kindHistogram, metric.NewInt64HistogramConfig(opts...).ExplicitBucketBoundaries())}, nil
}

func (m *meter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return float64Histogram{i: m.instrument(name, kindHistogram, metric.NewFloat64HistogramConfig(opts...).ExplicitBucketBoundaries())}, nil
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpush/mcpush/internal/emfcheck"
	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
)

// TestMetricsWrapEMF: the Lambda handler wrapped with metrics.Wrap, after
// setupMetrics in emf mode, prints after each invocation valid EMF lines
// (internal/emfcheck) of what that invocation ingested: an accepted
// record, then the same record as a duplicate, then a batch with a
// malformed record (rejected) beside its two good ones.
func TestMetricsWrapEMF(t *testing.T) {
	ctx := context.Background()
	st, err := storeconfig.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out bytes.Buffer
	getenv := lookup(map[string]string{"MCPUSH_METRICS": "emf", "AWS_LAMBDA_FUNCTION_NAME": "ingest-fn"})
	if err := setupMetrics(getenv, &out); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { metrics.Setup(metrics.Options{}) })
	metrics.Flush(ctx) // what other tests of the package counted
	out.Reset()
	h := metrics.Wrap(handler(ingest.New(st, nil), nil, slog.New(slog.DiscardHandler)))

	for _, tc := range []struct {
		fixture string
		fail    bool
		want    map[string]float64 // EventsIngested by Outcome
	}{
		{"event.json", false, map[string]float64{"accepted": 1}},
		{"event.json", false, map[string]float64{"duplicate": 1}},
		{"batch-with-bad-record.json", true, map[string]float64{"accepted": 2, "rejected": 1}},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", tc.fixture))
		if err != nil {
			t.Fatal(err)
		}
		out.Reset()
		if _, err := h(ctx, json.RawMessage(b)); (err != nil) != tc.fail {
			t.Fatalf("%s: %v", tc.fixture, err)
		}
		docs, err := emfcheck.Lines(out.String())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, p := range emfcheck.Points(docs) {
			if p.Namespace != "mcpush" || p.Dimensions["Function"] != "ingest-fn" {
				t.Errorf("%s: %s in %q with %v", tc.fixture, p.Name, p.Namespace, p.Dimensions)
			}
			if p.Name == "EventsIngested" {
				if p.Unit != "Count" {
					t.Errorf("EventsIngested in %q", p.Unit)
				}
				for _, v := range p.Values {
					got[p.Dimensions["Outcome"]] += v
				}
			}
		}
		if !mapsEqual(got, tc.want) {
			t.Errorf("%s: EventsIngested %v, want %v\n%s", tc.fixture, got, tc.want, out.String())
		}
	}

	// A bad value is an *envconfig.Error naming the variable.
	var e *envconfig.Error
	if err := setupMetrics(lookup(map[string]string{"MCPUSH_METRICS": "cloudwatch"}), &out); !errors.As(err, &e) || e.Name != "MCPUSH_METRICS" {
		t.Errorf("setupMetrics(MCPUSH_METRICS=cloudwatch) = %v", err)
	}
}

func lookup(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/pkg/metrics"
)

// TestTemplateMonitoring ties template.yaml's alarms and dashboard to the
// metric set (package metrics): every metric of the mcpush namespace they
// name is one the functions print, with exactly the dimensions of one of
// its EMF dimension sets (else CloudWatch would show an empty graph, and
// the alarm would never fire); the dashboard body is JSON once
// substituted, and its alarm widget lists every alarm.
func TestTemplateMonitoring(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tpl := string(b)
	set := map[string]metrics.Info{}
	for _, i := range metrics.Set() {
		set[i.Name] = i
	}
	check := func(where, name string, dims []string) {
		t.Helper()
		i, ok := set[name]
		switch {
		case !ok:
			t.Errorf("%s: metric %s is not in the metric set", where, name)
		case !sameNames(dims, i.Dimensions) && !sameNames(dims, i.Rollup):
			t.Errorf("%s: %s with dimensions %v; it has %v (or %v)", where, name, dims, i.Dimensions, i.Rollup)
		}
	}

	// Alarms: Namespace: mcpush, MetricName: X, Dimensions: - Name: ...
	lines := strings.Split(tpl, "\n")
	alarms := 0
	for i, l := range lines {
		if strings.TrimSpace(l) == "Type: AWS::CloudWatch::Alarm" {
			alarms++
		}
		if strings.TrimSpace(l) != "Namespace: mcpush" {
			continue
		}
		name := strings.TrimPrefix(strings.TrimSpace(lines[i+1]), "MetricName: ")
		var dims []string
		for _, d := range lines[i+2:] {
			d = strings.TrimSpace(d)
			if d == "Dimensions:" || strings.HasPrefix(d, "Value: ") {
				continue
			}
			n, ok := strings.CutPrefix(d, "- Name: ")
			if !ok {
				break
			}
			dims = append(dims, n)
		}
		check("alarm", name, dims)
	}
	if alarms < 8 {
		t.Errorf("%d alarms, want at least 8", alarms)
	}

	// The dashboard: its body, with ${...} substituted.
	start := strings.Index(tpl, `{"widgets": [`)
	end := strings.Index(tpl, "        - Server: !If")
	if start < 0 || end < start {
		t.Fatal("no dashboard body in template.yaml")
	}
	body := regexp.MustCompile(`\$\{[^}]+\}`).ReplaceAllString(tpl[start:end], "x")
	var dash struct {
		Widgets []struct {
			Type       string
			Properties struct {
				Alarms  []string
				Metrics [][]any
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &dash); err != nil {
		t.Fatalf("the dashboard body is not JSON: %v", err)
	}
	widgetAlarms := 0
	for _, w := range dash.Widgets {
		widgetAlarms += len(w.Properties.Alarms)
		var prev []string
		for _, m := range w.Properties.Metrics {
			var items []string
			for _, x := range m {
				if s, ok := x.(string); ok {
					items = append(items, s)
				}
			}
			// "..." repeats the previous metric's items, the last ones
			// replaced; "." repeats one.
			if len(items) > 0 && items[0] == "..." {
				items = append(slices.Clone(prev[:len(prev)-(len(items)-1)]), items[1:]...)
			}
			for j, s := range items {
				if s == "." && j < len(prev) {
					items[j] = prev[j]
				}
			}
			prev = items
			if items[0] != "mcpush" {
				continue
			}
			var dims []string
			for j := 2; j+1 < len(items); j += 2 {
				dims = append(dims, items[j])
			}
			check("dashboard", items[1], dims)
		}
	}
	if widgetAlarms != alarms {
		t.Errorf("the alarm widget lists %d alarms, the template has %d", widgetAlarms, alarms)
	}
}

func sameNames(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}

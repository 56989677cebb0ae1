package costchart

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpush/mcpush/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite docs/costs.svg from docs/costs.json")

// TestCostChart: docs/costs.svg is the chart that docs/costs.json, the
// figures BenchmarkCostModel measured, draws. With -update it rewrites
// the chart (make costchart does, after the benchmark).
func TestCostChart(t *testing.T) {
	docs := filepath.Join(testenv.RepoRoot(t), "docs")
	f, err := ReadFigures(filepath.Join(docs, "costs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var svg bytes.Buffer
	if err := Render(&svg, f); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(docs, "costs.svg")
	if *update {
		if err := os.WriteFile(path, svg.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, svg.Bytes()) {
		t.Errorf("docs/costs.svg is not what docs/costs.json draws: run `go test ./internal/costchart -update` (or `make costchart` to measure anew)")
	}
}

// TestRender: the chart is well-formed SVG that shows each store, the
// target and the figures as labels.
func TestRender(t *testing.T) {
	f := &Figures{PricesChecked: "2026-11-23", Stores: []Store{
		{Name: "sqlite", IdleClientMonth: 0.85, IdleListenMonth: 8.96, ToolsCallMillion: 0.33,
			Events: []Events{{1, 0.019, false}, {100, 1.78, false}, {10000, 178, true}}},
		{Name: "dynamodb", IdleClientMonth: 0.91, IdleListenMonth: 8.97, ToolsCallMillion: 0.5,
			Events: []Events{{1, 0.029, false}, {100, 2.39, false}, {10000, 239, true}}},
	}}
	var svg bytes.Buffer
	if err := Render(&svg, f); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
	var text strings.Builder
	elements := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			elements++
		case xml.CharData:
			text.Write(tok)
		}
	}
	if elements < 50 {
		t.Errorf("the chart has %d elements; too few to show the figures", elements)
	}
	for _, want := range []string{"$0.85", "$8.96", "$0.91", "$8.97", "target: $1.00", "SQLite", "DynamoDB", "1,000 events", "2026-11-23"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the chart's text lacks %q", want)
		}
	}
	var again bytes.Buffer
	if err := Render(&again, f); err != nil || !bytes.Equal(again.Bytes(), svg.Bytes()) {
		t.Errorf("Render is not deterministic (%v): the committed chart could not be checked", err)
	}
}

func TestBadFigures(t *testing.T) {
	for _, f := range []*Figures{
		{},
		{Stores: []Store{{Name: "sqlite"}}},
		{Stores: []Store{{Name: "sqlite", IdleClientMonth: 1, IdleListenMonth: 9, Events: []Events{{0, 1, false}}}}},
	} {
		if err := Render(io.Discard, f); err == nil {
			t.Errorf("Render(%+v) = nil, want an error", f)
		}
	}
}

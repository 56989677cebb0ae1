// Package costchart draws mcpush's cost model as an SVG chart
// (docs/costs.svg) from the figures BenchmarkCostModel measures and
// prices (docs/costs.json): what an idle client costs a month in each
// protocol era, against the $1.00 target, and what 1,000 events cost by
// the number of subscribers.
//
// Regenerate both with `make costchart` (the benchmark, on SQLite and on
// DynamoDB through moto_server, writes the figures; TestCostChart -update
// draws them). TestCostChart checks that the committed chart is the one
// the committed figures draw.
package costchart

import (
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Figures are the priced figures of the cost model, one entry per store
// the benchmark measured.
type Figures struct {
	// PricesChecked is the date the AWS list prices were checked.
	PricesChecked string  `json:"pricesChecked"`
	Stores        []Store `json:"stores"`
}

// Store is the cost model measured on one store. The dollar figures
// price DynamoDB request units and Lambda time either way: the store
// changes the measured invocation times.
type Store struct {
	Name string `json:"name"` // "sqlite" or "dynamodb"
	// IdleClientMonth is the dollars a month of an idle connected client
	// of the 2025-11-25 era (its GET stream ends and resumes).
	IdleClientMonth float64 `json:"idleClientMonth"`
	// IdleListenMonth is the dollars a month of an idle 2026-07-28 listen
	// stream (held: the era cannot resume it).
	IdleListenMonth float64 `json:"idleListenMonth"`
	// Events are the dollars of 1,000 events delivered to a number of
	// subscribers.
	Events []Events `json:"events"`
	// ToolsCallMillion is the dollars of a million warm tools/call.
	ToolsCallMillion float64 `json:"toolsCallPerMillion"`
}

// Events is the cost of 1,000 events delivered to Subscribers
// subscribers each.
type Events struct {
	Subscribers int     `json:"subscribers"`
	Dollars     float64 `json:"dollarsPer1000"`
	// Derived is set when the figure is extrapolated from smaller
	// measured fan-outs rather than measured.
	Derived bool `json:"derived,omitempty"`
}

// IdleTarget is the target cost of an idle connected client, dollars a
// month.
const IdleTarget = 1.00

// ReadFigures reads Figures from the JSON file path.
func ReadFigures(path string) (*Figures, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f Figures
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, f.validate()
}

// WriteFigures writes f to path as indented JSON.
func WriteFigures(path string, f *Figures) error {
	if err := f.validate(); err != nil {
		return err
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func (f *Figures) validate() error {
	if len(f.Stores) == 0 {
		return errors.New("costchart: no stores in the figures")
	}
	for _, s := range f.Stores {
		if s.Name == "" || s.IdleClientMonth <= 0 || s.IdleListenMonth <= 0 || len(s.Events) == 0 {
			return fmt.Errorf("costchart: incomplete figures for store %q: %+v", s.Name, s)
		}
		for _, e := range s.Events {
			if e.Subscribers < 1 || e.Dollars <= 0 {
				return fmt.Errorf("costchart: store %q: 1,000 events to %d subscribers cost $%v; want positive figures", s.Name, e.Subscribers, e.Dollars)
			}
		}
	}
	return nil
}

// storeLabel names a store in the legend.
func storeLabel(name string) string {
	switch name {
	case "sqlite":
		return "times measured on SQLite"
	case "dynamodb":
		return "times measured on DynamoDB (moto)"
	}
	return name
}

// storeColors are the colours of the stores, in order.
var storeColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// Render draws f as an SVG of two panels: an idle client's dollars a
// month in both eras (bars, with the $1.00 target), and the dollars of
// 1,000 events by subscribers (log-log lines; derived points hollow).
func Render(w io.Writer, f *Figures) error {
	if err := f.validate(); err != nil {
		return err
	}
	idle, err := idlePanel(f)
	if err != nil {
		return err
	}
	events, err := eventsPanel(f)
	if err != nil {
		return err
	}
	c := vgsvg.New(Width, Height)
	drawPanels(c, idle, events)
	_, err = c.WriteTo(w)
	return err
}

// Width and Height are the size of the chart.
const (
	Width  = 24 * vg.Centimeter
	Height = 10 * vg.Centimeter
)

// drawPanels draws the two panels side by side on c.
func drawPanels(c vg.CanvasSizer, idle, events *plot.Plot) {
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{{idle, events}}, tiles, dc)
	idle.Draw(canvases[0][0])
	events.Draw(canvases[0][1])
}

func idlePanel(f *Figures) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "An idle client, $ per month (AWS list prices " + f.PricesChecked + ")"
	p.Y.Label.Text = "$ per month"
	p.Y.Min = 0
	p.X.Min, p.X.Max = -0.7, 1.7
	top := IdleTarget
	for _, s := range f.Stores {
		top = max(top, s.IdleClientMonth, s.IdleListenMonth)
	}
	p.Y.Max = 1.35 * top // room for the legend above the bars
	p.NominalX("2025-11-25 session\n(GET stream resumes)", "2026-07-28 listen\n(stream held)")
	width := vg.Points(18)
	n := len(f.Stores)
	for i, s := range f.Stores {
		bars, err := plotter.NewBarChart(plotter.Values{s.IdleClientMonth, s.IdleListenMonth}, width)
		if err != nil {
			return nil, err
		}
		bars.Color = storeColors[i%len(storeColors)]
		bars.LineStyle.Width = 0
		bars.Offset = width * vg.Length(2*i-n+1) / 2
		p.Add(bars)
		p.Legend.Add(storeLabel(s.Name), bars)
		for j, v := range []float64{s.IdleClientMonth, s.IdleListenMonth} {
			labels, err := plotter.NewLabels(plotter.XYLabels{
				XYs:    []plotter.XY{{X: float64(j), Y: v}},
				Labels: []string{"$" + strconv.FormatFloat(v, 'f', 2, 64)},
			})
			if err != nil {
				return nil, err
			}
			labels.Offset = vg.Point{X: bars.Offset - width/2, Y: vg.Points(2) + vg.Points(8)*vg.Length(i%2)}
			labels.TextStyle[0].Font.Size = vg.Points(7)
			p.Add(labels)
		}
	}
	target := plotter.NewFunction(func(float64) float64 { return IdleTarget })
	target.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	target.Color = color.RGBA{R: 0xc0, A: 0xff}
	p.Add(target)
	p.Legend.Add("target: $1.00 per idle client-month", target)
	style(p)
	return p, nil
}

func eventsPanel(f *Figures) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "1,000 events, $ by subscribers"
	p.X.Label.Text = "subscribers per event"
	p.Y.Label.Text = "$ per 1,000 events"
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	for i, s := range f.Stores {
		xys := make(plotter.XYs, len(s.Events))
		var derived plotter.XYs
		for j, e := range s.Events {
			xys[j] = plotter.XY{X: float64(e.Subscribers), Y: e.Dollars}
			if e.Derived {
				derived = append(derived, xys[j])
			}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		clr := storeColors[i%len(storeColors)]
		line.Color = clr
		points.Color = clr
		points.Shape = draw.CircleGlyph{}
		p.Add(line, points)
		p.Legend.Add(storeLabel(s.Name), line, points)
		if len(derived) > 0 {
			hollow, err := plotter.NewScatter(derived)
			if err != nil {
				return nil, err
			}
			hollow.Color = color.White
			hollow.Shape = draw.CircleGlyph{}
			hollow.Radius = points.Radius * 0.6
			p.Add(hollow)
		}
	}
	p.Legend.Add("hollow: derived from 100 and 300 subscribers")
	style(p)
	return p, nil
}

// style sets what both panels share: font sizes and the legend's place.
func style(p *plot.Plot) {
	p.Title.TextStyle.Font.Size = vg.Points(10)
	p.X.Label.TextStyle.Font.Size = vg.Points(9)
	p.Y.Label.TextStyle.Font.Size = vg.Points(9)
	p.X.Tick.Label.Font.Size = vg.Points(8)
	p.Y.Tick.Label.Font.Size = vg.Points(8)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(6)
	p.Legend.YOffs = -vg.Points(4)
	p.Legend.TextStyle.Font.Size = vg.Points(7)
}

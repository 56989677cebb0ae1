// Package emfcheck checks CloudWatch Embedded Metric Format (EMF)
// documents against AWS's specification ("Specification: Embedded metric
// format", CloudWatch User Guide): a test helper. Validate checks a
// document against emf.schema.json (the structure, the limits: at most
// 100 metrics in a directive, 30 dimensions in a dimension set, the
// units CloudWatch knows) and then the rules a schema cannot state: each
// dimension names a root member with a string value, each metric a root
// member with a number or an array of at most 100 numbers, a document of
// at most 1 MB.
package emfcheck

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

//go:embed emf.schema.json
var schemaJSON []byte

// MaxDocBytes is the largest EMF document (a CloudWatch Logs event).
const MaxDocBytes = 1 << 20

// MaxValues is the most values a metric's array may hold.
const MaxValues = 100

var resolved = func() *jsonschema.Resolved {
	var s jsonschema.Schema
	if err := json.Unmarshal(schemaJSON, &s); err != nil {
		panic(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		panic(err)
	}
	return rs
}()

// Doc is a decoded EMF document.
type Doc map[string]any

// Directive is one of a document's metric directives.
type Directive struct {
	Namespace  string
	Dimensions [][]string
	Metrics    []struct {
		Name, Unit        string
		StorageResolution int
	}
}

// Directives returns d's metric directives (of a valid document).
func (d Doc) Directives() []Directive {
	b, _ := json.Marshal(d["_aws"].(map[string]any)["CloudWatchMetrics"])
	var ds []Directive
	json.Unmarshal(b, &ds)
	return ds
}

// Validate checks one line, an EMF document, and returns it decoded.
func Validate(line []byte) (Doc, error) {
	if len(line) > MaxDocBytes {
		return nil, fmt.Errorf("emf: %d bytes, more than %d", len(line), MaxDocBytes)
	}
	var doc map[string]any
	if err := json.Unmarshal(line, &doc); err != nil {
		return nil, fmt.Errorf("emf: not a JSON object: %v", err)
	}
	if err := resolved.Validate(doc); err != nil {
		return nil, fmt.Errorf("emf: against the schema: %v", err)
	}
	d := Doc(doc)
	var errs []error
	for i, dir := range d.Directives() {
		for _, set := range dir.Dimensions {
			for _, k := range set {
				if v, ok := doc[k].(string); !ok || v == "" || len(v) > 1024 {
					errs = append(errs, fmt.Errorf("directive %d: dimension %q: the root member is %#v, want a string of 1 to 1024 bytes", i, k, doc[k]))
				}
			}
		}
		for _, m := range dir.Metrics {
			switch v := doc[m.Name].(type) {
			case float64:
			case []any:
				if len(v) == 0 || len(v) > MaxValues {
					errs = append(errs, fmt.Errorf("directive %d: metric %q: %d values, want 1 to %d", i, m.Name, len(v), MaxValues))
				}
				for _, x := range v {
					if _, ok := x.(float64); !ok {
						errs = append(errs, fmt.Errorf("directive %d: metric %q: a value %#v is not a number", i, m.Name, x))
						break
					}
				}
			default:
				errs = append(errs, fmt.Errorf("directive %d: metric %q: the root member is %#v, want a number or an array of numbers", i, m.Name, doc[m.Name]))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("emf: %w", err)
	}
	return d, nil
}

// Lines returns the EMF documents among the lines of out (a process's
// output: log records and EMF lines, one per line), each validated; a
// line whose JSON object has an "_aws" member and fails Validate is an
// error.
func Lines(out string) ([]Doc, error) {
	var docs []Doc
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") || !strings.Contains(line, `"_aws"`) {
			continue
		}
		d, err := Validate([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("%w\nline: %s", err, line)
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// Point is one metric value of a document, with its dimensions.
type Point struct {
	Namespace, Name, Unit string
	Dimensions            map[string]string
	Values                []float64 // one for a number
}

// Points returns every metric value of docs, once per dimension set.
func Points(docs []Doc) []Point {
	var ps []Point
	for _, d := range docs {
		for _, dir := range d.Directives() {
			for _, set := range dir.Dimensions {
				dims := map[string]string{}
				for _, k := range set {
					dims[k], _ = d[k].(string)
				}
				for _, m := range dir.Metrics {
					p := Point{Namespace: dir.Namespace, Name: m.Name, Unit: m.Unit, Dimensions: dims}
					switch v := d[m.Name].(type) {
					case float64:
						p.Values = []float64{v}
					case []any:
						for _, x := range v {
							f, _ := x.(float64)
							p.Values = append(p.Values, f)
						}
					}
					ps = append(ps, p)
				}
			}
		}
	}
	return ps
}

package emfcheck

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// doc builds an EMF document with n metrics and the dimension set dims,
// then lets edit change it.
func doc(t *testing.T, n int, dims []string, edit func(map[string]any)) []byte {
	t.Helper()
	d := map[string]any{}
	var ms []map[string]any
	for i := range n {
		name := fmt.Sprintf("M%d", i)
		ms = append(ms, map[string]any{"Name": name, "Unit": "Count"})
		d[name] = 1
	}
	for _, k := range dims {
		d[k] = "v"
	}
	d["_aws"] = map[string]any{"Timestamp": 1574109732004, "CloudWatchMetrics": []any{
		map[string]any{"Namespace": "mcpush", "Dimensions": [][]string{dims}, "Metrics": ms}}}
	if edit != nil {
		edit(d)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func directive(d map[string]any) map[string]any {
	return d["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
}

func keys(n int) []string {
	var ks []string
	for i := range n {
		ks = append(ks, fmt.Sprintf("D%d", i))
	}
	return ks
}

// TestValidate: the specification's example and documents at its limits
// pass; each broken rule is an error that says which.
func TestValidate(t *testing.T) {
	example := `{"_aws":{"Timestamp":1574109732004,"CloudWatchMetrics":[{"Namespace":"lambda-function-metrics","Dimensions":[["functionVersion"]],"Metrics":[{"Name":"time","Unit":"Milliseconds"}]}]},"functionVersion":"$LATEST","time":100,"requestId":"989ffbf8-9ace-4817-a57c-e4dd734019ee"}`
	if _, err := Validate([]byte(example)); err != nil {
		t.Errorf("the specification's example: %v", err)
	}
	if _, err := Validate(doc(t, 100, keys(30), nil)); err != nil {
		t.Errorf("100 metrics, 30 dimensions: %v", err)
	}
	for _, tc := range []struct {
		name, want string
		line       []byte
	}{
		{"101 metrics", "schema", doc(t, 101, keys(1), nil)},
		{"31 dimensions", "schema", doc(t, 1, keys(31), nil)},
		{"no timestamp", "schema", doc(t, 1, keys(1), func(d map[string]any) { delete(d["_aws"].(map[string]any), "Timestamp") })},
		{"bad unit", "schema", doc(t, 1, keys(1), func(d map[string]any) { directive(d)["Metrics"].([]map[string]any)[0]["Unit"] = "Requests" })},
		{"no namespace", "schema", doc(t, 1, keys(1), func(d map[string]any) { delete(directive(d), "Namespace") })},
		{"bad storage resolution", "schema", doc(t, 1, keys(1), func(d map[string]any) { directive(d)["Metrics"].([]map[string]any)[0]["StorageResolution"] = 5 })},
		{"dimension missing", `dimension "D0"`, doc(t, 1, keys(1), func(d map[string]any) { delete(d, "D0") })},
		{"dimension not a string", `dimension "D0"`, doc(t, 1, keys(1), func(d map[string]any) { d["D0"] = 3 })},
		{"metric missing", `metric "M0"`, doc(t, 1, keys(1), func(d map[string]any) { delete(d, "M0") })},
		{"metric a string", `metric "M0"`, doc(t, 1, keys(1), func(d map[string]any) { d["M0"] = "1" })},
		{"101 values", `metric "M0"`, doc(t, 1, keys(1), func(d map[string]any) { d["M0"] = make([]int, 101) })},
		{"too large", "bytes", doc(t, 1, keys(1), func(d map[string]any) { d["pad"] = strings.Repeat("x", MaxDocBytes) })},
	} {
		if _, err := Validate(tc.line); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

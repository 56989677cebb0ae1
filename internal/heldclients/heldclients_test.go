package heldclients

import (
	"testing"
	"time"
)

func TestLatenciesAndPercentile(t *testing.T) {
	t0 := time.Unix(100, 0)
	ds := []Delivery{
		{Got: 2, Arrivals: []int64{t0.Add(30 * time.Millisecond).UnixNano(), t0.Add(10 * time.Millisecond).UnixNano()}},
		{Got: 2, Arrivals: []int64{t0.Add(20 * time.Millisecond).UnixNano(), t0.Add(40 * time.Millisecond).UnixNano()}},
	}
	lat := Latencies(t0, ds...)
	want := []time.Duration{10, 20, 30, 40}
	for i := range want {
		if lat[i] != want[i]*time.Millisecond {
			t.Fatalf("latencies %v, want %v ms sorted", lat, want)
		}
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0, 10}, {25, 10}, {50, 20}, {99, 40}, {100, 40}} {
		if got := Percentile(lat, c.p); got != c.want*time.Millisecond {
			t.Errorf("p%v = %v, want %v ms", c.p, got, c.want)
		}
	}
	if Percentile(nil, 99) != 0 {
		t.Error("the percentile of nothing is not 0")
	}
}

package mcp

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestProgressThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []float64
		var at []time.Duration
		start := time.Now()
		p := &progressThrottle{
			interval: 100 * time.Millisecond,
			now:      time.Now,
			send: func(pp ProgressParams) {
				got = append(got, pp.Progress)
				at = append(at, time.Since(start))
			},
		}
		// The conformance fixture: 0, 50, 100 at 50 ms spacing.
		p.report(ProgressParams{Progress: 0, Total: 100})
		time.Sleep(50 * time.Millisecond)
		p.report(ProgressParams{Progress: 50, Total: 100})
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		p.report(ProgressParams{Progress: 100, Total: 100})
		// A burst: only the latest pending value survives the interval.
		for i := 101; i <= 150; i++ {
			p.report(ProgressParams{Progress: float64(i)})
		}
		p.report(ProgressParams{Progress: 120}) // not increasing: dropped
		p.flush()
		p.report(ProgressParams{Progress: 999}) // after flush: dropped
		synctest.Wait()

		if diff := cmp.Diff([]float64{0, 50, 150}, got); diff != "" {
			t.Errorf("sent values (-want +got):\n%s", diff)
		}
		for i := 1; i < len(at)-1; i++ {
			if at[i]-at[i-1] < 100*time.Millisecond {
				t.Errorf("notifications %d and %d only %v apart", i-1, i, at[i]-at[i-1])
			}
		}
	})
}

package e2e

import (
	"context"
	"testing"
)

// TestConformance2026 runs the 2026-07-28 requirement set, whole, against
// one server process and against three processes sharing one store behind
// the round-robin proxy (so every retry of a multi round-trip request, and
// the change that a listen stream must see, lands on another process than
// the request before it), on every store. The tasks extension is run and
// reported, not required (see Suite2026).
func TestConformance2026(t *testing.T) {
	suite := Suite2026()
	for _, store := range testStores() {
		t.Run(store.Name+"/single", func(t *testing.T) {
			requireSuite(t, suite)
			c := StartCluster(t, 1, serverEnv(t, store))
			ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout)
			defer cancel()
			RunConformance(ctx, t, suite, c.URL(0), "").Require(t)
		})
		t.Run(store.Name+"/proxy", func(t *testing.T) {
			requireSuite(t, suite)
			c := StartCluster(t, instances, serverEnv(t, store))
			p := NewProxy(t, c.BaseURLs()...)
			ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout)
			defer cancel()
			RunConformance(ctx, t, suite, p.URL+"/mcp", "").Require(t)
			requireSpread(t, p)
		})
	}
}

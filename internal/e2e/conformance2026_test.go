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

// TestConformance2026NoKey runs the 2026-07-28 requirement set against
// three processes sharing one SQLite file behind the round-robin proxy
// with no MCPUSH_STATE_KEYS, as a newcomer starts them: they share a
// requestState key through the store, so every multi round-trip retry
// that lands on another process verifies there. No process warns about
// its key.
func TestConformance2026NoKey(t *testing.T) {
	suite := Suite2026()
	requireSuite(t, suite)
	c := StartCluster(t, instances, &ClusterOptions{
		Env:       append(SQLiteStore().Env(t), "MCPUSH_FIXTURES=conformance"),
		ReadyPath: "/healthz",
	})
	p := NewProxy(t, c.BaseURLs()...)
	ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout)
	defer cancel()
	RunConformance(ctx, t, suite, p.URL+"/mcp", "").Require(t)
	requireSpread(t, p)
	for i, proc := range c.procs {
		if proc.log.Contains("MCPUSH_STATE_KEYS") {
			t.Errorf("process %d logged about MCPUSH_STATE_KEYS on a default start", i)
		}
	}
}

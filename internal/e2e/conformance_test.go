package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
)

const (
	// instances is the number of server processes behind the proxy.
	instances = 3
	// suiteTimeout bounds a whole conformance run; scenarioTimeout one
	// scenario of the scenario-by-scenario runs.
	suiteTimeout    = 10 * time.Minute
	scenarioTimeout = 2 * time.Minute
)

// testStores are the stores the conformance tests run on.
func testStores() []Store { return Stores() }

// serverEnv configures every server process: the store's environment, the
// conformance suite's fixtures, and readiness by GET /healthz.
func serverEnv(t testing.TB, store Store) *ClusterOptions {
	return &ClusterOptions{
		Env: append(store.Env(t), "MCPUSH_FIXTURES=conformance",
			// Every process signs and verifies requestState with one key.
			"MCPUSH_STATE_KEYS=conformance-test-key-0123456789abcdef"),
		ReadyPath: "/healthz",
	}
}

// requireSuite checks that Node 22 and the suite are installed before
// anything expensive starts.
func requireSuite(t testing.TB, s Suite) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping conformance in -short mode")
	}
	testenv.Node22(t)
	testenv.Conformance(t, s.Version)
}

// TestConformance runs each conformance suite, whole, against one server
// process, and against three processes sharing one store behind a
// round-robin proxy (every request on the next process).
func TestConformance(t *testing.T) {
	for _, store := range testStores() {
		for _, suite := range Suites() {
			t.Run(store.Name+"/"+suite.Name+"/single", func(t *testing.T) {
				requireSuite(t, suite)
				c := StartCluster(t, 1, serverEnv(t, store))
				ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout)
				defer cancel()
				RunConformance(ctx, t, suite, c.URL(0), "").Require(t)
			})
			t.Run(store.Name+"/"+suite.Name+"/proxy", func(t *testing.T) {
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
}

// TestConformanceRestart runs each conformance suite scenario by scenario
// against three processes sharing one store behind a round-robin proxy,
// killing process 0 (SIGKILL) and starting it again before each scenario:
// nothing a session needs may live only in one process's memory.
func TestConformanceRestart(t *testing.T) {
	for _, store := range testStores() {
		// The 2026 era too: a multi round-trip retry or a listen stream
		// needs nothing from the killed process either.
		for _, suite := range append(Suites(), Suite2026()) {
			t.Run(store.Name+"/"+suite.Name, func(t *testing.T) {
				requireSuite(t, suite)
				names := ListScenarios(t, suite)
				c := StartCluster(t, instances, serverEnv(t, store))
				p := NewProxy(t, c.BaseURLs()...)
				for _, name := range names {
					t.Run(name, func(t *testing.T) {
						marks, proxyMark := c.Mark(), p.Mark()
						defer func() {
							if t.Failed() {
								p.DumpLog(t, proxyMark, 200)
								c.DumpLogs(t, marks, 200)
							}
						}()
						if err := c.Restart(0); err != nil {
							t.Fatal(err)
						}
						p.CloseIdleConnections()
						ctx, cancel := context.WithTimeout(t.Context(), scenarioTimeout)
						defer cancel()
						RunConformance(ctx, t, suite, p.URL+"/mcp", name).Require(t)
					})
				}
				requireSpread(t, p)
			})
		}
	}
}

// requireSpread checks that the proxy sent requests to every backend, in
// turn.
func requireSpread(t testing.TB, p *Proxy) {
	t.Helper()
	counts := p.Counts()
	if p.Total() < int64(len(counts)) {
		return // too few requests to judge (e.g. a -run filter)
	}
	if slices.Min(counts) == 0 || slices.Max(counts)-slices.Min(counts) > 1 {
		t.Errorf("proxy spread requests %v over the backends, want round robin (all equal within 1, none 0)", counts)
	}
	t.Logf("proxy: %d requests, per backend %v", p.Total(), counts)
}

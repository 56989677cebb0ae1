package costs

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// BenchmarkWarmToolsCallRequests counts the store requests of a warm
// tools/call on each store (DynamoDB: moto_server), on a server with the
// shipped options but the request rate bound (which would refuse a fast
// loop; at its default, 6,000 a minute, it writes its counter once per
// 300 requests, 0.003 a call), one client calling in a loop.
// requests/warm-call is all the process's requests over the calls. Of
// those, call-requests is the call's own (one session read: a Query on
// DynamoDB), and registry-refreshes the process's
// background refresh of its registry hashes (a GetItem on DynamoDB),
// which is not the call's: it runs at most once per RegistryRefresh
// (500 ms) while the process serves requests, however many it serves, so
// a lone client's share is its call's time over 500 ms: about one call in
// ten on moto, whose calls take tens of milliseconds (docs/costs.md, Push
// costs). refreshes/s is that rate.
func BenchmarkWarmToolsCallRequests(b *testing.B) {
	for _, be := range backends(b) {
		b.Run(be.name, func(b *testing.B) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "mcpush", Version: "costs"}, be.store, &mcp.ServerOptions{
				DynamicRegistries: true,
				Limits:            mcp.Limits{MaxRequestsPerMinute: 1 << 30},
			})
			eventtools.Add(srv, be.store, nil)
			h := mcp.NewStreamableHandler(srv, nil)
			ts := httptest.NewServer(h)
			b.Cleanup(func() { ts.Close(); h.Close() })
			url := ts.URL
			sid, _ := post(b, url, "", initReq)
			post(b, url, sid, initNote)
			post(b, url, sid, callReq) // warm: the process has its registry copy
			be.reset()
			start := time.Now()
			for b.Loop() {
				post(b, url, sid, callReq)
			}
			took := time.Since(start)
			time.Sleep(50 * time.Millisecond) // a background refresh the last call started
			r, w, _ := be.tally.counts()
			refreshes := float64(be.tally.count(be.registryRead))
			n := float64(b.N)
			b.ReportMetric(float64(r+w)/n, "requests/warm-call")
			b.ReportMetric((float64(r+w)-refreshes)/n, "call-requests/warm-call")
			b.ReportMetric(refreshes/n, "registry-refreshes/warm-call")
			b.ReportMetric(refreshes/took.Seconds(), "refreshes/s")
		})
	}
}

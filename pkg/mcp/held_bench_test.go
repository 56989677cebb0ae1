package mcp_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/heldclients"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// heldMemory is what n idle held streams cost the server's process, per
// stream: the Go heap in use (live objects and the free room of their
// spans), the live objects alone, the goroutine stacks, and the
// goroutines, each the difference between before the streams opened and
// once they are idle, after a GC.
type heldMemory struct {
	heap, live, stacks, goroutines float64
}

func (m heldMemory) report(b *testing.B, prefix string) {
	b.ReportMetric((m.heap+m.stacks)/1024, prefix+"KiB/held-stream")
	b.ReportMetric(m.heap/1024, prefix+"heap-KiB/held-stream")
	b.ReportMetric(m.live/1024, prefix+"live-heap-KiB/held-stream")
	b.ReportMetric(m.stacks/1024, prefix+"stack-KiB/held-stream")
	b.ReportMetric(m.goroutines, prefix+"goroutines/held-stream")
}

// memoryOf measures what open (which opens n streams and returns once they
// are idle) adds to this process. With MCPUSH_HELDMEM_PROFILE=DIR it
// writes the heap (every allocation sampled) and goroutine profiles of the
// idle process there, as NAME-heap.pprof and NAME-goroutine.pprof.
func memoryOf(tb testing.TB, name string, n int, open func()) heldMemory {
	profile := os.Getenv("MCPUSH_HELDMEM_PROFILE")
	if profile != "" {
		defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
		runtime.MemProfileRate = 1
	}
	read := func() (m runtime.MemStats, g int) {
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m, runtime.NumGoroutine()
	}
	before, g0 := read()
	open()
	after, g1 := read()
	if profile != "" {
		for _, p := range []string{"heap", "goroutine"} {
			f, err := os.Create(filepath.Join(profile, name+"-"+p+".pprof"))
			if err != nil {
				tb.Fatal(err)
			}
			pprof.Lookup(p).WriteTo(f, 0)
			f.Close()
		}
	}
	per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(n) }
	return heldMemory{
		heap:       per(after.HeapInuse, before.HeapInuse),
		live:       per(after.HeapAlloc, before.HeapAlloc),
		stacks:     per(after.StackInuse, before.StackInuse),
		goroutines: float64(g1-g0) / float64(n),
	}
}

// measureHeldMemory holds n idle streams of era ("2025", "2026" or
// "both") on a server on SQLite, from a child process (heldclients: the
// clients' memory is not the server's), and measures what they cost the
// server.
func measureHeldMemory(tb testing.TB, n int, era string) heldMemory {
	st, err := sqlitestore.New(filepath.Join(tb.TempDir(), "mem.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() }) // after the server's
	url := heldServer(tb, st, 15*time.Minute)
	return memoryOf(tb, fmt.Sprintf("mcpush-%d-%s", n, era), n, func() {
		child := heldclients.Start(tb, heldclients.Options{URLs: []string{url}, N: n, Era: era, URI: ingest.EventURI("mem" + era)}, 2*time.Minute)
		tb.Cleanup(child.Stop)
		time.Sleep(2 * time.Second) // idle: the watcher at its idle pace
	})
}

// measureBareHeld is net/http's own floor: n SSE responses held open by a
// handler that writes one event and waits (for the client to leave or a
// keepalive timer), as any Go SSE server built on net/http holds them,
// measured as measureHeldMemory measures mcpush's. Its clients are raw
// TCP connections in this process that send one GET and never read: each
// adds its socket (a few hundred bytes of heap) and no goroutine.
func measureBareHeld(tb testing.TB, n int) heldMemory {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: {}\n\n"))
		http.NewResponseController(w).Flush()
		t := time.NewTimer(25 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
				w.Write([]byte(": keepalive\n\n"))
				http.NewResponseController(w).Flush()
				t.Reset(25 * time.Second)
			}
		}
	}))
	tb.Cleanup(ts.Close)
	conns := make([]net.Conn, n)
	tb.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	return memoryOf(tb, fmt.Sprintf("bare-%d", n), n, func() {
		for i := range conns {
			c, err := net.Dial("tcp", ts.Listener.Addr().String())
			if err != nil {
				tb.Fatal(err)
			}
			conns[i] = c
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: bare\r\nAccept: text/event-stream\r\n\r\n")
			// Wait for the response's headers and first event: the
			// handler holds it now.
			br := bufio.NewReaderSize(c, 16)
			if _, err := br.ReadString('{'); err != nil {
				tb.Fatal(err)
			}
		}
		time.Sleep(time.Second)
	})
}

// BenchmarkHeldStreamMemory reports the server's memory per idle held
// stream at 2,000 streams on one process, server side only (the clients
// are another process): both eras (half 2025-11-25 GET streams, half
// 2026-07-28 listen streams), then each era alone, and net/http's floor
// (net-http-floor-: the same count of SSE responses held by a handler
// that only waits). KiB/held-stream is the Go heap in use plus the
// goroutine stacks the streams added (the figure of TestIdleHeldStreamReads
// and docs/costs.md), so it counts net/http's per-connection buffers
// (4 KiB to read, 4 KiB to write, 2 KiB to chunk the response) and its
// two goroutines per connection (the one that serves the request, which
// runs the held-stream loop, and its background reader) along with
// mcpush's own; live-heap counts the live objects only, without the free
// room of their spans. stack-KiB is the floor's (11.6-12.1 KiB on
// 2026-12-02) as long as the frames under a waiting stream stay small
// enough for the serving goroutine's stack to halve back to 8 KiB (see
// heldStream.run); it was 20 KiB when they did not. Then, both eras:
// 36.8-39.4 KiB per stream (net/http's floor 25.7-25.8). docs/held-streams.md
// (Memory) says where it goes.
func BenchmarkHeldStreamMemory(b *testing.B) {
	heldclients.RaiseFileLimit()
	const n = 2000
	for _, era := range []string{"both", "2025", "2026"} {
		b.Run(era, func(b *testing.B) {
			var m heldMemory
			for b.Loop() {
				m = measureHeldMemory(b, n, era)
			}
			m.report(b, "")
		})
	}
	b.Run("net-http-floor", func(b *testing.B) {
		var m heldMemory
		for b.Loop() {
			m = measureBareHeld(b, n)
		}
		m.report(b, "")
	})
}

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/serve"
)

// BenchmarkLambdaColdStart measures a cold start: from the start of the
// bootstrap process to the first initialize answered through the fake
// Runtime API (process start, store open, runtime loop, first invoke).
func BenchmarkLambdaColdStart(b *testing.B) {
	bin := testenv.BuildBinary(b, "./functions/mcp")
	event := fixture(b, "mcp-initialize")
	dir := b.TempDir()
	var total time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		api := lambdatest.NewServer(nil)
		cmd := exec.Command(bin)
		cmd.Dir = dir
		cmd.Env = []string{
			"AWS_LAMBDA_RUNTIME_API=" + api.Addr(),
			"MCPUSH_STORE=sqlite:" + filepath.Join(dir, fmt.Sprintf("cold-%d.db", i)),
			"MCPUSH_LAMBDA_MODE=stream",
		}
		// The invocation is queued first, as Lambda has it ready when
		// the sandbox starts.
		inv := api.Invoke(event, &lambdatest.InvokeOptions{Streaming: true, Timeout: time.Minute})
		b.StartTimer()
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		r, err := inv.Wait(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		total += r.FinishedAt.Sub(start)
		b.StopTimer()
		if hr, err := r.HTTP(); err != nil || hr.StatusCode != http.StatusOK {
			b.Fatalf("initialize: %v %v", err, hr)
		}
		cmd.Process.Kill()
		cmd.Wait()
		api.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/cold-start")
}

// BenchmarkLambdaRequest compares the time of one MCP request (a ping in
// a session) through the local HTTP server and through the Lambda glue in
// both modes (event built, delivered by the fake Runtime API, response
// streamed or buffered back), and reports the per-request overhead of the
// Lambda path and its ratio to the local server.
func BenchmarkLambdaRequest(b *testing.B) {
	bin := testenv.BuildBinary(b, "./functions/mcp")
	dir := b.TempDir()
	clients := []struct {
		name string
		c    *http.Client
		url  string
	}{
		{"local", http.DefaultClient, startLocal(b, bin, filepath.Join(dir, "local.db"))},
	}
	for _, mode := range []serve.Mode{serve.ModeStream, serve.ModeBuffered} {
		f := lambdatest.StartFunction(b, bin, "MCPUSH_LAMBDA_MODE="+string(mode), "MCPUSH_AUTH=none", "MCPUSH_STORE=sqlite:"+filepath.Join(dir, string(mode)+".db"))
		tr := &lambdatest.Transport{Server: f.API, Invoke: lambdatest.InvokeOptions{Streaming: mode == serve.ModeStream, Timeout: time.Minute}}
		clients = append(clients, struct {
			name string
			c    *http.Client
			url  string
		}{string(mode), &http.Client{Transport: tr}, "https://" + lambdatest.DefaultDomain + "/mcp"})
	}
	sessions := make([]string, len(clients))
	for i, c := range clients {
		resp := mcpPost(b, c.c, c.url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
		sessions[i] = resp.Header.Get("Mcp-Session-Id")
		mcpPost(b, c.c, c.url, sessions[i], `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	per := make([]time.Duration, len(clients))
	b.ResetTimer()
	for i := range b.N {
		for j, c := range clients {
			start := time.Now()
			resp := mcpPost(b, c.c, c.url, sessions[j], `{"jsonrpc":"2.0","id":`+strconv.Itoa(i+2)+`,"method":"ping"}`)
			per[j] += time.Since(start)
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("%s: ping: %s", c.name, resp.Status)
			}
		}
	}
	n := float64(b.N)
	local := float64(per[0].Microseconds()) / n
	b.ReportMetric(local, "µs/local")
	for j := 1; j < len(clients); j++ {
		v := float64(per[j].Microseconds()) / n
		b.ReportMetric(v, "µs/"+clients[j].name)
		b.ReportMetric(v-local, "µs-overhead/"+clients[j].name)
		b.ReportMetric(v/local, "x/"+clients[j].name)
	}
}

// startLocal runs bin as the local HTTP server and returns its MCP URL.
func startLocal(b *testing.B, bin, db string) string {
	b.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(b)))
	cmd := exec.Command(bin)
	cmd.Dir = b.TempDir()
	cmd.Env = []string{"MCPUSH_ADDR=" + addr, "MCPUSH_STORE=sqlite:" + db}
	var out testutil.LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Since(start) > 30*time.Second {
			b.Fatalf("local server did not start:\n%s", out.String())
		}
	}
	return "http://" + addr + "/mcp"
}

// mcpPost posts body to url with c, in a session of 2025-11-25 when set.
func mcpPost(b *testing.B, c *http.Client, url, session, body string) *http.Response {
	b.Helper()
	var hdr []string
	if session != "" {
		hdr = []string{"Mcp-Protocol-Version", "2025-11-25"}
	}
	resp, _ := testutil.PostRead(b, c, url, session, body, hdr...)
	return resp
}

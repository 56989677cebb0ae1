//go:build linux || darwin

package main

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/eventserver"
	"github.com/mcpush/mcpush/internal/testenv"
)

// TestWatchInterrupt runs the built CLI's watch and sends it SIGINT: it
// exits 0 without waiting for the server. In the 2025 era it ends its
// session with a DELETE, which the server here holds unanswered: the
// process must exit while the DELETE is still held (counted), where an
// unbounded wait would hang until the server answers. In the 2026 era it
// must exit while its listen stream, which the server never ends, is
// open.
func TestWatchInterrupt(t *testing.T) {
	es := eventserver.Start(t, nil)
	target, _ := url.Parse(es.URL)
	var deletes, held atomic.Int32
	release := make(chan struct{})
	defer close(release)
	proxy := httputil.NewSingleHostReverseProxy(target)
	ps := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			deletes.Add(1)
			held.Add(1)
			<-release // the server never answers while the test runs
			held.Add(-1)
			return
		}
		proxy.ServeHTTP(w, r)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ps.Serve(ln)
	defer ps.Close()
	bin := testenv.BuildBinary(t, "./cmd/mcpush")

	for _, protocol := range []string{"2025", "2026"} {
		t.Run(protocol, func(t *testing.T) {
			before := deletes.Load()
			cmd := exec.Command(bin, "watch", "--topic", "orders", "--url", "http://"+ln.Addr().String()+"/mcp", "--protocol", protocol)
			cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(stderr)
			watching := false
			for !watching && lines.Scan() {
				watching = strings.Contains(lines.Text(), "mcpush: watching")
			}
			if !watching {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("watch never said it was watching (%v)", lines.Err())
			}
			go func() { // drain
				for lines.Scan() {
				}
			}()
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("watch exited with %v after SIGINT, want status 0", err)
				}
			case <-time.After(30 * time.Second): // a guard against a hang, not a measurement
				cmd.Process.Kill()
				<-exited
				t.Fatalf("watch did not exit after SIGINT (DELETEs held: %d)", held.Load())
			}
			switch protocol {
			case "2025":
				if n := deletes.Load() - before; n != 1 {
					t.Errorf("watch sent %d DELETEs on its way out, want 1 (it ends its session)", n)
				}
				if held.Load() == 0 {
					t.Error("the DELETE was answered before watch exited; the test proves nothing")
				}
			case "2026":
				if n := deletes.Load() - before; n != 0 {
					t.Errorf("watch sent %d DELETEs in the 2026 era, which has no sessions", n)
				}
			}
		})
	}
}

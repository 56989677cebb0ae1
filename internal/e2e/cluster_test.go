package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// get fetches http://addr+path and returns the body, or an error.
func get(addr, path string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func mustGet(t *testing.T, addr, path string) string {
	t.Helper()
	body, err := get(addr, path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	return body
}

func TestCluster(t *testing.T) {
	t.Setenv("MCPUSH_FROM_DEVELOPER", "leak")
	c := StartCluster(t, 3, helperOptions(t, "MCPUSH_STORE=sqlite:x.db"))

	pids := map[string]bool{}
	for i := range c.Len() {
		pids[mustGet(t, c.Addr(i), "/pid")] = true
		if got := mustGet(t, c.Addr(i), "/env?name=MCPUSH_ADDR"); got != c.Addr(i) {
			t.Errorf("process %d: MCPUSH_ADDR = %q, want %q", i, got, c.Addr(i))
		}
		if got := mustGet(t, c.Addr(i), "/env?name=MCPUSH_STORE"); got != "sqlite:x.db" {
			t.Errorf("process %d: MCPUSH_STORE = %q, want the option's", i, got)
		}
		if got := mustGet(t, c.Addr(i), "/env?name=MCPUSH_FROM_DEVELOPER"); got != "" {
			t.Errorf("process %d inherited MCPUSH_FROM_DEVELOPER=%q", i, got)
		}
		if want := "http://" + c.Addr(i) + "/mcp"; c.URL(i) != want {
			t.Errorf("URL(%d) = %q, want %q", i, c.URL(i), want)
		}
	}
	if len(pids) != 3 {
		t.Fatalf("3 processes have pids %v, want 3 distinct", pids)
	}

	old := mustGet(t, c.Addr(1), "/pid")
	if err := c.Kill(1); err != nil {
		t.Fatal(err)
	}
	if _, err := get(c.Addr(1), "/pid"); err == nil {
		t.Fatal("process 1 still answers after Kill")
	}
	if err := c.Kill(1); err != nil {
		t.Errorf("Kill of a killed process: %v", err)
	}
	if err := c.Restart(1); err != nil {
		t.Fatal(err)
	}
	if pid := mustGet(t, c.Addr(1), "/pid"); pid == old {
		t.Errorf("process 1 has pid %s after Restart, as before", pid)
	}

	// Restart of a running process kills it first.
	old = mustGet(t, c.Addr(2), "/pid")
	if err := c.Restart(2); err != nil {
		t.Fatal(err)
	}
	if pid := mustGet(t, c.Addr(2), "/pid"); pid == old {
		t.Errorf("process 2 has pid %s after Restart, as before", pid)
	}

	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for i := range c.Len() {
		if _, err := get(c.Addr(i), "/pid"); err == nil {
			t.Errorf("process %d still answers after Stop", i)
		}
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestClusterStopErrors(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		prep func(*Cluster) // before Stop
		want string
	}{
		{
			name: "non-zero exit",
			env:  []string{"E2E_HELPER_SIGTERM_EXIT=3"},
			want: "exit status 3 after SIGTERM",
		},
		{
			name: "ignores SIGTERM",
			env:  []string{"E2E_HELPER_IGNORE_SIGTERM=1"},
			want: "did not exit within",
		},
		{
			name: "exited on its own",
			prep: func(c *Cluster) {
				get(c.Addr(0), "/exit")
				<-c.procs[0].exited
			},
			want: "had exited on its own: exit status 1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := helperOptions(t, tt.env...)
			opts.StopTimeout = time.Second
			c := StartCluster(t, 1, opts)
			if tt.prep != nil {
				tt.prep(c)
			}
			err := c.Stop()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Stop() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestClusterStartFailure(t *testing.T) {
	_, err := startCluster(t, 2, helperOptions(t, "E2E_HELPER_FAIL_START=1"))
	if err == nil {
		t.Fatal("startCluster succeeded with servers that exit at start")
	}
	for _, want := range []string{"exited before it was ready: exit status 2", "helper: failing at start as asked"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("startCluster error = %v, want it to contain %q", err, want)
		}
	}
}

package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
)

// TestRunOAuth: what `make run-oauth` prints works as printed. The MCP
// server it runs answers 401 without a token, and the printed
// client-credentials `mcpush login` signs in, after which `mcpush tools`
// lists the tools; Ctrl-C (ctx) stops the server and the authorization
// server.
func TestRunOAuth(t *testing.T) {
	server := testenv.BuildBinary(t, "./functions/mcp")
	cli := testenv.BuildBinary(t, "./cmd/mcpush")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	t.Setenv("MCPUSH_STORE", "sqlite:"+filepath.Join(t.TempDir(), "mcpush.db"))

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", addr, "--", server}, pw, io.Discard)
		pw.Close()
	}()
	var printed []string
	sc := bufio.NewScanner(pr)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "then:") {
		printed = append(printed, sc.Text())
	}
	go io.Copy(io.Discard, pr)
	var login string
	for _, line := range printed {
		if strings.Contains(line, "--client-secret") {
			login, _, _ = strings.Cut(strings.TrimSpace(line), "#")
		}
	}
	if login == "" {
		t.Fatalf("no client-credentials login command in what run printed:\n%s", strings.Join(printed, "\n"))
	}

	url := "http://" + addr + "/mcp"
	var status int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err == nil {
			status = resp.StatusCode
			resp.Body.Close()
			break
		}
	}
	if status != http.StatusUnauthorized {
		t.Fatalf("POST /mcp without a token: %d; want 401", status)
	}

	logins := filepath.Join(t.TempDir(), "logins.json")
	mcpush := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, cli, args...)
		cmd.Env = append(cmd.Environ(), "MCPUSH_LOGINS="+logins)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := mcpush("tools", "--url", url); err == nil || !strings.Contains(out, "mcpush login") {
		t.Errorf("tools before login: %v\n%s\nwant a failure that names mcpush login", err, out)
	}
	args := strings.Fields(login)
	if args[0] != "mcpush" {
		t.Fatalf("printed login %q does not start with mcpush", login)
	}
	if out, err := mcpush(args[1:]...); err != nil {
		t.Fatalf("%s: %v\n%s", login, err, out)
	}
	out, err := mcpush("tools", "--url", url)
	if err != nil || !strings.Contains(out, "events_recent") {
		t.Fatalf("tools after login: %v\n%s", err, out)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after Ctrl-C: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not end within 15 s of Ctrl-C")
	}
}

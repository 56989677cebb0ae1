package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/mcpush/mcpush/internal/heldclients"
	"github.com/mcpush/mcpush/internal/moto"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary double as a tiny stand-in server process
// (E2E_HELPER=server), so the harness can be tested without mcpush itself.
func TestMain(m *testing.M) {
	heldclients.Main() // BenchmarkHeldStreamsLoad's clients
	if os.Getenv("E2E_HELPER") == "server" {
		os.Exit(helperServer())
	}
	code := m.Run()
	moto.Stop()
	os.Exit(code)
}

// helperOptions returns cluster options that run the helper server with
// the given extra environment.
func helperOptions(t *testing.T, env ...string) *ClusterOptions {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &ClusterOptions{
		Binary:       self,
		Env:          append([]string{"E2E_HELPER=server"}, env...),
		ReadyPath:    "/healthz",
		ReadyTimeout: 10 * time.Second,
		StopTimeout:  5 * time.Second,
	}
}

// helperServer serves on MCPUSH_ADDR:
//   - /healthz: 200
//   - /pid: the process id
//   - /env?name=NAME: the value of an environment variable
//   - /exit: exits with status 1
//   - /mcp: just enough MCP (initialize, ping, 202 for notifications,
//     405 for GET) for the conformance suite's ping scenario to pass.
//
// On SIGTERM it exits with E2E_HELPER_SIGTERM_EXIT (default 0), or ignores
// the signal if E2E_HELPER_IGNORE_SIGTERM=1. With E2E_HELPER_FAIL_START=1
// it exits at once with status 2.
func helperServer() int {
	if os.Getenv("E2E_HELPER_FAIL_START") == "1" {
		fmt.Fprintln(os.Stderr, "helper: failing at start as asked")
		return 2
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /pid", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, os.Getpid())
	})
	mux.HandleFunc("GET /env", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, os.Getenv(r.FormValue("name")))
	})
	mux.HandleFunc("GET /exit", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(os.Stderr, "helper: exiting as asked")
		os.Exit(1)
	})
	mux.HandleFunc("/mcp", helperMCP)
	srv := &http.Server{Addr: os.Getenv("MCPUSH_ADDR"), Handler: mux}

	code := 0
	if os.Getenv("E2E_HELPER_IGNORE_SIGTERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
	} else {
		code, _ = strconv.Atoi(os.Getenv("E2E_HELPER_SIGTERM_EXIT"))
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		go func() {
			<-sigs
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			srv.Shutdown(ctx)
		}()
	}
	fmt.Fprintf(os.Stderr, "helper: listening on %s\n", srv.Addr)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "helper: stopped")
	return code
}

// helperMCP answers MCP requests statelessly: any process can serve any
// request.
func helperMCP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		return
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if msg.ID == nil || msg.Method == "" { // a notification or a response
		w.WriteHeader(http.StatusAccepted)
		return
	}
	reply := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
	switch msg.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "helper-session")
		reply["result"] = map[string]any{
			"protocolVersion": msg.Params.ProtocolVersion,
			"capabilities":    map[string]any{},
			"serverInfo":      map[string]any{"name": "e2e-helper", "version": "0.0.0"},
		}
	case "ping":
		reply["result"] = map[string]any{}
	default:
		reply["error"] = map[string]any{"code": -32601, "message": "method not found: " + msg.Method}
	}
	if !strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.WriteHeader(http.StatusNotAcceptable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(reply)
}

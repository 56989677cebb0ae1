package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// builds caches BuildBinary results for the life of the test process,
// keyed by package path.
var builds sync.Map // string -> func() (string, error)

// BuildBinary builds the main package pkg (a path relative to the module
// root, such as "./functions/mcp") with the build tags (none: the
// production build) once per test process and returns the path of the
// executable. The binary is built with -race when the test
// binary was (RaceEnabled), so data races in server processes are reported
// too: a race-enabled process that saw a race exits with status 66.
//
// Binaries are written under the user cache directory
// (mcpush-test/<hash of module root and package>/), replaced atomically on
// each build, so concurrent test processes can share them and nothing
// accumulates. A build failure fails the test with the compiler output.
func BuildBinary(t testing.TB, pkg string, tags ...string) string {
	t.Helper()
	root := RepoRoot(t)
	key := pkg + "\x00" + strings.Join(tags, ",")
	build, _ := builds.LoadOrStore(key, sync.OnceValues(func() (string, error) {
		return buildBinary(root, pkg, tags, RaceEnabled)
	}))
	bin, err := build.(func() (string, error))()
	if err != nil {
		t.Fatalf("testenv.BuildBinary(%q): %v", pkg, err)
	}
	return bin
}

// BuildBinaryNoRace is BuildBinary without -race even when the test binary
// has it, for tests that measure a process's memory (the race detector
// multiplies it).
func BuildBinaryNoRace(t testing.TB, pkg string) string {
	t.Helper()
	root := RepoRoot(t)
	build, _ := builds.LoadOrStore(pkg+"\x00norace", sync.OnceValues(func() (string, error) {
		return buildBinary(root, pkg, nil, false)
	}))
	bin, err := build.(func() (string, error))()
	if err != nil {
		t.Fatalf("testenv.BuildBinaryNoRace(%q): %v", pkg, err)
	}
	return bin
}

func buildBinary(root, pkg string, tags []string, race bool) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	args := []string{"build"}
	if race {
		args = append(args, "-race")
	}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256([]byte(root + "\x00" + pkg + "\x00" + strings.Join(args, " ")))
	dir := filepath.Join(cache, "mcpush-test", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := path.Base(pkg)
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d", name, os.Getpid()))
	cmd := exec.Command(goBin, append(args, "-o", tmp, pkg)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
	}
	bin := filepath.Join(dir, name)
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for
// a process that must be told a concrete port and keep it across restarts.
//
// The port is chosen at random below the kernel's ephemeral range, so that
// the outgoing connections of the test (which take ephemeral ports) cannot
// occupy it while its process is down between a kill and a restart. Another
// test process may still take it in between; whoever binds it should report
// a bind failure clearly.
func FreePort(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	for range 100 {
		port := minPort + rand.IntN(low-minPort)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			l.Close()
			return port
		}
	}
	t.Fatalf("testenv.FreePort: no free port in [%d, %d)", minPort, low)
	return 0
}

// minPort is the lowest port FreePort returns.
const minPort = 20000

// ephemeralLow returns the first port of the kernel's ephemeral range
// (Linux default 32768), never below minPort+1000.
func ephemeralLow() int {
	low := 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(data)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	return max(low, minPort+1000)
}

// SilentEndpoint returns the URL ("http://127.0.0.1:PORT") of a listener
// that accepts connections and never answers, closed when t ends: a store
// or server that hangs, which only a timeout ends.
func SilentEndpoint(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return "http://" + ln.Addr().String()
}

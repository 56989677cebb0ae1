package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestRepoRoot(t *testing.T) {
	root := RepoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.HasPrefix(string(data), "module github.com/mcpush/mcpush\n") {
		t.Fatalf("RepoRoot = %s, whose go.mod is %.40q (%v)", root, data, err)
	}
}

func TestBuildBinary(t *testing.T) {
	bin := BuildBinary(t, "./internal/testenv/testdata/hello")
	out, err := exec.Command(bin).Output()
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("%s printed %q, %v; want hello", bin, out, err)
	}
	if again := BuildBinary(t, "./internal/testenv/testdata/hello"); again != bin {
		t.Errorf("second BuildBinary = %s, want the cached %s", again, bin)
	}
}

func TestFreePort(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		port := FreePort(t)
		if port < minPort || port >= ephemeralLow() {
			t.Errorf("FreePort() = %d, want it in [%d, %d)", port, minPort, ephemeralLow())
		}
		seen[port] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("FreePort() = %d, which cannot be bound: %v", port, err)
		}
		l.Close()
	}
	if len(seen) < 15 {
		t.Errorf("20 calls of FreePort returned only %d distinct ports", len(seen))
	}
}

// TestNode checks the installed Node.js test dependencies.
func TestNode(t *testing.T) {
	node := Node22(t)
	for _, v := range []string{Conformance0116, Conformance020Alpha12} {
		script := Conformance(t, v)
		out, err := exec.Command(node, script, "--version").Output()
		if err != nil || strings.TrimSpace(string(out)) != v {
			t.Errorf("%s --version = %q, %v; want %s", script, out, err, v)
		}
	}
}

// TestRequireComponent runs requireComponentHelper in a child process with
// and without CI=true.
func TestRequireComponent(t *testing.T) {
	if os.Getenv("TESTENV_HELPER") == "1" {
		RequireComponent(t, "the frobnicator", os.ErrNotExist)
		t.Fatal("RequireComponent returned")
	}
	for _, tt := range []struct {
		ci, want string
	}{
		{"true", "--- FAIL"},
		{"", "--- SKIP"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRequireComponent$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_HELPER=1", "CI="+tt.ci)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), tt.want) || !strings.Contains(string(out), "the frobnicator") ||
			!strings.Contains(string(out), "CI=true") {
			t.Errorf("with CI=%q: got output\n%s\nwant %q, the component's name and a mention of CI=true", tt.ci, out, tt.want)
		}
	}
}

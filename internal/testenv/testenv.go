// Package testenv locates and prepares the real components that mcpush's
// tests run against: the repository root, Node.js 22 and the MCP
// conformance suites installed under test/node, server binaries built from
// this module, and free TCP ports.
//
// A component that is missing (Node 22 not installed, npm packages absent)
// goes through RequireComponent: the test is skipped on a developer machine
// and fails under CI=true, so CI can never pass by skipping.
//
// All functions are safe for concurrent use by parallel tests.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// NodeDirEnv names the environment variable that overrides the directory
// holding the Node.js test dependencies (package.json and node_modules).
// The Makefile sets it; by default it is test/node under the repository root.
const NodeDirEnv = "MCPUSH_NODE_DIR"

// InCI reports whether the tests run under CI (CI=true), where a missing
// component is a failure instead of a skip.
func InCI() bool {
	return os.Getenv("CI") == "true"
}

// RequireComponent stops t when err reports that the real component name is
// unavailable: under CI=true the test fails, elsewhere it is skipped with a
// message saying that CI would fail. It does nothing when err is nil.
func RequireComponent(t testing.TB, name string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if InCI() {
		t.Fatalf("%s is required under CI=true but unavailable: %v", name, err)
	}
	t.Skipf("skipping: %s unavailable: %v (under CI=true this fails; `make deps` installs the test dependencies)", name, err)
}

var repoRoot = sync.OnceValues(func() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod in the working directory or any parent")
		}
		dir = parent
	}
})

// RepoRoot returns the module root: the nearest directory at or above the
// working directory (a test's package directory) that holds go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("testenv: locating the repository root: %v", err)
	}
	return root
}

// NodeDir returns the directory holding the Node.js test dependencies
// (MCPUSH_NODE_DIR, default test/node under the repository root). It checks
// that the npm packages are installed; if not, it calls RequireComponent.
func NodeDir(t testing.TB) string {
	t.Helper()
	dir, err := LookupNodeDir()
	if dir == "" {
		t.Fatalf("testenv: %v", err)
	}
	RequireComponent(t, "npm test dependencies", err)
	return dir
}

// LookupNodeDir is NodeDir outside a test: the directory, and an error
// if its npm packages are not installed (the directory is returned
// anyway, unless the repository root cannot be found).
func LookupNodeDir() (string, error) {
	dir := os.Getenv(NodeDirEnv)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", fmt.Errorf("locating the repository root: %w", err)
		}
		dir = filepath.Join(root, "test", "node")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		return dir, fmt.Errorf("%s/node_modules: %w", dir, err)
	}
	return dir, nil
}

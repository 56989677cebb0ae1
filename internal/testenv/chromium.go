package testenv

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

// ChromiumEnv names the environment variable that overrides the Chromium
// binary the browser tests drive (default: chromium on PATH, Debian's
// package, which .ci/run installs).
const ChromiumEnv = "MCPUSH_CHROMIUM"

// Chromium returns the path of a Chromium binary for headless browser
// tests: $MCPUSH_CHROMIUM, or chromium or chromium-browser on PATH. If
// there is none, it calls RequireComponent: the test is skipped on a
// developer machine and fails under CI=true.
func Chromium(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(ChromiumEnv); bin != "" {
		_, err := os.Stat(bin)
		RequireComponent(t, "Chromium ("+ChromiumEnv+")", err)
		return bin
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if bin, err := exec.LookPath(name); err == nil {
			return bin
		}
	}
	RequireComponent(t, "Chromium", errors.New("no chromium or chromium-browser on PATH and "+ChromiumEnv+" unset (Debian: apt-get install chromium; .ci/run installs it)"))
	return ""
}

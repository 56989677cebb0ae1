//go:build !linux

package rie

import (
	"errors"
	"testing"

	"github.com/mcpush/mcpush/internal/testenv"
)

// TestEmulator stands for the emulator tests (rie_test.go), which need a
// Linux host to run the linux bootstraps: it fails under CI=true and is
// skipped elsewhere.
func TestEmulator(t *testing.T) {
	testenv.RequireComponent(t, "a Linux host (the emulator tests run linux bootstraps)", errors.New("not Linux"))
}

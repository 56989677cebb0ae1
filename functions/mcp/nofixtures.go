//go:build !conformance

package main

import "fmt"

// fixtureSet fails: this build has no fixtures (see fixtures.go).
func fixtureSet(name string) (*fixtures, error) {
	return nil, fmt.Errorf("MCPUSH_FIXTURES=%q: this binary has no test fixtures (they are built in with -tags conformance)", name)
}

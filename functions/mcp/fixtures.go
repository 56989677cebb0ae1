//go:build conformance

package main

import (
	"fmt"

	"github.com/mcpush/mcpush/internal/conformance"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// fixtureSet returns the fixtures MCPUSH_FIXTURES names. Only test builds
// (-tags conformance, as internal/e2e builds the server) have any: the
// production binary carries no fixture code.
func fixtureSet(name string) (*fixtures, error) {
	if name != "conformance" {
		return nil, fmt.Errorf("MCPUSH_FIXTURES=%q: the only fixture set is \"conformance\"", name)
	}
	return &fixtures{
		options:  func(o *mcp.ServerOptions) { o.CompletionHandler = conformance.Complete },
		register: conformance.Register,
	}, nil
}

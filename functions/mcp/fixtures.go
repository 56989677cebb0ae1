//go:build conformance

package main

import (
	"context"
	"fmt"

	"github.com/mcpush/mcpush/internal/conformance"
	"github.com/mcpush/mcpush/internal/eventsconformance"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// fixtureSet returns the fixtures MCPUSH_FIXTURES names. Only test builds
// (-tags conformance, as internal/e2e builds the server) have any: the
// production binary carries no fixture code.
//
// "conformance" is the core suite's fixtures (package conformance) and
// the Events suite's (package eventsconformance: its event types, an
// event every second on conformance.events, and the events_conformance_*
// diagnostic controls).
func fixtureSet(name string) (*fixtures, error) {
	if name != "conformance" {
		return nil, fmt.Errorf("MCPUSH_FIXTURES=%q: the only fixture set is \"conformance\"", name)
	}
	ctl := eventsconformance.New()
	return &fixtures{
		options: func(o *mcp.ServerOptions) {
			o.CompletionHandler = conformance.Complete
			ctl.Configure(o)
		},
		register: func(s *mcp.Server, store notify.Store) error {
			conformance.Register(s, store)
			st, ok := store.(eventsconformance.Store)
			if !ok {
				return fmt.Errorf("MCPUSH_FIXTURES=conformance: the store (%T) keeps no webhook subscriptions", store)
			}
			ctl.Register(s, st)
			ctx := context.Background() // the process's life
			if err := eventsconformance.Setup(ctx, st); err != nil {
				return err
			}
			return ctl.Emit(ctx, st, eventsconformance.EmitEvery)
		},
	}, nil
}

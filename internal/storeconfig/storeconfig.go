// Package storeconfig opens the notify.Store named by a store spec, the
// value of MCPUSH_STORE: "sqlite:PATH" or "dynamodb:TABLE". Both mains
// use it, so the server and the SNS ingest agree on what a spec means.
package storeconfig

import (
	"context"
	"fmt"
	"strings"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// DefaultSpec is the store used when MCPUSH_STORE is not set.
const DefaultSpec = "sqlite:.mcpush/mcpush.db"

// Options tune Open.
type Options struct {
	// CreateTable creates a missing DynamoDB table (local use only; in
	// AWS the SAM template owns the table).
	CreateTable bool
}

// Open opens the store named by spec.
func Open(ctx context.Context, spec string, opts *Options) (notify.Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	kind, arg, ok := strings.Cut(spec, ":")
	if !ok || arg == "" {
		return nil, fmt.Errorf("store spec %q: want sqlite:PATH or dynamodb:TABLE", spec)
	}
	switch kind {
	case "sqlite":
		st, err := sqlitestore.New(arg, nil)
		if err != nil {
			return nil, fmt.Errorf("opening SQLite store %s: %w", arg, err)
		}
		return st, nil
	case "dynamodb":
		return openDynamo(ctx, arg, opts)
	}
	return nil, fmt.Errorf("store spec %q: unknown kind %q (want sqlite or dynamodb)", spec, kind)
}

func openDynamo(ctx context.Context, table string, opts *Options) (notify.Store, error) {
	return nil, fmt.Errorf("dynamodb store %q: not available yet", table)
}

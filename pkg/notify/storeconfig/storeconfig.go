// Package storeconfig opens the notify.Store named by a store spec, the
// value of MCPUSH_STORE: "sqlite:PATH" or "dynamodb:TABLE". Both mains
// use it, so the server and the SNS ingest agree on what a spec means.
//
// With Options.StatsDir (MCPUSH_STORE_STATS in the mains, a diagnostic)
// the store's requests are counted and written to a stats file in that
// directory, one file per process (package internal/storecount).
//
// Builds with the nosqlite tag (the Lambda binaries) leave the SQLite
// store out: in Lambda a SQLite file would be private to one instance.
package storeconfig

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// DefaultSpec is the store used when MCPUSH_STORE is not set.
const DefaultSpec = "sqlite:.mcpush/mcpush.db"

// Options tune Open.
type Options struct {
	// CreateTable creates a missing DynamoDB table (local use only; in
	// AWS the SAM template owns the table).
	CreateTable bool
	// DynamoDB, when set, is the client for a dynamodb: spec; otherwise
	// one is built from the standard AWS configuration (environment,
	// shared files, instance role), which honours AWS_ENDPOINT_URL_DYNAMODB.
	DynamoDB dynamostore.API
	// StatsDir, when set, counts the store's requests by operation and
	// writes them to a new stats file in this directory, every half
	// second and when the store is closed (storecount.Record): a
	// diagnostic for load tests, which add up the files of their
	// processes.
	StatsDir string
	// StatsName names the process in its stats file; default "store".
	StatsName string
	// Logger reports the stats writes that fail; default none.
	Logger *slog.Logger
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
	var (
		st  notify.Store
		err error
	)
	switch kind {
	case "sqlite":
		st, err = openSQLite(arg)
	case "dynamodb":
		st, err = openDynamo(ctx, arg, opts)
	default:
		return nil, fmt.Errorf("store spec %q: unknown kind %q (want sqlite or dynamodb)", spec, kind)
	}
	if err != nil || opts.StatsDir == "" {
		return st, err
	}
	counted, _, err := storecount.Record(st, opts.StatsDir, &storecount.RecordOptions{Name: opts.StatsName, Logger: opts.Logger})
	if err != nil {
		st.Close()
		return nil, err
	}
	return counted, nil
}

func openDynamo(ctx context.Context, table string, opts *Options) (notify.Store, error) {
	api := opts.DynamoDB
	if api == nil {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamodb store %q: loading AWS configuration: %w", table, err)
		}
		api = dynamodb.NewFromConfig(cfg)
	}
	if opts.CreateTable {
		client, ok := api.(dynamostore.TableAPI)
		if !ok {
			return nil, fmt.Errorf("dynamodb store %q: creating the table needs a client with CreateTable", table)
		}
		if err := dynamostore.CreateTable(ctx, client, table); err != nil {
			return nil, fmt.Errorf("dynamodb store %q: creating the table: %w", table, err)
		}
	}
	return dynamostore.New(api, table, nil), nil
}

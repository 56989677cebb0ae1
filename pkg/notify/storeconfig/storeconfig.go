// Package storeconfig opens the notify.Store named by a store spec, the
// value of MCPUSH_STORE: "sqlite:PATH" or "dynamodb:TABLE". Both mains
// use it, so the server and the SNS ingest agree on what a spec means.
//
// Builds with the nosqlite tag (the Lambda binaries) leave the SQLite
// store out: in Lambda a SQLite file would be private to one instance.
package storeconfig

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

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
		return openSQLite(arg)
	case "dynamodb":
		return openDynamo(ctx, arg, opts)
	}
	return nil, fmt.Errorf("store spec %q: unknown kind %q (want sqlite or dynamodb)", spec, kind)
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

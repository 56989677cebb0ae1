// Package storeconfig opens the notify.Store named by a store spec, the
// value of MCPUSH_STORE: "sqlite:PATH" or "dynamodb:TABLE". Both mains
// use it, so the server and the SNS ingest agree on what a spec means.
//
// Open checks the store before it returns, so that a process with a wrong
// store set-up fails at start-up, within seconds, with an error that says
// what to fix, rather than at its first request: a DynamoDB table must
// exist and answer DescribeTable within Options.CheckTimeout (the error
// names the table, the region and the endpoint, and MCPUSH_CREATE_TABLE=1
// when the table is missing); an SQLite file must be writable. An error
// that may go away by itself (an unreachable or throttled endpoint, a
// database locked by another process) is notify.ErrUnavailable; a
// missing table or a bad spec is not.
//
// Builds with the nosqlite tag (the Lambda binaries) leave the SQLite
// store out: in Lambda a SQLite file would be private to one instance.
package storeconfig

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// Options tune Open.
type Options struct {
	// CreateTable creates a missing DynamoDB table (local use only; in
	// AWS the SAM template owns the table).
	CreateTable bool
	// DynamoDB, when set, is the client for a dynamodb: spec; otherwise
	// one is built from the standard AWS configuration (environment,
	// shared files, instance role), which honours AWS_ENDPOINT_URL_DYNAMODB.
	DynamoDB dynamostore.API
	// CheckTimeout bounds the start-up check of a DynamoDB table
	// (DescribeTable, with the SDK's retries). Default
	// DefaultCheckTimeout.
	CheckTimeout time.Duration
	// FeedShards is a DynamoDB store's change feed shards
	// (dynamostore.Options.FeedShards, MCPUSH_FEED_SHARDS); zero means
	// dynamostore.DefaultFeedShards. SQLite ignores it.
	FeedShards int
}

// DefaultCheckTimeout is the default Options.CheckTimeout: a reachable
// DynamoDB endpoint answers in milliseconds; an unreachable one (no
// endpoint locally, so the SDK looks for instance credentials, or a
// firewalled one) would otherwise hang the first request for 20 s.
const DefaultCheckTimeout = 5 * time.Second

// Describe returns spec as a person should see it where a program says
// which store it uses: a SQLite path made absolute (a relative path is
// relative to the current directory, so that a program started elsewhere
// opens another store), anything else as it is.
func Describe(spec string) string {
	if path, ok := strings.CutPrefix(spec, "sqlite:"); ok && path != "" {
		if abs, err := filepath.Abs(path); err == nil {
			return "sqlite:" + abs
		}
	}
	return spec
}

// Store is what both stores (sqlitestore.Store, dynamostore.Store)
// implement, and so what Open returns: the notify.Store contract with
// every capability beside it. Its consumers take the part they need
// through interfaces of their own (mcp.Store, ingest.Store).
type Store interface {
	notify.Store
	notify.TaskStore
	notify.RateCounter
	notify.SessionCounter
	notify.SessionReclaimer
	notify.ProfileLister
	notify.SharedKeys
	notify.TopicHeads
	notify.WebhookStore
}

var _ Store = (*dynamostore.Store)(nil)

// Open opens the store named by spec.
func Open(ctx context.Context, spec string, opts *Options) (Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	kind, arg, ok := strings.Cut(spec, ":")
	if !ok || arg == "" {
		return nil, fmt.Errorf("store spec %q: want sqlite:PATH or dynamodb:TABLE", spec)
	}
	switch kind {
	case "sqlite":
		return openSQLite(ctx, arg)
	case "dynamodb":
		return openDynamo(ctx, arg, opts)
	}
	return nil, fmt.Errorf("store spec %q: unknown kind %q (want sqlite or dynamodb)", spec, kind)
}

func openDynamo(ctx context.Context, table string, opts *Options) (Store, error) {
	api := opts.DynamoDB
	if api == nil {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamodb store %q: loading AWS configuration: %w", table, err)
		}
		api = dynamodb.NewFromConfig(cfg)
	}
	client, ok := api.(dynamostore.TableAPI)
	if opts.CreateTable {
		if !ok {
			return nil, fmt.Errorf("dynamodb store %q: creating the table needs a client with CreateTable", table)
		}
		if err := dynamostore.CreateTable(ctx, client, table); err != nil {
			return nil, fmt.Errorf("%s: creating the table: %w", where(table, api), err)
		}
	}
	if ok {
		timeout := opts.CheckTimeout
		if timeout <= 0 {
			timeout = DefaultCheckTimeout
		}
		if err := checkTable(ctx, client, table, timeout); err != nil {
			return nil, fmt.Errorf("%s: %w", where(table, api), err)
		}
	}
	dopts := &dynamostore.Options{FeedShards: opts.FeedShards}
	if err := dynamostore.CheckOptions(dopts); err != nil {
		return nil, fmt.Errorf("dynamodb store %q: %w", table, err)
	}
	return dynamostore.New(api, table, dopts), nil
}

// checkTable makes sure that table exists and is reachable: one
// DescribeTable, within timeout.
func checkTable(ctx context.Context, client dynamostore.TableAPI, table string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var notFound *types.ResourceNotFoundException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &notFound):
		return errors.New("the table does not exist: create it (locally: set MCPUSH_CREATE_TABLE=1; in AWS the SAM template creates it) or fix MCPUSH_STORE, the region or the endpoint")
	case ctx.Err() != nil:
		return fmt.Errorf("%w: no answer from DescribeTable within %v (is the endpoint right and reachable? locally set AWS_ENDPOINT_URL_DYNAMODB): %w", notify.ErrUnavailable, timeout, err)
	}
	var maxAttempts *retry.MaxAttemptsError
	if errors.As(err, &maxAttempts) || retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary {
		return fmt.Errorf("%w: DescribeTable: %w", notify.ErrUnavailable, err)
	}
	return fmt.Errorf("DescribeTable: %w", err)
}

// where names the table of a dynamodb store with the region and endpoint
// its client uses, for errors.
func where(table string, api dynamostore.API) string {
	region, endpoint := "unknown", "unknown"
	if c, ok := api.(*dynamodb.Client); ok {
		o := c.Options()
		region = o.Region
		if region == "" {
			region = "none (set AWS_REGION)"
		}
		switch {
		case o.BaseEndpoint != nil:
			endpoint = *o.BaseEndpoint
		case o.Region != "":
			endpoint = "https://dynamodb." + o.Region + ".amazonaws.com (the AWS default; locally set AWS_ENDPOINT_URL_DYNAMODB)"
		default:
			endpoint = "none"
		}
	}
	return fmt.Sprintf("dynamodb store: table %q (region %s, endpoint %s)", table, region, endpoint)
}

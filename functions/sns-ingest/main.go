// Command sns-ingest writes SNS messages to the mcpush store: external
// events, which it appends to their topic's log and pushes to the sessions
// subscribed to events://<topic>, and changes to the dynamic registries of
// tools, resources and prompts. See package ingest for the message format.
// Webhook delivery is handed to a queue (package delivery): with
// MCPUSH_DELIVERY_QUEUE_URL each event's fan-out is one SQS task.
//
// In Lambda the same binary is three functions' handler (template.yaml):
// SNS events (IngestFunction), the delivery queue's SQS events
// (DeliveryFunction: delivery.Engine.HandleSQS, answering its batch item
// failures) and the EventBridge schedule of the repair sweep.
//
// In Lambda (AWS_LAMBDA_RUNTIME_API set) it handles events.SNSEvent: an
// invocation fails when a record was rejected as malformed or failed in
// the store, so that SNS retries it and finally sends it to the
// dead-letter queue, with an error message that says which (a store
// failure alone is an ingest.StoreFailure). A store that fails its
// start-up check is an init error (docs/lambda.md). Elsewhere it is a CLI:
//
//	sns-ingest -event FILE            # an SNS event JSON as Lambda delivers it; - for stdin
//	sns-ingest -topic T -message M [-subject S] [-message-id ID]
//
// The CLI prints one line of JSON, the ingest.Summary, and exits 0 when
// every record went through, 1 when a record was rejected as malformed, 2
// on a usage or configuration error, 3 when the store failed (busy,
// unreachable, timed out: running the same command again is safe). Logs are JSON on stderr in both modes;
// the CLI logs a warning when its SQLite file did not exist (a new, empty
// store, which no server reads unless its MCPUSH_STORE names that file).
//
// Environment (docs/configuration.md), read and checked before the store
// is opened; a bad value is an init error in Lambda and exit 2 in the
// CLI:
//
//   - MCPUSH_STORE (sqlite:PATH or dynamodb:TABLE; default
//     sqlite:.mcpush/mcpush.db, required in Lambda), MCPUSH_CREATE_TABLE=1
//     (create a missing DynamoDB table; local use only) and
//     MCPUSH_FEED_SHARDS (the DynamoDB change feed's shards, the same as
//     the servers'), as for the MCP server;
//   - for webhook delivery: MCPUSH_DELIVERY_QUEUE_URL (the SQS queue of
//     delivery tasks; its endpoint follows AWS_ENDPOINT_URL_SQS); the keys
//     that seal webhook secrets, as for the MCP server: MCPUSH_STATE_KEYS
//     or MCPUSH_STATE_KEYS_SECRET (a Secrets Manager secret), else the key
//     shared through the store; MCPUSH_WEBHOOK_ALLOW, the origins exempt
//     from the webhook https and address checks; MCPUSH_WEBHOOK_PER_ORIGIN;
//   - MCPUSH_REGISTRY_TOOLS, the comma-separated tools a tools registry
//     item may name (default: the event tools), for a server with tools
//     of its own;
//   - MCPUSH_STORE_STATS=DIR, a diagnostic: count the store requests and
//     write them to a file in DIR.
//
// Package envconfig reads them, for this command as for the MCP server.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
	"github.com/mcpush/mcpush/pkg/serve/initerror"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if api := envconfig.RuntimeAPI(os.Getenv); api != "" {
		// Every failure here is an init error: SNS retries the
		// invocation, and the message says what to fix.
		initError := func(msg string, err error) {
			logger.Error(msg, "err", err)
			if rerr := initerror.Report(api, err); rerr != nil {
				logger.Error("reporting the init error", "err", rerr)
			}
			os.Exit(1)
		}
		c, err := readConfig(os.Getenv)
		if err != nil {
			initError("sns-ingest: configuration", err)
		}
		if err := setupMetrics(os.Getenv, os.Stdout); err != nil {
			initError("sns-ingest: configuration", err)
		}
		store, err := openStore(context.Background(), c.store, logger)
		if err != nil {
			initError("sns-ingest: opening the store", err)
		}
		var (
			in  = ingest.New(store, &ingest.Options{Logger: logger, Tools: c.tools})
			eng *delivery.Engine
		)
		q, err := deliveryQueue(context.Background(), c)
		if err != nil {
			initError("sns-ingest: webhook delivery", err)
		}
		if q != nil {
			if eng, err = engine(context.Background(), c, store, q, logger); err != nil {
				initError("sns-ingest: webhook delivery", err)
			}
			in = ingest.New(store, &ingest.Options{Logger: logger, Tools: c.tools, Delivery: q})
		} else {
			logger.Warn("sns-ingest: no webhook delivery: MCPUSH_DELIVERY_QUEUE_URL is not set")
		}
		lambda.StartHandlerFunc(metrics.Wrap(handler(in, eng, logger)))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], &env{
		getenv: os.Getenv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
		logger: logger, now: time.Now,
	})
	stop()
	os.Exit(code)
}

// env is what the CLI takes from its process; tests supply their own.
type env struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
	logger         *slog.Logger
	now            func() time.Time
}

// openStore opens the store the environment names (envconfig.ReadStore,
// as the MCP server reads it), counted into a stats file when
// MCPUSH_STORE_STATS is set.
func openStore(ctx context.Context, c envconfig.Store, logger *slog.Logger) (storeconfig.Store, error) {
	store, err := storecount.Open(ctx, c, "sns-ingest", logger)
	if err != nil {
		return nil, err
	}
	logger.Info("sns-ingest: store", "store", storeconfig.Describe(c.Spec))
	return store, nil
}

// invocation is what tells the function's three kinds of invocation
// apart: an SNS event (Records of EventSource aws:sns), an SQS event of
// the webhook delivery queue (Records of eventSource aws:sqs), or the
// EventBridge Scheduler's event of the repair sweep (template.yaml).
type invocation struct {
	Records []struct {
		// EventSource matches SNS's "EventSource" and SQS's
		// "eventSource" alike (encoding/json matches names without
		// regard to case).
		EventSource string `json:"eventSource"`
	} `json:"Records"`
	Source     string `json:"source"`
	DetailType string `json:"detail-type"`
}

// sweepResult is what a scheduled sweep answers.
type sweepResult struct {
	Sweep struct {
		Topics int `json:"topics"` // fan-out tasks enqueued
	} `json:"sweep"`
}

// handler serves SNS events with in, the delivery queue's SQS events with
// eng, and scheduled events with a sweep of eng (nil: no webhook
// delivery).
func handler(in *ingest.Ingester, eng *delivery.Engine, logger *slog.Logger) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var inv invocation
		if err := json.Unmarshal(raw, &inv); err != nil {
			return nil, fmt.Errorf("sns-ingest: an invocation that is not a JSON object: %w", err)
		}
		switch {
		case len(inv.Records) > 0 && inv.Records[0].EventSource == "aws:sqs":
			if eng == nil {
				return nil, errors.New("sns-ingest: an SQS event, but webhook delivery is off (MCPUSH_DELIVERY_QUEUE_URL is not set)")
			}
			var ev events.SQSEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, fmt.Errorf("sns-ingest: SQS event: %w", err)
			}
			resp, c := eng.HandleSQS(ctx, ev)
			logger.Info("webhook delivery", "tasks", len(ev.Records), "failed", len(resp.BatchItemFailures), "counts", c)
			if resp.BatchItemFailures == nil {
				resp.BatchItemFailures = []events.SQSBatchItemFailure{}
			}
			return resp, nil
		case len(inv.Records) == 0 && (inv.Source == "aws.scheduler" || inv.Source == "aws.events" || inv.DetailType == "Scheduled Event"):
			var res sweepResult
			if eng == nil {
				return res, nil
			}
			n, err := eng.Sweep(ctx)
			res.Sweep.Topics = n
			logger.Info("webhook sweep", "topics", n, "err", err)
			return res, err
		}
		var ev events.SNSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("sns-ingest: SNS event: %w", err)
		}
		sum, err := in.Handle(ctx, ev)
		return &sum, err
	}
}

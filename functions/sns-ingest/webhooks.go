package main

import (
	"context"
	"fmt"
	"log/slog"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/mcpush/mcpush/internal/statekeys"
	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// config is the command's environment, read and checked (package
// envconfig, as functions/mcp reads it) before the store is opened, so
// that a bad value is reported as itself, never hidden behind a store
// that is also unreachable.
type config struct {
	store    envconfig.Store
	keys     envconfig.StateKeys // for webhook delivery
	allow    []webhook.Origin    // MCPUSH_WEBHOOK_ALLOW
	delivery envconfig.Delivery  // MCPUSH_DELIVERY_QUEUE_URL, MCPUSH_WEBHOOK_PER_ORIGIN
	errors   string              // MCPUSH_EVENTS_ERRORS: the terminated envelopes' codes
	tools    []string            // MCPUSH_REGISTRY_TOOLS
}

// readConfig reads the command's environment through getenv. Its errors
// are *envconfig.Error.
func readConfig(getenv func(string) string) (config, error) {
	var (
		c   config
		err error
	)
	if c.store, err = envconfig.ReadStore(getenv); err != nil {
		return config{}, err
	}
	if c.keys, err = envconfig.ReadStateKeys(getenv); err != nil {
		return config{}, err
	}
	if c.allow, err = envconfig.ReadWebhookAllow(getenv); err != nil {
		return config{}, err
	}
	if c.delivery, err = envconfig.ReadDelivery(getenv); err != nil {
		return config{}, err
	}
	if c.errors, err = envconfig.ReadEventsErrors(getenv); err != nil {
		return config{}, err
	}
	c.tools = envconfig.ReadRegistryTools(getenv)
	return c, nil
}

// deliveryQueue returns the SQS queue of webhook delivery tasks
// (MCPUSH_DELIVERY_QUEUE_URL), or nil when none is configured: then an
// event waits in its topic's log for the local server's delivery pool.
func deliveryQueue(ctx context.Context, c config) (*delivery.SQSQueue, error) {
	if c.delivery.QueueURL == "" {
		return nil, nil
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("webhook delivery queue: loading the AWS configuration: %w", err)
	}
	return delivery.NewSQSQueue(sqs.NewFromConfig(cfg), c.delivery.QueueURL), nil
}

// engine returns the webhook delivery engine over q: in Lambda, the
// delivery function works the queue's tasks with it. It needs the state
// keys the MCP server seals secrets and signs cursors with, resolved as
// functions/mcp does (statekeys.Resolve: given, from Secrets Manager, or
// shared through the store).
func engine(ctx context.Context, c config, store storeconfig.Store, q delivery.Queue, logger *slog.Logger) (*delivery.Engine, error) {
	keys, err := statekeys.Resolve(ctx, c.keys, store)
	if err != nil {
		return nil, err
	}
	sealer, err := notify.NewSealer(keys, notify.WebhookSealLabel)
	if err != nil {
		return nil, err
	}
	return delivery.New(delivery.Options{
		Store: store, Queue: q, Sender: webhook.NewSender(webhook.Policy{Allow: c.allow}), Sealer: sealer, CursorKey: keys[0],
		EventTypes: delivery.RegistryEventTypes(store), PerOrigin: c.delivery.PerOrigin, EventsErrors: c.errors, Logger: logger,
	})
}

package main

import (
	"context"
	"log/slog"

	"github.com/mcpush/mcpush/internal/statekeys"
	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// config is the command's environment, read and checked (package
// envconfig, as functions/mcp reads it) before the store is opened, so
// that a bad value is reported as itself, never hidden behind a store
// that is also unreachable.
type config struct {
	store envconfig.Store
	keys  envconfig.StateKeys // for webhook delivery
	allow []webhook.Origin    // MCPUSH_WEBHOOK_ALLOW
	tools []string            // MCPUSH_REGISTRY_TOOLS
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
	c.tools = envconfig.ReadRegistryTools(getenv)
	return c, nil
}

// webhooks returns the webhook deliverer of the store. It needs the state
// keys the MCP server seals secrets and signs cursors with, resolved as
// functions/mcp does (statekeys.Resolve: given, from Secrets Manager, or
// shared through the store).
func webhooks(ctx context.Context, c config, store storeconfig.Store, logger *slog.Logger) (*ingest.Webhooks, error) {
	keys, err := statekeys.Resolve(ctx, c.keys, store)
	if err != nil {
		return nil, err
	}
	sealer, err := notify.NewSealer(keys, notify.WebhookSealLabel)
	if err != nil {
		return nil, err
	}
	return ingest.NewWebhooks(ingest.WebhookOptions{
		Store: store, Sender: webhook.NewSender(webhook.Policy{Allow: c.allow}), Sealer: sealer, CursorKey: keys[0],
		EventTypes: ingest.RegistryEventTypes(store), Logger: logger,
	})
}

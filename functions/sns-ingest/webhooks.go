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

// webhooks returns the webhook deliverer of the store. It needs the state
// keys the MCP server seals secrets and signs cursors with, read and
// resolved as functions/mcp does (envconfig.ReadStateKeys,
// statekeys.Resolve), and MCPUSH_WEBHOOK_ALLOW (envconfig.ReadWebhookAllow).
func webhooks(ctx context.Context, getenv func(string) string, store storeconfig.Store, logger *slog.Logger) (*ingest.Webhooks, error) {
	kc, err := envconfig.ReadStateKeys(getenv)
	if err != nil {
		return nil, err
	}
	allow, err := envconfig.ReadWebhookAllow(getenv)
	if err != nil {
		return nil, err
	}
	keys, err := statekeys.Resolve(ctx, kc, store)
	if err != nil {
		return nil, err
	}
	sealer, err := notify.NewSealer(keys, notify.WebhookSealLabel)
	if err != nil {
		return nil, err
	}
	return ingest.NewWebhooks(ingest.WebhookOptions{
		Store: store, Sender: webhook.NewSender(webhook.Policy{Allow: allow}), Sealer: sealer, CursorKey: keys[0],
		EventTypes: ingest.RegistryEventTypes(store), Logger: logger,
	})
}

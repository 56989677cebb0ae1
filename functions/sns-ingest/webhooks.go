package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/mcpush/mcpush/internal/statekeys"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// webhooks returns the webhook deliverer of the store. It needs the state keys the MCP
// server seals secrets and signs cursors with: MCPUSH_STATE_KEYS,
// MCPUSH_STATE_KEYS_SECRET (Secrets Manager, in Lambda), or the key the
// processes on the store share (statekeys.FromStore), as functions/mcp
// reads them; and MCPUSH_WEBHOOK_ALLOW.
func webhooks(ctx context.Context, getenv func(string) string, store storeconfig.Store, logger *slog.Logger) (*ingest.Webhooks, error) {
	var ws ingest.WebhookStore = store
	var (
		keys [][]byte
		err  error
	)
	switch k, secret := getenv("MCPUSH_STATE_KEYS"), getenv("MCPUSH_STATE_KEYS_SECRET"); {
	case k != "" && secret != "":
		return nil, errors.New("set MCPUSH_STATE_KEYS or MCPUSH_STATE_KEYS_SECRET, not both")
	case k != "":
		if keys, err = notify.ParseStateKeys(k); err != nil {
			return nil, fmt.Errorf("MCPUSH_STATE_KEYS: %w", err)
		}
	case secret != "":
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("MCPUSH_STATE_KEYS_SECRET: %w", err)
		}
		if keys, err = statekeys.Load(ctx, secretsmanager.NewFromConfig(cfg), secret); err != nil {
			return nil, fmt.Errorf("MCPUSH_STATE_KEYS_SECRET: %w", err)
		}
	default:
		if keys, err = statekeys.FromStore(ctx, store); err != nil {
			return nil, err
		}
	}
	allow, err := webhook.ParseAllow(getenv(webhook.AllowEnv))
	if err != nil {
		return nil, err
	}
	sealer, err := notify.NewSealer(keys, notify.WebhookSealLabel)
	if err != nil {
		return nil, err
	}
	return ingest.NewWebhooks(ingest.WebhookOptions{
		Store: ws, Sender: webhook.NewSender(webhook.Policy{Allow: allow}), Sealer: sealer, CursorKey: keys[0],
		EventTypes: ingest.RegistryEventTypes(store), Logger: logger,
	})
}

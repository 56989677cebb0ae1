// Package statekeys loads the keys that sign the requestState of 2026-era
// multi round-trip requests (mcp.ServerOptions.StateKeys) from AWS Secrets
// Manager: the secret's AWSCURRENT version signs, and its AWSPREVIOUS
// version, when there is one, still verifies. Rotating the secret (a new
// value, which moves the old one to AWSPREVIOUS) therefore never breaks a
// request in flight: sandboxes that started before the rotation verify
// what new ones sign, and the other way round. The mcp function reads the
// secret once per cold start (template.yaml generates it at deploy time).
//
// Without a configured key, FromStore shares one through the store
// (notify.SharedKeys): the first process generates it, every process that
// shares the store reads it, so a retry that lands on another process
// still verifies. Anyone who can read the store can read that key, and it
// never rotates: a secret stays the recommendation in AWS.
package statekeys

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/notify"
)

// Resolve returns the keys k names, as both mains take them: the keys of
// MCPUSH_STATE_KEYS; else those of the Secrets Manager secret
// MCPUSH_STATE_KEYS_SECRET (Load, with the standard AWS configuration;
// once per cold start, so every sandbox signs with the same key); else
// the key shared through store (FromStore), so every process on it
// verifies what the others sign.
func Resolve(ctx context.Context, k envconfig.StateKeys, store notify.SharedKeys) ([][]byte, error) {
	switch {
	case len(k.Keys) > 0:
		return k.Keys, nil
	case k.Secret != "":
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("MCPUSH_STATE_KEYS_SECRET: %w", err)
		}
		keys, err := Load(ctx, secretsmanager.NewFromConfig(cfg), k.Secret)
		if err != nil {
			return nil, fmt.Errorf("MCPUSH_STATE_KEYS_SECRET: %w", err)
		}
		return keys, nil
	}
	return FromStore(ctx, store)
}

// StoreKeyName is the notify.SharedKeys name of the requestState key
// FromStore shares.
const StoreKeyName = "mcp.requestState"

// FromStore returns the requestState key shared through the store: the
// one stored under StoreKeyName, or, when there is none yet, 32 random
// bytes (base64) that it stores first with a conditional put, so that
// processes starting at once agree. One store write at start-up.
func FromStore(ctx context.Context, store notify.SharedKeys) ([][]byte, error) {
	b := make([]byte, 32)
	rand.Read(b)
	v, err := store.SharedKey(ctx, StoreKeyName, []byte(base64.RawURLEncoding.EncodeToString(b)))
	if err != nil {
		return nil, fmt.Errorf("reading the requestState key from the store: %w", err)
	}
	return notify.ParseStateKeys(string(v))
}

// SecretsClient is the one Secrets Manager call Load makes;
// *secretsmanager.Client implements it.
type SecretsClient interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Load returns the keys of secret secretID (a name or ARN): the current
// value first, then the previous one if the secret has one. A value may
// itself list keys separated by commas (see notify.ParseStateKeys).
func Load(ctx context.Context, c SecretsClient, secretID string) (keys [][]byte, err error) {
	for _, stage := range []string{"AWSCURRENT", "AWSPREVIOUS"} {
		out, err := c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(secretID), VersionStage: aws.String(stage)})
		var notFound *smtypes.ResourceNotFoundException
		switch {
		case err != nil && stage == "AWSPREVIOUS" && errors.As(err, &notFound):
			continue // never rotated
		case err != nil:
			return nil, fmt.Errorf("reading secret %s (%s): %w", secretID, stage, err)
		case out.SecretString == nil:
			return nil, fmt.Errorf("secret %s (%s) has no string value", secretID, stage)
		}
		ks, err := notify.ParseStateKeys(*out.SecretString)
		if err != nil {
			return nil, fmt.Errorf("secret %s (%s): %w", secretID, stage, err)
		}
		keys = append(keys, ks...)
	}
	return keys, nil
}

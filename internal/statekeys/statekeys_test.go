package statekeys_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/statekeys"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

func TestLoad(t *testing.T) {
	endpoint := moto.Start(t)
	c := secretsmanager.New(secretsmanager.Options{
		Region:       moto.Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
	})
	ctx := context.Background()
	const first, second = "first-key-0123456789abcdef0123456789", "second-key-0123456789abcdef012345678"
	name := "mcpush-statekeys-" + t.Name()
	out, err := c.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(first)})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := statekeys.Load(ctx, c, *out.ARN)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]byte{[]byte(first)}, keys); diff != "" {
		t.Errorf("before rotation (-want +got):\n%s", diff)
	}
	// Rotation: the new value signs, the old one still verifies.
	if _, err := c.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: out.ARN, SecretString: aws.String(second)}); err != nil {
		t.Fatal(err)
	}
	keys, err = statekeys.Load(ctx, c, name)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]byte{[]byte(second), []byte(first)}, keys); diff != "" {
		t.Errorf("after rotation (-want +got):\n%s", diff)
	}
	// A short key is refused, and so is a secret that does not exist.
	if _, err := c.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: out.ARN, SecretString: aws.String("short")}); err != nil {
		t.Fatal(err)
	}
	if _, err := statekeys.Load(ctx, c, name); err == nil {
		t.Error("Load accepted a 5-character key")
	}
	if _, err := statekeys.Load(ctx, c, "mcpush-no-such-secret"); err == nil {
		t.Error("Load of a missing secret succeeded")
	}
}

// TestFromStore: processes that share a store (two Stores on one SQLite
// file) get the same key with no configuration, and it is a valid key.
func TestFromStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpush.db")
	var got [][][]byte
	for range 2 {
		st, err := sqlitestore.New(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		keys, err := statekeys.FromStore(t.Context(), st)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, keys)
	}
	if len(got[0]) != 1 || len(got[0][0]) < 32 {
		t.Fatalf("FromStore = %q, want one key of at least 32 characters", got[0])
	}
	if diff := cmp.Diff(got[0], got[1]); diff != "" {
		t.Errorf("the second process's key differs (-first +second):\n%s", diff)
	}
	other, err := sqlitestore.New(filepath.Join(t.TempDir(), "other.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if keys, err := statekeys.FromStore(t.Context(), other); err != nil || cmp.Equal(keys, got[0]) {
		t.Errorf("another store's key = %q, %v; want a key of its own", keys, err)
	}
}

package e2e

import (
	"path/filepath"
	"testing"
)

// Store is a store configuration that every process of a cluster shares.
type Store struct {
	// Name names the store in test names ("sqlite", "dynamodb").
	Name string
	// Env returns the environment variables (KEY=VALUE) that point the
	// processes of one cluster at a fresh, empty store private to t,
	// starting whatever the store needs and stopping it when t ends.
	Env func(t testing.TB) []string
}

// SQLiteStore is a SQLite file in the test's temporary directory, shared by
// all processes of the cluster (MCPUSH_STORE=sqlite:PATH).
func SQLiteStore() Store {
	return Store{
		Name: "sqlite",
		Env: func(t testing.TB) []string {
			return []string{"MCPUSH_STORE=sqlite:" + filepath.Join(t.TempDir(), "mcpush.db")}
		},
	}
}

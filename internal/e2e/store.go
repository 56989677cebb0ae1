package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
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

// DynamoDBStore is a fresh table on a moto_server (a real DynamoDB API on
// loopback), shared by all processes of the cluster
// (MCPUSH_STORE=dynamodb:TABLE with AWS_ENDPOINT_URL_DYNAMODB). The table
// is created before the processes start. Under CI=true a missing
// moto_server fails the test; elsewhere it skips it.
func DynamoDBStore() Store {
	return Store{
		Name: "dynamodb",
		Env: func(t testing.TB) []string {
			endpoint := moto.Start(t)
			table := fmt.Sprintf("mcpush-%d-%d", time.Now().UnixNano(), tableSeq.Add(1))
			if err := dynamostore.CreateTable(context.Background(), moto.NewClient(context.Background(), endpoint), table); err != nil {
				t.Fatalf("creating table %s on moto: %v", table, err)
			}
			return []string{
				"MCPUSH_STORE=dynamodb:" + table,
				"AWS_ENDPOINT_URL_DYNAMODB=" + endpoint,
				"AWS_REGION=" + moto.Region,
				"AWS_ACCESS_KEY_ID=test",
				"AWS_SECRET_ACCESS_KEY=test",
				// No instance metadata service here: do not look for one.
				"AWS_EC2_METADATA_DISABLED=true",
			}
		},
	}
}

var tableSeq atomic.Int64

// Stores are the stores the multi-process tests run on.
func Stores() []Store { return []Store{SQLiteStore(), DynamoDBStore()} }

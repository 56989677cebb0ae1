//go:build nosqlite

package storeconfig

import (
	"context"
	"errors"
)

func openSQLite(_ context.Context, path string) (Store, error) {
	return nil, errors.New("this build has no SQLite store (built with the nosqlite tag, as the Lambda binaries are): use MCPUSH_STORE=dynamodb:TABLE")
}

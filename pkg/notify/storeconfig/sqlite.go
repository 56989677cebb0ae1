//go:build !nosqlite

package storeconfig

import (
	"context"
	"fmt"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

func openSQLite(ctx context.Context, path string) (notify.Store, error) {
	st, err := sqlitestore.New(path, nil)
	if err != nil {
		return nil, fmt.Errorf("opening SQLite store %s: %w", path, err)
	}
	if err := st.CheckWritable(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("SQLite store %s: %w", path, err)
	}
	return st, nil
}

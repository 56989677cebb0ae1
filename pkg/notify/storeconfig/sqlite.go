//go:build !nosqlite

package storeconfig

import (
	"context"
	"fmt"

	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

var _ Store = (*sqlitestore.Store)(nil)

func openSQLite(ctx context.Context, path string) (Store, error) {
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

//go:build !nosqlite

package storeconfig

import (
	"fmt"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

func openSQLite(path string) (notify.Store, error) {
	st, err := sqlitestore.New(path, nil)
	if err != nil {
		return nil, fmt.Errorf("opening SQLite store %s: %w", path, err)
	}
	return st, nil
}

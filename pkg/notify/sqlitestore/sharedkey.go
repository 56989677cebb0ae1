package sqlitestore

import (
	"context"
	"database/sql"

	"github.com/mcpush/mcpush/pkg/notify"
)

var _ notify.SharedKeys = (*Store)(nil)

// sharedKeysSchema holds SharedKey's values. It is created on a store's
// first SharedKey (so that files made before it get it too, without a
// schema version change).
const sharedKeysSchema = `CREATE TABLE IF NOT EXISTS shared_keys (
	name  TEXT PRIMARY KEY,
	value BLOB NOT NULL
)`

// SharedKey implements notify.SharedKeys with one write transaction: an
// insert that does nothing when name is taken, and a read of what is
// stored.
func (s *Store) SharedKey(ctx context.Context, name string, value []byte) (got []byte, err error) {
	defer wrap(&err, "sqlitestore: SharedKey(%q)", name)
	if err := notify.CheckSharedKey(name, value); err != nil {
		return nil, err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, sharedKeysSchema); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO shared_keys (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, value); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT value FROM shared_keys WHERE name = ?`, name).Scan(&got)
	})
	return got, err
}

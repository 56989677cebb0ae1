package sqlitestore

import (
	"context"
	"database/sql"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

var _ notify.RateCounter = (*Store)(nil)

// rateSchema is the table of notify.RateCounter, created on first use.
const rateSchema = `CREATE TABLE IF NOT EXISTS rate_counters (
	key        TEXT NOT NULL,
	window     INTEGER NOT NULL,
	count      INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (key, window)
)`

// CountInWindow implements notify.RateCounter in one write transaction,
// which also deletes the key's earlier windows once they expired (prune
// deletes other keys').
func (s *Store) CountInWindow(ctx context.Context, key string, window, delta int64, expires time.Time) (n int64, err error) {
	defer wrap(&err, "sqlitestore: CountInWindow(%.64q, %d)", key, window)
	if err := notify.CheckRateKey(key, delta); err != nil {
		return 0, err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, rateSchema); err != nil {
			return err
		}
		// A counter is forgotten only once it expired (as on DynamoDB), so
		// a process whose clock lags still counts into the window's row.
		if _, err := tx.ExecContext(ctx, `DELETE FROM rate_counters WHERE key = ?1 AND window < ?2 AND expires_at <= ?3`, key, window, toNanos(s.now())); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `INSERT INTO rate_counters (key, window, count, expires_at) VALUES (?1, ?2, ?4, ?3)
			ON CONFLICT (key, window) DO UPDATE SET count = count + ?4 RETURNING count`, key, window, toNanos(expires), delta).Scan(&n)
	})
	return n, err
}

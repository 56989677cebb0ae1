package sqlitestore

import (
	"context"
	"database/sql"

	"github.com/mcpush/mcpush/pkg/notify"
)

var _ notify.SessionCounter = (*Store)(nil)

// principalIndexSchema makes CountSessions a range scan of one
// principal's sessions. It is created on a store's first count (so that
// files made before it get it too, without a schema version change);
// CreateSession and DeleteSession maintain it with the sessions table.
const principalIndexSchema = `CREATE INDEX IF NOT EXISTS sessions_principal ON sessions (principal, expires_at)`

// countSessions counts the unexpired sessions of principal ?1 at ?2, up
// to ?3.
const countSessions = `SELECT count(*) FROM (
	SELECT 1 FROM sessions WHERE principal = ?1 AND expires_at > ?2 LIMIT ?3)`

// CountSessions implements notify.SessionCounter with one read: a count
// of the principal's unexpired sessions over the index
// (principal, expires_at), stopping at limit.
func (s *Store) CountSessions(ctx context.Context, principal string, limit int) (n int, err error) {
	defer wrap(&err, "sqlitestore: CountSessions(%.64q, %d)", principal, limit)
	if err := notify.CheckCountSessions(principal, limit); err != nil {
		return 0, err
	}
	s.principalIndex.Do(func() {
		// Best effort: without the index the count is a scan, still right.
		ctx := context.WithoutCancel(ctx)
		_ = s.write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, principalIndexSchema)
			return err
		})
	})
	err = s.r.QueryRowContext(ctx, countSessions, principal, toNanos(s.now()), limit).Scan(&n)
	return n, err
}

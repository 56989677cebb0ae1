package sqlitestore

import (
	"context"
	"database/sql"
	"strconv"

	"github.com/mcpush/mcpush/pkg/notify"
)

// recordChange adds a row to the change feed inside a write transaction:
// it commits with the change it reports.
func (s *Store) recordChange(ctx context.Context, tx *sql.Tx, sessionID string, nowN int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO changes (session_id, expires_at) VALUES (?1, ?2)`,
		sessionID, nowN+int64(notify.ChangeFeedTTL))
	return err
}

// Changes implements notify.Store with one SELECT. The cursor is the seq
// of the last row read: rows commit in seq order (one writer at a time
// holds the write lock), so a reader never skips one.
func (s *Store) Changes(ctx context.Context, cursor string) (_ notify.ChangeSet, next string, err error) {
	defer wrap(&err, "sqlitestore: Changes(%q)", cursor)
	if cursor == "" {
		var head int64
		if err := s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM changes`).Scan(&head); err != nil {
			return notify.ChangeSet{}, "", err
		}
		return notify.ChangeSet{}, strconv.FormatInt(head, 10), nil
	}
	after, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil || after < 0 {
		return notify.ChangeSet{}, "", invalid("malformed cursor %q", cursor)
	}
	var ids []string
	rows, err := s.r.QueryContext(ctx, `SELECT seq, session_id FROM changes WHERE seq > ?1 ORDER BY seq LIMIT ?2`, after, notify.MaxChangesRead)
	if err != nil {
		return notify.ChangeSet{}, "", err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&after, &id); err != nil {
			return notify.ChangeSet{}, "", err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return notify.ChangeSet{}, "", err
	}
	return notify.ChangesOf(ids), strconv.FormatInt(after, 10), nil
}

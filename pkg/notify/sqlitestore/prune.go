package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// pruneTables are the tables whose rows expire on their own.
var pruneTables = []string{"events", "idempotency", "messages", "topic_events", "registry_messages", "rate_counters", "tasks", "changes", "webhook_subs", "webhook_verified"}

// maybePrune deletes some expired rows, at most once per pruneInterval per
// Store (sooner while a prune finds a full batch). It is best effort: its
// errors are dropped, and readers ignore expired rows anyway.
func (s *Store) maybePrune(ctx context.Context) {
	now := s.now()
	next := s.nextPrune.Load()
	if toNanos(now) < next || !s.nextPrune.CompareAndSwap(next, toNanos(now.Add(pruneInterval))) {
		return
	}
	if more, err := s.prune(ctx, now); err == nil && more {
		s.nextPrune.Store(0)
	}
}

// prune deletes up to pruneBatch expired sessions (with everything they
// own) and up to pruneBatch expired rows of each table, in one
// transaction. It reports whether any batch was full.
func (s *Store) prune(ctx context.Context, now time.Time) (more bool, err error) {
	nowN := toNanos(now)
	err = s.write(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM sessions WHERE expires_at <= ?1 LIMIT ?2`, nowN, pruneBatch)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		more = len(ids) == pruneBatch
		for _, id := range ids {
			if err := s.deleteSessionRows(ctx, tx, id); err != nil {
				return err
			}
		}
		// rate_counters is made on first use (see CountInWindow).
		if _, err := tx.ExecContext(ctx, rateSchema); err != nil {
			return err
		}
		// So is tasks (see tasks.go).
		if _, err := tx.ExecContext(ctx, taskSchema); err != nil {
			return err
		}
		// And webhook_subs (see webhooks.go).
		if _, err := tx.ExecContext(ctx, webhookSchema); err != nil {
			return err
		}
		for _, table := range pruneTables {
			res, err := tx.ExecContext(ctx, fmt.Sprintf(
				`DELETE FROM %[1]s WHERE rowid IN (SELECT rowid FROM %[1]s WHERE expires_at <= ?1 LIMIT ?2)`, table),
				nowN, pruneBatch)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err == nil && n == pruneBatch {
				more = true
			}
		}
		return nil
	})
	return more, err
}

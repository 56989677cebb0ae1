package sqlitestore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/mcpush/mcpush/pkg/notify"
)

var _ notify.TaskStore = (*Store)(nil)

// taskSchema holds task records. It is created on a store's first task
// operation (so that files made before it get it too, without a schema
// version change). live is Task.LiveUntil in Unix nanoseconds (0 once
// the status is terminal): CountTasks counts the rows whose live is
// after now. (Rows written before it held 1 while not terminal: those
// no longer count.)
const taskSchema = `
CREATE TABLE IF NOT EXISTS tasks (
	principal  TEXT NOT NULL,
	id         TEXT NOT NULL,
	body       BLOB NOT NULL,
	version    INTEGER NOT NULL,
	live       INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (principal, id)
);
CREATE INDEX IF NOT EXISTS tasks_live ON tasks (principal, live, expires_at);
CREATE INDEX IF NOT EXISTS tasks_expires_at ON tasks (expires_at);
`

func (s *Store) tasks(ctx context.Context) error {
	s.taskTable.Do(func() {
		ctx := context.WithoutCancel(ctx)
		s.taskTableErr = s.write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, taskSchema)
			return err
		})
	})
	return s.taskTableErr
}

func liveUntil(t *notify.Task) int64 {
	if notify.TaskTerminal(t.Status) {
		return 0
	}
	return toNanos(t.LiveUntil())
}

// CreateTask implements notify.TaskStore.
func (s *Store) CreateTask(ctx context.Context, t *notify.Task) (err error) {
	defer wrap(&err, "sqlitestore: CreateTask(%.64q)", t.ID)
	body, err := notify.CheckTask(t)
	if err != nil {
		return err
	}
	if err := s.tasks(ctx); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		now := toNanos(s.now())
		// Expired tasks of the principal go now (the periodic prune
		// takes the others).
		if _, err := tx.ExecContext(ctx, `DELETE FROM tasks WHERE principal = ?1 AND expires_at <= ?2`, t.Principal, now); err != nil {
			return err
		}
		var exp int64
		switch err := tx.QueryRowContext(ctx, `SELECT expires_at FROM tasks WHERE principal = ?1 AND id = ?2`, t.Principal, t.ID).Scan(&exp); {
		case err == nil && exp > now:
			return notify.ErrExists
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO tasks (principal, id, body, version, live, expires_at) VALUES (?1, ?2, ?3, 1, ?4, ?5)`,
			t.Principal, t.ID, body, liveUntil(t), toNanos(t.ExpiresAt)); err != nil {
			return err
		}
		t.Version = 1
		return nil
	})
}

// GetTask implements notify.TaskStore with one read.
func (s *Store) GetTask(ctx context.Context, principal, id string) (_ *notify.Task, err error) {
	defer wrap(&err, "sqlitestore: GetTask(%.64q)", id)
	if id == "" {
		return nil, invalid("empty task id")
	}
	if err := s.tasks(ctx); err != nil {
		return nil, err
	}
	var body []byte
	var version int64
	err = s.r.QueryRowContext(ctx, `SELECT body, version FROM tasks WHERE principal = ?1 AND id = ?2 AND expires_at > ?3`,
		principal, id, toNanos(s.now())).Scan(&body, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notify.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return notify.DecodeTask(principal, id, version, body)
}

// UpdateTask implements notify.TaskStore.
func (s *Store) UpdateTask(ctx context.Context, t *notify.Task) (err error) {
	defer wrap(&err, "sqlitestore: UpdateTask(%.64q)", t.ID)
	body, err := notify.CheckTask(t)
	if err != nil {
		return err
	}
	if err := s.tasks(ctx); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		var version int64
		err := tx.QueryRowContext(ctx, `SELECT version FROM tasks WHERE principal = ?1 AND id = ?2 AND expires_at > ?3`,
			t.Principal, t.ID, toNanos(s.now())).Scan(&version)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return notify.ErrNotFound
		case err != nil:
			return err
		case version != t.Version:
			return notify.ErrConflict
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET body = ?3, version = ?4, live = ?5, expires_at = ?6 WHERE principal = ?1 AND id = ?2`,
			t.Principal, t.ID, body, version+1, liveUntil(t), toNanos(t.ExpiresAt)); err != nil {
			return err
		}
		t.Version = version + 1
		return nil
	})
}

// CountTasks implements notify.TaskStore with one read of the
// principal's unexpired rows: those whose LiveUntil is after now are
// live; the bytes are their bodies' (length reads no body).
func (s *Store) CountTasks(ctx context.Context, principal string, limit int) (c notify.TaskCount, err error) {
	defer wrap(&err, "sqlitestore: CountTasks(%.64q, %d)", principal, limit)
	if err := notify.CheckCountTasks(principal, limit); err != nil {
		return c, err
	}
	if err := s.tasks(ctx); err != nil {
		return c, err
	}
	err = s.r.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE live > ?2), coalesce(sum(length(body)), 0) FROM tasks WHERE principal = ?1 AND expires_at > ?2`,
		principal, toNanos(s.now())).Scan(&c.Live, &c.Bytes)
	c.Live = min(c.Live, limit)
	return c, err
}

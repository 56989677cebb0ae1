// Package sqlitestore implements notify.Store on an SQLite database file,
// with the pure-Go driver modernc.org/sqlite (no cgo).
//
// The database runs in WAL mode, so readers never wait for the writer.
// Several processes may share one file: every write is one transaction
// that takes SQLite's write lock up front (BEGIN IMMEDIATE) and waits for
// it under a busy timeout, so writers in different processes queue instead
// of failing with SQLITE_BUSY, and every read-modify-write (sequence
// numbers, conditional appends, registry updates) happens under that lock.
// Within one process, writes are serialised on a single connection and
// reads use a small pool of read-only connections.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"modernc.org/sqlite"
)

// Defaults for Options (notify's, shared by every store).
const (
	DefaultEventTTL      = notify.DefaultEventTTL
	DefaultTopicEventTTL = notify.DefaultTopicEventTTL
)

const (
	// busyTimeout is how long a connection waits for a lock held by
	// another connection (usually another process) before SQLITE_BUSY.
	busyTimeout = 10 * time.Second

	// pruneInterval is the least time between two opportunistic prunes of
	// expired rows by one Store; pruneBatch bounds the rows one prune
	// deletes per table, so that it stays cheap.
	pruneInterval = time.Minute
	pruneBatch    = 500

	// schemaVersion is stored in PRAGMA user_version.
	schemaVersion = 4
)

// Options configures a Store: notify.StoreOptions, the options every store
// takes. The zero value (or a nil *Options) gives the defaults.
type Options = notify.StoreOptions

// Store is a notify.Store on an SQLite database file.
//
// A Store is safe for concurrent use by many goroutines, and any number of
// Stores, in one process or in several, may share the same file. Close it
// when done; methods must not be called after Close.
type Store struct {
	path     string
	w        *sql.DB // exactly one connection; every write goes through it
	r        *sql.DB // read-only connections
	st       *statements
	now      func() time.Time
	eventTTL time.Duration
	topicTTL time.Duration

	// nextPrune is the Unix nanosecond time (by now) from which the next
	// opportunistic prune may run.
	nextPrune atomic.Int64

	closeOnce sync.Once
	closeErr  error

	principalIndex  sync.Once // CountSessions's index, see sessioncount.go
	taskTable       sync.Once // the tasks table, see tasks.go
	taskTableErr    error
	webhookTable    sync.Once // the webhook_subs table, see webhooks.go
	webhookTableErr error
}

var _ notify.Store = (*Store)(nil)

// New opens the SQLite database file at path, creating it, its parent
// directory and the schema if they do not exist, and returns a Store on
// it. Several processes may call New on the same path at once. A nil opts
// means the defaults.
func New(path string, opts *Options) (_ *Store, err error) {
	defer wrap(&err, "sqlitestore.New(%q)", path)
	if path == "" {
		return nil, fmt.Errorf("%w: empty path", notify.ErrInvalid)
	}
	o := opts.WithDefaults()
	s := &Store{
		now:      o.Now,
		eventTTL: o.EventTTL,
		topicTTL: o.TopicEventTTL,
	}

	s.path, err = filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return nil, err
	}

	s.w, err = sql.Open("sqlite", dsn(s.path, false))
	if err != nil {
		return nil, err
	}
	// One writer connection: goroutines of this process queue in
	// database/sql (honouring their contexts) rather than in SQLite's busy
	// handler; only other processes contend for the file lock.
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if err := s.initSchema(); err != nil {
		s.w.Close()
		if !errors.Is(err, notify.ErrUnavailable) && (errors.Is(err, context.DeadlineExceeded) || isBusy(err)) {
			// Another process held the write lock the whole time.
			err = fmt.Errorf("%w: the database stayed locked for %v: %w", notify.ErrUnavailable, 2*busyTimeout, err)
		}
		return nil, err
	}

	s.r, err = sql.Open("sqlite", dsn(s.path, true))
	if err != nil {
		s.w.Close()
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0)+1)
	s.r.SetMaxOpenConns(n)
	s.r.SetMaxIdleConns(n)
	s.r.SetConnMaxLifetime(0)
	s.r.SetConnMaxIdleTime(0)

	if s.st, err = prepare(s.w, s.r); err != nil {
		s.r.Close()
		s.w.Close()
		return nil, err
	}
	return s, nil
}

// dsn returns the driver data source name for the file at the absolute
// path abs. Write connections begin transactions with BEGIN IMMEDIATE;
// read connections are query-only.
func dsn(abs string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "synchronous(NORMAL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	return u.String()
}

// initSchema switches the file to WAL mode and creates the schema if it is
// missing. Two processes opening a new file at once can see SQLITE_BUSY
// while one of them converts it to WAL; that is retried.
func (s *Store) initSchema() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*busyTimeout)
	defer cancel()
	for {
		err := s.tryInitSchema(ctx)
		if err == nil || !isBusy(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Store) tryInitSchema(ctx context.Context) error {
	var mode string
	if err := s.w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("reading journal mode: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("journal mode is %q, want \"wal\" (is the file on a network file system?)", mode)
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, changesSchema); err != nil {
			return fmt.Errorf("creating the change feed: %w", err)
		}
		switch {
		case v == schemaVersion:
			return nil
		case v > schemaVersion:
			return fmt.Errorf("database schema version %d is newer than this program's (%d)", v, schemaVersion)
		}
		if v == 1 {
			// Version 2 keeps a Position per subscription.
			for _, col := range []string{"position", "since"} {
				if _, err := tx.ExecContext(ctx, `ALTER TABLE subscriptions ADD COLUMN `+col+` INTEGER NOT NULL DEFAULT 0`); err != nil {
					return fmt.Errorf("upgrading the schema from version 1: %w", err)
				}
			}
		}
		if v >= 1 && v < 3 {
			// Version 3 keeps the last notified hash of the events
			// registry.
			if _, err := tx.ExecContext(ctx, `ALTER TABLE sessions ADD COLUMN notified_events TEXT`); err != nil {
				return fmt.Errorf("upgrading the schema from version %d: %w", v, err)
			}
		}
		if v >= 1 && v < 4 {
			// Version 4 keeps a backing session's notify.ListenState in
			// columns of its own, where earlier versions wrote it into
			// client_info.
			for _, col := range []string{
				`listen_process TEXT NOT NULL DEFAULT ''`, `listen_request TEXT NOT NULL DEFAULT ''`,
				`listen_parked TEXT NOT NULL DEFAULT ''`, `listen_after INTEGER NOT NULL DEFAULT 0`,
				`listen_session TEXT NOT NULL DEFAULT ''`,
			} {
				if _, err := tx.ExecContext(ctx, `ALTER TABLE sessions ADD COLUMN `+col); err != nil {
					return fmt.Errorf("upgrading the schema from version %d: %w", v, err)
				}
			}
			if err := upgradeListens(ctx, tx); err != nil {
				return fmt.Errorf("upgrading the schema from version %d: %w", v, err)
			}
		}
		if _, err := tx.ExecContext(ctx, schema); err != nil {
			return fmt.Errorf("creating schema: %w", err)
		}
		_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion))
		return err
	})
}

// upgradeListens moves the listen state of every backing session that a
// version before schema version 4 wrote into client_info to the listen_*
// columns (notify.UpgradeListen decides which rows hold one, and reads
// it), in the upgrade's transaction.
func upgradeListens(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, principal, client_info FROM sessions
		WHERE substr(CAST(client_info AS TEXT), 1, 9) = '{"mcpush/'`)
	if err != nil {
		return err
	}
	var found []*notify.Session
	for rows.Next() {
		sess := &notify.Session{}
		if err := rows.Scan(&sess.ID, &sess.Principal, (*[]byte)(&sess.ClientInfo)); err != nil {
			rows.Close()
			return err
		}
		if notify.UpgradeListen(sess) {
			found = append(found, sess)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, sess := range found {
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET client_info = NULL, `+
			`listen_process = ?2, listen_request = ?3, listen_parked = ?4, listen_after = ?5, listen_session = ?6 WHERE id = ?1`,
			append([]any{sess.ID}, listenValues(sess.Listen)...)...); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the database connections. It is safe to call more than
// once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.st.close(), s.r.Close(), s.w.Close())
	})
	return s.closeErr
}

// write runs f in a write transaction: BEGIN IMMEDIATE on the writer
// connection, so that the write lock is held from the start and every
// read in f sees the latest committed state. f's error rolls back.
func (s *Store) write(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", unavailable(err))
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return unavailable(err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", unavailable(err))
	}
	return nil
}

// isBusy reports whether err is SQLITE_BUSY or SQLITE_LOCKED.
func isBusy(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
		return true
	}
	return false
}

// wrap adds context to a non-nil *errp, keeping it inspectable with
// errors.Is, and marks a busy or locked database notify.ErrUnavailable.
func wrap(errp *error, format string, args ...any) {
	if *errp != nil {
		*errp = fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), unavailable(*errp))
	}
}

// unavailable marks err notify.ErrUnavailable when it is SQLITE_BUSY or
// SQLITE_LOCKED: another connection (usually a process frozen or slow
// while it holds the write lock) kept the database past busyTimeout, and
// the same call may succeed later.
func unavailable(err error) error {
	if err == nil || errors.Is(err, notify.ErrUnavailable) || !isBusy(err) {
		return err
	}
	return fmt.Errorf("%w: %w", notify.ErrUnavailable, err)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", notify.ErrInvalid, fmt.Sprintf(format, args...))
}

func tooLarge(what string, n int) error {
	return fmt.Errorf("%w: %s is %d bytes, limit %d", notify.ErrTooLarge, what, n, notify.MaxItemBytes)
}

// Times are stored as notify.UnixNanos.
func toNanos(t time.Time) int64   { return notify.UnixNanos(t) }
func fromNanos(n int64) time.Time { return notify.FromUnixNanos(n) }

// CheckWritable makes sure that the database file can be written: one
// write transaction that rewrites the schema version, as a process
// checks its store at start-up. A read-only file or file system fails
// here (SQLite opens such a file read-only without an error); a lock
// held by another process past the busy timeout is
// notify.ErrUnavailable.
func (s *Store) CheckWritable(ctx context.Context) (err error) {
	defer wrap(&err, "sqlitestore: CheckWritable")
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion))
		return err
	})
}

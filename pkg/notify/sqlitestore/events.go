package sqlitestore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Append implements notify.Store. All checks and writes happen in one
// transaction holding the write lock: the session check, the idempotency
// key, the notified-hash comparison, the next sequence number, the events,
// and the new hash. An empty data is refused with notify.ErrInvalid.
func (s *Store) Append(ctx context.Context, sessionID, streamID string, data [][]byte, opts *notify.AppendOptions) (lastSeq int64, appended bool, err error) {
	defer wrap(&err, "sqlitestore: Append(%q, %q)", sessionID, streamID)
	if err := notify.CheckAppend(sessionID, streamID, data, opts); err != nil {
		return 0, false, err
	}
	var (
		key string
		cas *notify.HashCAS
	)
	if opts != nil {
		key, cas = opts.IdempotencyKey, opts.NotifiedHash
	}

	now := s.now()
	nowN, exp := toNanos(now), toNanos(now.Add(s.eventTTL))
	err = s.write(ctx, func(tx *sql.Tx) error {
		_, hashes, err := s.liveSession(ctx, tx, sessionID, nowN)
		if err != nil {
			return err
		}
		if key != "" {
			var one int
			err := tx.StmtContext(ctx, s.st.idempotencyLive).QueryRowContext(ctx, sessionID, key, nowN).Scan(&one)
			switch {
			case err == nil:
				return nil // already done
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		if cas != nil && hashes.get(cas.Registry) != cas.Old {
			return nil // condition failed
		}

		var last int64
		err = tx.StmtContext(ctx, s.st.streamLastSeq).QueryRowContext(ctx, sessionID, streamID).Scan(&last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		ins := tx.StmtContext(ctx, s.st.insertEvent)
		for _, d := range data {
			last++
			if _, err := ins.ExecContext(ctx, sessionID, streamID, last, d, exp); err != nil {
				return err
			}
		}
		if _, err := tx.StmtContext(ctx, s.st.setStreamSeq).ExecContext(ctx, sessionID, streamID, last); err != nil {
			return err
		}
		if key != "" {
			if _, err := tx.StmtContext(ctx, s.st.putIdempotency).ExecContext(ctx, sessionID, key, exp); err != nil {
				return err
			}
		}
		if cas != nil {
			if _, err := tx.StmtContext(ctx, s.st.setNotifiedHash).ExecContext(ctx, sessionID, cas.Registry, cas.New); err != nil {
				return err
			}
		}
		lastSeq, appended = last, true
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return lastSeq, appended, nil
}

// ReadEvents implements notify.Store with one SELECT. A limit below 1 is
// refused with notify.ErrInvalid.
func (s *Store) ReadEvents(ctx context.Context, sessionID, streamID string, after int64, limit int) (_ []notify.Event, err error) {
	defer wrap(&err, "sqlitestore: ReadEvents(%q, %q, %d, %d)", sessionID, streamID, after, limit)
	if err := notify.CheckRead(sessionID, streamID, limit); err != nil {
		return nil, err
	}
	rows, err := s.st.readEvents.QueryContext(ctx, sessionID, streamID, after, toNanos(s.now()), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		events []notify.Event
		found  bool
	)
	for rows.Next() {
		found = true
		var (
			seq  sql.NullInt64
			data []byte
		)
		if err := rows.Scan(&seq, &data); err != nil {
			return nil, err
		}
		if seq.Valid {
			events = append(events, notify.Event{Seq: seq.Int64, Data: data})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, notify.ErrNotFound
	}
	return events, nil
}

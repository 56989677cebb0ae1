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
		lastSeq, appended, err = s.appendTx(ctx, tx, sessionID, streamID, data, key, cas, hashes, nowN, exp)
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return lastSeq, appended, nil
}

// appendTx is Append inside a write transaction, for a live session with
// the given notified hashes: (0, false, nil) when the key was used or the
// hash condition fails.
func (s *Store) appendTx(ctx context.Context, tx *sql.Tx, sessionID, streamID string, data [][]byte, key string, cas *notify.HashCAS, hashes notifiedHashes, nowN, exp int64) (int64, bool, error) {
	if key != "" {
		var one int
		err := tx.StmtContext(ctx, s.st.idempotencyLive).QueryRowContext(ctx, sessionID, key, nowN).Scan(&one)
		switch {
		case err == nil:
			return 0, false, nil // already done
		case !errors.Is(err, sql.ErrNoRows):
			return 0, false, err
		}
	}
	if cas != nil && hashes.get(cas.Registry) != cas.Old {
		return 0, false, nil // condition failed
	}

	var last int64
	err := tx.StmtContext(ctx, s.st.streamLastSeq).QueryRowContext(ctx, sessionID, streamID).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, false, err
	}
	ins := tx.StmtContext(ctx, s.st.insertEvent)
	for _, d := range data {
		last++
		if _, err := ins.ExecContext(ctx, sessionID, streamID, last, d, exp); err != nil {
			return 0, false, err
		}
	}
	if _, err := tx.StmtContext(ctx, s.st.setStreamSeq).ExecContext(ctx, sessionID, streamID, last); err != nil {
		return 0, false, err
	}
	if key != "" {
		if _, err := tx.StmtContext(ctx, s.st.putIdempotency).ExecContext(ctx, sessionID, key, exp); err != nil {
			return 0, false, err
		}
	}
	if cas != nil {
		if _, err := tx.StmtContext(ctx, s.st.setNotifiedHash).ExecContext(ctx, sessionID, cas.Registry, cas.New); err != nil {
			return 0, false, err
		}
	}
	if streamID == notify.SessionStream {
		if err := s.recordChange(ctx, tx, sessionID, nowN); err != nil {
			return 0, false, err
		}
	}
	return last, true, nil
}

// AppendEach implements notify.Store in one write transaction: for each
// session, a SELECT of its profile and of its subscription's position,
// then what Append does, and the position's UPDATE. A pick result that
// Append would refuse fails the whole call and appends nothing.
func (s *Store) AppendEach(ctx context.Context, ids []string, uri string, upTo int64, pick func(*notify.Session, notify.Position) [][]byte) (appended []string, err error) {
	defer wrap(&err, "sqlitestore: AppendEach(%d sessions, %q, %d)", len(ids), uri, upTo)
	ids, err = notify.CheckAppendEach(ids, uri, upTo)
	if err != nil {
		return nil, err
	}
	now := s.now()
	nowN, exp := toNanos(now), toNanos(now.Add(s.eventTTL))
	err = s.write(ctx, func(tx *sql.Tx) error {
		appended = appended[:0]
		for _, id := range ids {
			sess, hashes, err := s.profileTx(ctx, tx, id, nowN)
			if errors.Is(err, notify.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			var at, since int64
			err = tx.StmtContext(ctx, s.st.subscriptionAt).QueryRowContext(ctx, id, uri).Scan(&at, &since)
			if errors.Is(err, sql.ErrNoRows) || err == nil && at >= upTo {
				continue // not subscribed, or at upTo already
			}
			if err != nil {
				return err
			}
			data := pick(sess, notify.Position{At: at, Since: fromNanos(since)})
			if data == nil {
				continue
			}
			if err := notify.CheckAppend(id, notify.SessionStream, data, nil); err != nil {
				return err
			}
			if _, _, err := s.appendTx(ctx, tx, id, notify.SessionStream, data, "", nil, hashes, nowN, exp); err != nil {
				return err
			}
			if _, err := tx.StmtContext(ctx, s.st.setSubscriptionAt).ExecContext(ctx, id, uri, upTo); err != nil {
				return err
			}
			appended = append(appended, id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return appended, nil
}

// profileTx reads a live session's profile inside a write transaction, or
// notify.ErrNotFound.
func (s *Store) profileTx(ctx context.Context, tx *sql.Tx, id string, now int64) (*notify.Session, notifiedHashes, error) {
	sess := &notify.Session{ID: id}
	var (
		createdAt, expiresAt int64
		hashes               notifiedHashes
	)
	err := tx.StmtContext(ctx, s.st.liveProfile).QueryRowContext(ctx, id, now).Scan(append([]any{
		&sess.Principal, &sess.ProtocolVersion, (*[]byte)(&sess.ClientInfo), (*[]byte)(&sess.ClientCapabilities),
		&sess.LogLevel, &sess.Initialized, &createdAt, &expiresAt, &sess.Version,
		&sess.Delivered, &hashes[0], &hashes[1], &hashes[2], &hashes[3]}, listenFields(&sess.Listen)...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, hashes, notify.ErrNotFound
	}
	if err != nil {
		return nil, hashes, err
	}
	sess.CreatedAt, sess.ExpiresAt = fromNanos(createdAt), fromNanos(expiresAt)
	sess.NotifiedHashes = hashes.toMap()
	return sess, hashes, nil
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

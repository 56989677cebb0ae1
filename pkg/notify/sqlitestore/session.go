package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/mcpush/mcpush/pkg/notify"
)

// CreateSession implements notify.Store. An expired session with the same
// id counts as gone: it is replaced, with everything it owned. A zero
// ExpiresAt is refused with notify.ErrInvalid.
func (s *Store) CreateSession(ctx context.Context, sess *notify.Session) (err error) {
	if sess == nil {
		return fmt.Errorf("sqlitestore: CreateSession: %w", invalid("nil session"))
	}
	defer wrap(&err, "sqlitestore: CreateSession(%q)", sess.ID)
	if err := notify.CheckSession(sess); err != nil {
		return err
	}
	for _, uri := range sess.Subscriptions {
		if err := notify.CheckSubscription(sess.ID, uri); err != nil {
			return err
		}
	}
	for kind := range sess.NotifiedHashes {
		if !notify.ValidRegistry(kind) {
			return invalid("registry kind %q in NotifiedHashes", kind)
		}
	}
	hashes := notifiedFromMap(sess.NotifiedHashes)

	now := toNanos(s.now())
	err = s.write(ctx, func(tx *sql.Tx) error {
		var exp int64
		switch err := tx.StmtContext(ctx, s.st.sessionExpiresAt).QueryRowContext(ctx, sess.ID).Scan(&exp); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case exp > now:
			return notify.ErrExists
		default:
			if err := s.deleteSessionRows(ctx, tx, sess.ID); err != nil {
				return err
			}
		}
		if _, err := tx.StmtContext(ctx, s.st.insertSession).ExecContext(ctx, append([]any{
			sess.ID, sess.Principal, sess.ProtocolVersion, nullBytes(sess.ClientInfo),
			nullBytes(sess.ClientCapabilities), sess.LogLevel, sess.Initialized,
			toNanos(sess.CreatedAt), toNanos(sess.ExpiresAt), sess.Version, sess.Delivered,
			hashes[0], hashes[1], hashes[2], hashes[3]}, listenValues(sess.Listen)...)...,
		); err != nil {
			return err
		}
		if len(sess.Subscriptions) > 0 {
			ins := tx.StmtContext(ctx, s.st.insertSubscription)
			for _, uri := range sess.Subscriptions {
				if _, err := ins.ExecContext(ctx, sess.ID, uri, now); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.maybePrune(ctx)
	return nil
}

// GetSession implements notify.Store with one SELECT.
func (s *Store) GetSession(ctx context.Context, id string) (_ *notify.Session, err error) {
	defer wrap(&err, "sqlitestore: GetSession(%q)", id)
	if id == "" {
		return nil, invalid("empty session id")
	}
	sess := &notify.Session{ID: id}
	var (
		createdAt, expiresAt int64
		hashes               notifiedHashes
		subs                 string
	)
	dest := []any{&sess.Principal, &sess.ProtocolVersion, (*[]byte)(&sess.ClientInfo), (*[]byte)(&sess.ClientCapabilities),
		&sess.LogLevel, &sess.Initialized, &createdAt, &expiresAt, &sess.Version,
		&sess.Delivered, &hashes[0], &hashes[1], &hashes[2], &hashes[3]}
	dest = append(append(dest, listenFields(&sess.Listen)...), &subs, &sess.StreamHead)
	err = s.st.getSession.QueryRowContext(ctx, id, toNanos(s.now()), notify.SessionStream).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notify.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	sess.CreatedAt = fromNanos(createdAt)
	sess.ExpiresAt = fromNanos(expiresAt)
	sess.NotifiedHashes = hashes.toMap()
	if subs != "[]" {
		if err := json.Unmarshal([]byte(subs), &sess.Subscriptions); err != nil {
			return nil, fmt.Errorf("decoding subscriptions: %w", err)
		}
		slices.Sort(sess.Subscriptions)
	}
	return sess, nil
}

// UpdateSession implements notify.Store. On success it increments
// sess.Version.
func (s *Store) UpdateSession(ctx context.Context, sess *notify.Session) (err error) {
	if sess == nil {
		return fmt.Errorf("sqlitestore: UpdateSession: %w", invalid("nil session"))
	}
	defer wrap(&err, "sqlitestore: UpdateSession(%q)", sess.ID)
	if err := notify.CheckSession(sess); err != nil {
		return err
	}
	now := toNanos(s.now())
	err = s.write(ctx, func(tx *sql.Tx) error {
		version, _, err := s.liveSession(ctx, tx, sess.ID, now)
		if err != nil {
			return err
		}
		if version != sess.Version {
			return fmt.Errorf("%w: version is %d, not %d", notify.ErrConflict, version, sess.Version)
		}
		_, err = tx.StmtContext(ctx, s.st.updateSession).ExecContext(ctx, append([]any{sess.ID,
			sess.ProtocolVersion, nullBytes(sess.ClientInfo), nullBytes(sess.ClientCapabilities),
			sess.LogLevel, sess.Initialized, toNanos(sess.ExpiresAt)}, listenValues(sess.Listen)...)...)
		return err
	})
	if err != nil {
		return err
	}
	sess.Version++
	return nil
}

// DeleteSession implements notify.Store. The rows of an expired session
// are deleted too, but it reports notify.ErrNotFound.
func (s *Store) DeleteSession(ctx context.Context, id string) (err error) {
	defer wrap(&err, "sqlitestore: DeleteSession(%q)", id)
	if id == "" {
		return invalid("empty session id")
	}
	now := toNanos(s.now())
	var live bool
	err = s.write(ctx, func(tx *sql.Tx) error {
		var exp int64
		err := tx.StmtContext(ctx, s.st.sessionExpiresAt).QueryRowContext(ctx, id).Scan(&exp)
		if err != nil {
			return err
		}
		live = exp > now
		if err := s.recordChange(ctx, tx, id, now); err != nil {
			return err
		}
		return s.deleteSessionRows(ctx, tx, id)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return notify.ErrNotFound
	case err != nil:
		return err
	case !live:
		return notify.ErrNotFound
	}
	return nil
}

// deleteSessionRows deletes a session and everything it owns.
func (s *Store) deleteSessionRows(ctx context.Context, tx *sql.Tx, id string) error {
	for _, st := range s.st.deleteSessionRows {
		if _, err := tx.StmtContext(ctx, st).ExecContext(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// liveSession returns the version and the notified hashes of a live
// session, or notify.ErrNotFound.
func (s *Store) liveSession(ctx context.Context, tx *sql.Tx, id string, now int64) (version int64, hashes notifiedHashes, err error) {
	err = tx.StmtContext(ctx, s.st.liveSession).QueryRowContext(ctx, id, now).Scan(&version, &hashes[0], &hashes[1], &hashes[2], &hashes[3])
	if errors.Is(err, sql.ErrNoRows) {
		return 0, hashes, notify.ErrNotFound
	}
	return version, hashes, err
}

// MarkDelivered implements notify.Store with one UPDATE.
func (s *Store) MarkDelivered(ctx context.Context, sessionID string, seq int64) (err error) {
	defer wrap(&err, "sqlitestore: MarkDelivered(%q, %d)", sessionID, seq)
	if sessionID == "" {
		return invalid("empty session id")
	}
	res, err := s.st.markDelivered.ExecContext(ctx, sessionID, seq, toNanos(s.now()))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return notify.ErrNotFound
	}
	return nil
}

// Subscribe implements notify.Store.
func (s *Store) Subscribe(ctx context.Context, sessionID, uri string) (err error) {
	defer wrap(&err, "sqlitestore: Subscribe(%q, %q)", sessionID, uri)
	return s.subscription(ctx, s.st.insertSubscription, sessionID, uri, toNanos(s.now()))
}

// Unsubscribe implements notify.Store.
func (s *Store) Unsubscribe(ctx context.Context, sessionID, uri string) (err error) {
	defer wrap(&err, "sqlitestore: Unsubscribe(%q, %q)", sessionID, uri)
	return s.subscription(ctx, s.st.deleteSubscription, sessionID, uri)
}

func (s *Store) subscription(ctx context.Context, stmt *sql.Stmt, sessionID, uri string, args ...any) error {
	if err := notify.CheckSubscription(sessionID, uri); err != nil {
		return err
	}
	now := toNanos(s.now())
	return s.write(ctx, func(tx *sql.Tx) error {
		if _, _, err := s.liveSession(ctx, tx, sessionID, now); err != nil {
			return err
		}
		_, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, append([]any{sessionID, uri}, args...)...)
		return err
	})
}

// Subscribers implements notify.Store with one SELECT.
func (s *Store) Subscribers(ctx context.Context, uri string) (_ []string, err error) {
	defer wrap(&err, "sqlitestore: Subscribers(%q)", uri)
	if uri == "" {
		return nil, invalid("empty URI")
	}
	return queryIDs(s.st.subscribers.QueryContext(ctx, uri, toNanos(s.now())))
}

// PutMessage implements notify.Store.
func (s *Store) PutMessage(ctx context.Context, sessionID, key string, data []byte) (created bool, err error) {
	defer wrap(&err, "sqlitestore: PutMessage(%q, %q)", sessionID, key)
	if err := notify.CheckMessage(sessionID, key, data); err != nil {
		return false, err
	}
	now := s.now()
	nowN, exp := toNanos(now), toNanos(now.Add(s.eventTTL))
	err = s.write(ctx, func(tx *sql.Tx) error {
		if _, _, err := s.liveSession(ctx, tx, sessionID, nowN); err != nil {
			return err
		}
		res, err := tx.StmtContext(ctx, s.st.putMessage).ExecContext(ctx, sessionID, key, data, exp, nowN)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		created = n > 0
		return err
	})
	return created, err
}

// GetMessage implements notify.Store with one SELECT.
func (s *Store) GetMessage(ctx context.Context, sessionID, key string) (_ []byte, err error) {
	defer wrap(&err, "sqlitestore: GetMessage(%q, %q)", sessionID, key)
	if err := notify.CheckMessage(sessionID, key, nil); err != nil {
		return nil, err
	}
	var (
		found bool
		data  []byte
	)
	err = s.st.getMessage.QueryRowContext(ctx, sessionID, key, toNanos(s.now())).Scan(&found, &data)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, notify.ErrSessionGone
	case err != nil:
		return nil, err
	case !found:
		return nil, fmt.Errorf("message: %w", notify.ErrNotFound)
	}
	return data, nil
}

// registryKinds are the registry kinds in the order of the sessions
// table's notified_* columns and of notifiedHashes.
var registryKinds = [4]string{notify.RegistryTools, notify.RegistryResources, notify.RegistryPrompts, notify.RegistryEvents}

// notifiedHashes are a session's notified_* columns; NULL (not Valid)
// when never set.
type notifiedHashes [4]sql.NullString

func notifiedFromMap(m map[string]string) notifiedHashes {
	var n notifiedHashes
	for i, kind := range registryKinds {
		if h, ok := m[kind]; ok {
			n[i] = sql.NullString{String: h, Valid: true}
		}
	}
	return n
}

// toMap returns the hashes as Session.NotifiedHashes: never nil.
func (n *notifiedHashes) toMap() map[string]string {
	m := make(map[string]string, len(n))
	for i, h := range n {
		if h.Valid {
			m[registryKinds[i]] = h.String
		}
	}
	return m
}

// get returns the hash of a registry kind, "" when never set.
func (n *notifiedHashes) get(kind string) string {
	for i, k := range registryKinds {
		if k == kind {
			return n[i].String
		}
	}
	return ""
}

// nullBytes stores a nil slice as NULL and a non-nil one as a BLOB.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

package sqlitestore

import (
	"context"
	"database/sql"
	"time"

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
	s.ensurePrincipalIndex(ctx)
	err = s.r.QueryRowContext(ctx, countSessions, principal, toNanos(s.now()), limit).Scan(&n)
	return n, err
}

// ensurePrincipalIndex creates principalIndexSchema, once per Store, best
// effort: without the index a read of a principal's sessions is a scan,
// still right.
func (s *Store) ensurePrincipalIndex(ctx context.Context) {
	s.principalIndex.Do(func() {
		ctx := context.WithoutCancel(ctx)
		_ = s.write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, principalIndexSchema)
			return err
		})
	})
}

var _ notify.SessionReclaimer = (*Store)(nil)

// idleSessions lists the unexpired sessions of principal ?1 at ?2 that
// expire by ?4 and own no row of another table, least recently extended
// first, up to ?3.
const idleSessions = `SELECT id FROM sessions s
	WHERE principal = ?1 AND expires_at > ?2 AND expires_at <= ?4
	AND NOT EXISTS (SELECT 1 FROM subscriptions WHERE session_id = s.id)
	AND NOT EXISTS (SELECT 1 FROM streams WHERE session_id = s.id)
	AND NOT EXISTS (SELECT 1 FROM events WHERE session_id = s.id)
	AND NOT EXISTS (SELECT 1 FROM idempotency WHERE session_id = s.id)
	AND NOT EXISTS (SELECT 1 FROM messages WHERE session_id = s.id)
	ORDER BY expires_at, created_at LIMIT ?3`

// IdleSessions implements notify.SessionReclaimer with one read over the
// principal index.
func (s *Store) IdleSessions(ctx context.Context, principal string, expiresBy time.Time, limit int) (ids []string, err error) {
	defer wrap(&err, "sqlitestore: IdleSessions(%.64q, %d)", principal, limit)
	if err := notify.CheckCountSessions(principal, limit); err != nil {
		return nil, err
	}
	s.ensurePrincipalIndex(ctx)
	return queryIDs(s.r.QueryContext(ctx, idleSessions, principal, toNanos(s.now()), limit, toNanos(expiresBy)))
}

var _ notify.ProfileLister = (*Store)(nil)

// principalProfiles lists the profiles of the unexpired sessions of
// principal ?1 at ?2 whose listen state matches ?4 (request), ?5
// (parked) and ?6 (session), each when it is not empty
// (notify.ListenMatch), by id, up to ?3.
const principalProfiles = `SELECT id, principal, protocol_version, client_info, client_capabilities, log_level,
		initialized, created_at, expires_at, version, delivered,
		notified_tools, notified_resources, notified_prompts, notified_events, ` + listenColumns + `
	FROM sessions WHERE principal = ?1 AND expires_at > ?2
		AND (?4 = '' OR listen_request = ?4) AND (?5 = '' OR listen_parked = ?5) AND (?6 = '' OR listen_session = ?6)
	ORDER BY id LIMIT ?3`

// PrincipalProfiles implements notify.ProfileLister with one read over
// the principal index.
func (s *Store) PrincipalProfiles(ctx context.Context, principal string, match notify.ListenMatch, limit int) (out []*notify.Session, err error) {
	defer wrap(&err, "sqlitestore: PrincipalProfiles(%.64q, %+.64v, %d)", principal, match, limit)
	if err := notify.CheckProfiles(principal, match, limit); err != nil {
		return nil, err
	}
	s.ensurePrincipalIndex(ctx)
	rows, err := s.r.QueryContext(ctx, principalProfiles, principal, toNanos(s.now()), limit, match.Request, match.Parked, match.Session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		sess := &notify.Session{}
		var (
			createdAt, expiresAt int64
			hashes               notifiedHashes
		)
		if err := rows.Scan(append([]any{&sess.ID, &sess.Principal, &sess.ProtocolVersion, (*[]byte)(&sess.ClientInfo), (*[]byte)(&sess.ClientCapabilities),
			&sess.LogLevel, &sess.Initialized, &createdAt, &expiresAt, &sess.Version,
			&sess.Delivered, &hashes[0], &hashes[1], &hashes[2], &hashes[3]}, listenFields(&sess.Listen)...)...); err != nil {
			return nil, err
		}
		sess.CreatedAt, sess.ExpiresAt = fromNanos(createdAt), fromNanos(expiresAt)
		sess.NotifiedHashes = hashes.toMap()
		out = append(out, sess)
	}
	return out, rows.Err()
}

// queryIDs returns the values of a query's one text column.
func queryIDs(rows *sql.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

package sqlitestore

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/mcpush/mcpush/pkg/notify"
)

// schema creates every table. Times are Unix nanoseconds. Rows that expire
// carry expires_at; readers ignore expired rows and prune deletes them.
//
// Sequence numbers live in their own rows (streams.last_seq,
// topics.last_seq), not in MAX(seq) of the log, so that pruning expired
// events never lets a sequence number be reused.
const schema = `
CREATE TABLE IF NOT EXISTS sessions (
	id                  TEXT PRIMARY KEY,
	principal           TEXT NOT NULL,
	protocol_version    TEXT NOT NULL,
	client_info         BLOB,
	client_capabilities BLOB,
	log_level           TEXT NOT NULL,
	initialized         INTEGER NOT NULL,
	created_at          INTEGER NOT NULL,
	expires_at          INTEGER NOT NULL,
	version             INTEGER NOT NULL,
	delivered           INTEGER NOT NULL,
	notified_tools      TEXT, -- last notified hash per registry; NULL when never set
	notified_resources  TEXT,
	notified_prompts    TEXT,
	notified_events     TEXT, -- schema version 3
	listen_process      TEXT NOT NULL DEFAULT '', -- notify.ListenState (schema version 4)
	listen_request      TEXT NOT NULL DEFAULT '',
	listen_parked       TEXT NOT NULL DEFAULT '',
	listen_after        INTEGER NOT NULL DEFAULT 0,
	listen_session      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS sessions_expires_at ON sessions (expires_at);

CREATE TABLE IF NOT EXISTS streams (
	session_id TEXT NOT NULL,
	stream_id  TEXT NOT NULL,
	last_seq   INTEGER NOT NULL,
	PRIMARY KEY (session_id, stream_id)
);

CREATE TABLE IF NOT EXISTS events (
	session_id TEXT NOT NULL,
	stream_id  TEXT NOT NULL,
	seq        INTEGER NOT NULL,
	data       BLOB,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (session_id, stream_id, seq)
);
CREATE INDEX IF NOT EXISTS events_expires_at ON events (expires_at);

CREATE TABLE IF NOT EXISTS idempotency (
	session_id TEXT NOT NULL,
	key        TEXT NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (session_id, key)
);
CREATE INDEX IF NOT EXISTS idempotency_expires_at ON idempotency (expires_at);

CREATE TABLE IF NOT EXISTS messages (
	session_id TEXT NOT NULL,
	key        TEXT NOT NULL,
	data       BLOB,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (session_id, key)
);
CREATE INDEX IF NOT EXISTS messages_expires_at ON messages (expires_at);

CREATE TABLE IF NOT EXISTS subscriptions (
	session_id TEXT NOT NULL,
	uri        TEXT NOT NULL,
	position   INTEGER NOT NULL DEFAULT 0, -- AppendEach's Position (schema version 2)
	since      INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (session_id, uri)
);
CREATE INDEX IF NOT EXISTS subscriptions_uri ON subscriptions (uri, session_id);

CREATE TABLE IF NOT EXISTS topics (
	name       TEXT PRIMARY KEY,
	last_seq   INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS topic_events (
	topic       TEXT NOT NULL,
	seq         INTEGER NOT NULL,
	message_id  TEXT NOT NULL,
	received_at INTEGER NOT NULL,
	data        BLOB,
	expires_at  INTEGER NOT NULL,
	PRIMARY KEY (topic, seq),
	UNIQUE (topic, message_id)
);
CREATE INDEX IF NOT EXISTS topic_events_expires_at ON topic_events (expires_at);

CREATE TABLE IF NOT EXISTS registries (
	kind  TEXT PRIMARY KEY,
	hash  TEXT NOT NULL,
	items TEXT NOT NULL -- JSON object: key -> item
);

CREATE TABLE IF NOT EXISTS registry_messages (
	kind       TEXT NOT NULL,
	message_id TEXT NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (kind, message_id)
);
CREATE INDEX IF NOT EXISTS registry_messages_expires_at ON registry_messages (expires_at);
`

// changesSchema is the change feed (Store.Changes): one row per append to
// a session's SessionStream log and per deleted session, kept
// notify.ChangeFeedTTL. AUTOINCREMENT: a seq is never reused, so a
// reader's cursor never skips a row. Created on every open (it came
// after schema version 2, and is only a hint).
const changesSchema = `
CREATE TABLE IF NOT EXISTS changes (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	session_id TEXT NOT NULL,
	expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS changes_expires_at ON changes (expires_at);
`

// listenColumns are the sessions columns of a notify.ListenState, in the
// order of listenFields.
const listenColumns = `listen_process, listen_request, listen_parked, listen_after, listen_session`

// listenFields are the fields of l in the order of listenColumns: the
// values to write, or the destinations of a Scan.
func listenFields(l *notify.ListenState) []any {
	return []any{&l.Process, &l.Request, &l.Parked, &l.After, &l.Session}
}

// listenValues are the values of l in the order of listenColumns.
func listenValues(l notify.ListenState) []any {
	return []any{l.Process, l.Request, l.Parked, l.After, l.Session}
}

// statements holds the prepared statements of a Store. Read statements
// are prepared on the read pool; write statements on the writer, and used
// inside write transactions through Tx.StmtContext.
type statements struct {
	// Reads: one statement each.
	getSession      *sql.Stmt
	readEvents      *sql.Stmt
	getMessage      *sql.Stmt
	subscribers     *sql.Stmt
	readTopicEvents *sql.Stmt
	topics          *sql.Stmt
	getRegistry     *sql.Stmt
	topicHead       *sql.Stmt
	registryHashes  *sql.Stmt

	// Writes.
	sessionExpiresAt   *sql.Stmt
	liveSession        *sql.Stmt
	liveProfile        *sql.Stmt
	subscriptionAt     *sql.Stmt
	setSubscriptionAt  *sql.Stmt
	insertSession      *sql.Stmt
	updateSession      *sql.Stmt
	markDelivered      *sql.Stmt
	setNotifiedHash    *sql.Stmt
	insertSubscription *sql.Stmt
	deleteSubscription *sql.Stmt
	deleteSessionRows  []*sql.Stmt // each takes the session id as ?1; sessions last

	idempotencyLive *sql.Stmt
	putIdempotency  *sql.Stmt
	streamLastSeq   *sql.Stmt
	insertEvent     *sql.Stmt
	setStreamSeq    *sql.Stmt
	putMessage      *sql.Stmt

	topicEventByMessage *sql.Stmt
	deleteTopicEvent    *sql.Stmt
	topicLastSeq        *sql.Stmt
	insertTopicEvent    *sql.Stmt
	setTopic            *sql.Stmt

	registryMessageLive *sql.Stmt
	getRegistryW        *sql.Stmt
	putRegistry         *sql.Stmt
	putRegistryMessage  *sql.Stmt

	all []*sql.Stmt
}

func prepare(w, r *sql.DB) (*statements, error) {
	st := &statements{deleteSessionRows: make([]*sql.Stmt, 6)}
	list := []struct {
		dst   **sql.Stmt
		db    *sql.DB
		query string
	}{
		{&st.getSession, r, `
			SELECT principal, protocol_version, client_info, client_capabilities, log_level,
				initialized, created_at, expires_at, version, delivered,
				notified_tools, notified_resources, notified_prompts, notified_events, ` + listenColumns + `,
				(SELECT json_group_array(uri) FROM subscriptions WHERE session_id = ?1),
				COALESCE((SELECT last_seq FROM streams WHERE session_id = ?1 AND stream_id = ?3), 0)
			FROM sessions WHERE id = ?1 AND expires_at > ?2`},
		// The LEFT JOIN returns one row with a NULL seq when the session is
		// live but has no matching events, and none when it is not.
		{&st.readEvents, r, `
			SELECT e.seq, e.data FROM sessions s
			LEFT JOIN events e ON e.session_id = s.id AND e.stream_id = ?2
				AND e.seq > ?3 AND e.expires_at > ?4
			WHERE s.id = ?1 AND s.expires_at > ?4
			ORDER BY e.seq LIMIT ?5`},
		{&st.getMessage, r, `
			SELECT m.key IS NOT NULL, m.data FROM sessions s
			LEFT JOIN messages m ON m.session_id = s.id AND m.key = ?2 AND m.expires_at > ?3
			WHERE s.id = ?1 AND s.expires_at > ?3`},
		{&st.subscribers, r, `
			SELECT b.session_id FROM subscriptions b JOIN sessions s ON s.id = b.session_id
			WHERE b.uri = ?1 AND s.expires_at > ?2
			ORDER BY b.session_id`},
		{&st.readTopicEvents, r, `
			SELECT seq, message_id, received_at, data FROM topic_events
			WHERE topic = ?1 AND seq > ?2 AND expires_at > ?3
			ORDER BY seq LIMIT ?4`},
		{&st.topics, r, `SELECT name, last_seq, updated_at FROM topics ORDER BY name`},
		{&st.getRegistry, r, `SELECT hash, items FROM registries WHERE kind = ?1`},
		{&st.topicHead, r, `SELECT last_seq FROM topics WHERE name = ?1`},
		{&st.registryHashes, r, `SELECT kind, hash FROM registries`},

		{&st.sessionExpiresAt, w, `SELECT expires_at FROM sessions WHERE id = ?1`},
		{&st.liveSession, w, `
			SELECT version, notified_tools, notified_resources, notified_prompts, notified_events
			FROM sessions WHERE id = ?1 AND expires_at > ?2`},
		{&st.liveProfile, w, `
			SELECT principal, protocol_version, client_info, client_capabilities, log_level,
				initialized, created_at, expires_at, version, delivered,
				notified_tools, notified_resources, notified_prompts, notified_events, ` + listenColumns + `
			FROM sessions WHERE id = ?1 AND expires_at > ?2`},
		{&st.subscriptionAt, w, `SELECT position, since FROM subscriptions WHERE session_id = ?1 AND uri = ?2`},
		{&st.setSubscriptionAt, w, `UPDATE subscriptions SET position = ?3 WHERE session_id = ?1 AND uri = ?2`},
		{&st.insertSession, w, `
			INSERT INTO sessions (id, principal, protocol_version, client_info, client_capabilities,
				log_level, initialized, created_at, expires_at, version, delivered,
				notified_tools, notified_resources, notified_prompts, notified_events, ` + listenColumns + `)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)`},
		{&st.updateSession, w, `
			UPDATE sessions SET protocol_version = ?2, client_info = ?3, client_capabilities = ?4,
				log_level = ?5, initialized = ?6, expires_at = ?7, version = version + 1,
				listen_process = ?8, listen_request = ?9, listen_parked = ?10, listen_after = ?11, listen_session = ?12
			WHERE id = ?1`},
		{&st.markDelivered, w, `
			UPDATE sessions SET delivered = max(delivered, ?2) WHERE id = ?1 AND expires_at > ?3`},
		{&st.setNotifiedHash, w, `
			UPDATE sessions SET
				notified_tools = CASE ?2 WHEN 'tools' THEN ?3 ELSE notified_tools END,
				notified_resources = CASE ?2 WHEN 'resources' THEN ?3 ELSE notified_resources END,
				notified_prompts = CASE ?2 WHEN 'prompts' THEN ?3 ELSE notified_prompts END,
				notified_events = CASE ?2 WHEN 'events' THEN ?3 ELSE notified_events END
			WHERE id = ?1`},
		{&st.insertSubscription, w, `INSERT OR IGNORE INTO subscriptions (session_id, uri, since) VALUES (?1, ?2, ?3)`},
		{&st.deleteSubscription, w, `DELETE FROM subscriptions WHERE session_id = ?1 AND uri = ?2`},
		{&st.deleteSessionRows[0], w, `DELETE FROM events WHERE session_id = ?1`},
		{&st.deleteSessionRows[1], w, `DELETE FROM streams WHERE session_id = ?1`},
		{&st.deleteSessionRows[2], w, `DELETE FROM idempotency WHERE session_id = ?1`},
		{&st.deleteSessionRows[3], w, `DELETE FROM messages WHERE session_id = ?1`},
		{&st.deleteSessionRows[4], w, `DELETE FROM subscriptions WHERE session_id = ?1`},
		{&st.deleteSessionRows[5], w, `DELETE FROM sessions WHERE id = ?1`},

		{&st.idempotencyLive, w, `
			SELECT 1 FROM idempotency WHERE session_id = ?1 AND key = ?2 AND expires_at > ?3`},
		{&st.putIdempotency, w, `
			INSERT INTO idempotency (session_id, key, expires_at) VALUES (?1, ?2, ?3)
			ON CONFLICT (session_id, key) DO UPDATE SET expires_at = excluded.expires_at`},
		{&st.streamLastSeq, w, `SELECT last_seq FROM streams WHERE session_id = ?1 AND stream_id = ?2`},
		{&st.insertEvent, w, `
			INSERT INTO events (session_id, stream_id, seq, data, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)`},
		{&st.setStreamSeq, w, `
			INSERT INTO streams (session_id, stream_id, last_seq) VALUES (?1, ?2, ?3)
			ON CONFLICT (session_id, stream_id) DO UPDATE SET last_seq = excluded.last_seq`},
		// An expired message under the same key is replaced; a live one wins.
		{&st.putMessage, w, `
			INSERT INTO messages (session_id, key, data, expires_at) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (session_id, key) DO UPDATE SET data = excluded.data, expires_at = excluded.expires_at
			WHERE messages.expires_at <= ?5`},

		{&st.topicEventByMessage, w, `
			SELECT seq, received_at, data, expires_at FROM topic_events WHERE topic = ?1 AND message_id = ?2`},
		{&st.deleteTopicEvent, w, `DELETE FROM topic_events WHERE topic = ?1 AND seq = ?2`},
		{&st.topicLastSeq, w, `SELECT last_seq FROM topics WHERE name = ?1`},
		{&st.insertTopicEvent, w, `
			INSERT INTO topic_events (topic, seq, message_id, received_at, data, expires_at)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6)`},
		{&st.setTopic, w, `
			INSERT INTO topics (name, last_seq, updated_at) VALUES (?1, ?2, ?3)
			ON CONFLICT (name) DO UPDATE SET last_seq = excluded.last_seq, updated_at = excluded.updated_at`},

		{&st.registryMessageLive, w, `
			SELECT 1 FROM registry_messages WHERE kind = ?1 AND message_id = ?2 AND expires_at > ?3`},
		{&st.getRegistryW, w, `SELECT hash, items FROM registries WHERE kind = ?1`},
		{&st.putRegistry, w, `
			INSERT INTO registries (kind, hash, items) VALUES (?1, ?2, ?3)
			ON CONFLICT (kind) DO UPDATE SET hash = excluded.hash, items = excluded.items`},
		{&st.putRegistryMessage, w, `
			INSERT INTO registry_messages (kind, message_id, expires_at) VALUES (?1, ?2, ?3)
			ON CONFLICT (kind, message_id) DO UPDATE SET expires_at = excluded.expires_at`},
	}
	for _, p := range list {
		stmt, err := p.db.Prepare(p.query)
		if err != nil {
			st.close()
			return nil, fmt.Errorf("preparing %q: %w", p.query, err)
		}
		*p.dst = stmt
		st.all = append(st.all, stmt)
	}
	return st, nil
}

func (st *statements) close() error {
	var errs []error
	for _, s := range st.all {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

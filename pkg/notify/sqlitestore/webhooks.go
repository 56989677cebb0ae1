package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// webhookSchema holds webhook subscriptions (notify.WebhookSubscription),
// and the verified callbacks (webhook_verified: PutWebhookVerified).
// It is created on a store's first webhook operation (so that files made
// before it get it too, without a schema version change). A record
// without expiry has expires_at MaxInt64. TopicWebhooks reads the primary
// key's range of one topic; CreateWebhook counts a principal's records on
// webhook_subs_principal.
const webhookSchema = `
CREATE TABLE IF NOT EXISTS webhook_subs (
	topic      TEXT NOT NULL,
	id         TEXT NOT NULL,
	principal  TEXT NOT NULL,
	body       BLOB NOT NULL,
	version    INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (topic, id)
);
CREATE INDEX IF NOT EXISTS webhook_subs_principal ON webhook_subs (principal, expires_at);
CREATE INDEX IF NOT EXISTS webhook_subs_expires_at ON webhook_subs (expires_at);
CREATE TABLE IF NOT EXISTS webhook_verified (
	key        TEXT PRIMARY KEY,
	expires_at INTEGER NOT NULL
);
`

func (s *Store) webhooks(ctx context.Context) error {
	s.webhookTable.Do(func() {
		ctx := context.WithoutCancel(ctx)
		s.webhookTableErr = s.write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, webhookSchema)
			return err
		})
	})
	return s.webhookTableErr
}

func webhookExpiry(w *notify.WebhookSubscription) int64 {
	if w.ExpiresAt.IsZero() {
		return math.MaxInt64
	}
	return toNanos(w.ExpiresAt)
}

// CreateWebhook stores a new webhook subscription with Version 1, in one
// write transaction: ErrExists when (topic, id) holds a live one,
// notify.ErrLimit when its principal already has max live ones.
func (s *Store) CreateWebhook(ctx context.Context, w *notify.WebhookSubscription, max int) (err error) {
	defer wrap(&err, "sqlitestore: CreateWebhook(%.64q)", w.ID)
	body, err := notify.CheckWebhook(w)
	if err != nil {
		return err
	}
	if err := s.webhooks(ctx); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		now := toNanos(s.now())
		var exp int64
		switch err := tx.QueryRowContext(ctx, `SELECT expires_at FROM webhook_subs WHERE topic = ?1 AND id = ?2`, w.Topic, w.ID).Scan(&exp); {
		case err == nil && exp > now:
			return notify.ErrExists
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM webhook_subs WHERE principal = ?1 AND expires_at > ?2`, w.Principal, now).Scan(&n); err != nil {
			return err
		}
		if n >= max {
			return notify.ErrLimit
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO webhook_subs (topic, id, principal, body, version, expires_at) VALUES (?1, ?2, ?3, ?4, 1, ?5)`,
			w.Topic, w.ID, w.Principal, body, webhookExpiry(w)); err != nil {
			return err
		}
		w.Version = 1
		return nil
	})
}

// CountWebhooks returns the number of principal's live webhook
// subscriptions, at most limit (the bound CreateWebhook enforces, read
// without a write).
func (s *Store) CountWebhooks(ctx context.Context, principal string, limit int) (_ int, err error) {
	defer wrap(&err, "sqlitestore: CountWebhooks")
	if principal == "" || limit < 1 {
		return 0, notify.ErrInvalid
	}
	if err := s.webhooks(ctx); err != nil {
		return 0, err
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM webhook_subs WHERE principal = ?1 AND expires_at > ?2`, principal, toNanos(s.now())).Scan(&n); err != nil {
		return 0, err
	}
	return min(n, limit), nil
}

// GetWebhook returns the live webhook subscription (topic, id):
// ErrNotFound when there is none or it expired.
func (s *Store) GetWebhook(ctx context.Context, topic, id string) (_ *notify.WebhookSubscription, err error) {
	defer wrap(&err, "sqlitestore: GetWebhook(%.64q)", id)
	if topic == "" || id == "" {
		return nil, notify.ErrInvalid
	}
	if err := s.webhooks(ctx); err != nil {
		return nil, err
	}
	var (
		body    []byte
		version int64
	)
	err = s.r.QueryRowContext(ctx, `SELECT body, version FROM webhook_subs WHERE topic = ?1 AND id = ?2 AND expires_at > ?3`, topic, id, toNanos(s.now())).Scan(&body, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notify.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return notify.DecodeWebhook(topic, id, version, body)
}

// UpdateWebhook writes w if the stored Version still equals w.Version,
// and then increments w.Version: ErrConflict when it changed, ErrNotFound
// when the subscription is gone or expired.
func (s *Store) UpdateWebhook(ctx context.Context, w *notify.WebhookSubscription) (err error) {
	defer wrap(&err, "sqlitestore: UpdateWebhook(%.64q)", w.ID)
	body, err := notify.CheckWebhook(w)
	if err != nil {
		return err
	}
	if err := s.webhooks(ctx); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE webhook_subs SET body = ?1, version = version + 1, expires_at = ?2 WHERE topic = ?3 AND id = ?4 AND version = ?5 AND expires_at > ?6`,
			body, webhookExpiry(w), w.Topic, w.ID, w.Version, toNanos(s.now()))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			w.Version++
			return nil
		}
		var exp int64
		switch err := tx.QueryRowContext(ctx, `SELECT expires_at FROM webhook_subs WHERE topic = ?1 AND id = ?2`, w.Topic, w.ID).Scan(&exp); {
		case errors.Is(err, sql.ErrNoRows) || (err == nil && exp <= toNanos(s.now())):
			return notify.ErrNotFound
		case err != nil:
			return err
		}
		return notify.ErrConflict
	})
}

// DeleteWebhook deletes the live webhook subscription (w.Topic, w.ID):
// ErrNotFound when there is none.
func (s *Store) DeleteWebhook(ctx context.Context, w *notify.WebhookSubscription) (err error) {
	defer wrap(&err, "sqlitestore: DeleteWebhook(%.64q)", w.ID)
	if w.Topic == "" || w.ID == "" {
		return notify.ErrInvalid
	}
	if err := s.webhooks(ctx); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM webhook_subs WHERE topic = ?1 AND id = ?2 AND expires_at > ?3`, w.Topic, w.ID, toNanos(s.now()))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notify.ErrNotFound
		}
		return nil
	})
}

// TopicWebhooks returns up to limit live webhook subscriptions of topic
// with ids after after, in id order, and the id to pass as after for the
// next page ("" after the last): one indexed read.
func (s *Store) TopicWebhooks(ctx context.Context, topic, after string, limit int) (_ []*notify.WebhookSubscription, next string, err error) {
	defer wrap(&err, "sqlitestore: TopicWebhooks(%.64q)", topic)
	if err := notify.CheckWebhookPage(topic, limit); err != nil {
		return nil, "", err
	}
	if err := s.webhooks(ctx); err != nil {
		return nil, "", err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id, body, version FROM webhook_subs WHERE topic = ?1 AND id > ?2 AND expires_at > ?3 ORDER BY id LIMIT ?4`,
		topic, after, toNanos(s.now()), limit+1)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []*notify.WebhookSubscription
	for rows.Next() {
		var (
			id      string
			body    []byte
			version int64
		)
		if err := rows.Scan(&id, &body, &version); err != nil {
			return nil, "", err
		}
		if len(out) == limit {
			return out, out[len(out)-1].ID, nil
		}
		w, err := notify.DecodeWebhook(topic, id, version, body)
		if err != nil {
			return nil, "", err
		}
		out = append(out, w)
	}
	return out, "", rows.Err()
}

// PutWebhookVerified records that the callback of key (opaque to the
// store) passed verification, until until (a later call replaces it).
func (s *Store) PutWebhookVerified(ctx context.Context, key string, until time.Time) (err error) {
	defer wrap(&err, "sqlitestore: PutWebhookVerified")
	if err := notify.CheckVerifiedKey(key); err != nil {
		return err
	}
	if err := s.webhooks(ctx); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO webhook_verified (key, expires_at) VALUES (?1, ?2)`, key, toNanos(until))
		return err
	})
}

// WebhookVerified reports whether key's verification is recorded and
// has not expired.
func (s *Store) WebhookVerified(ctx context.Context, key string) (_ bool, err error) {
	defer wrap(&err, "sqlitestore: WebhookVerified")
	if err := notify.CheckVerifiedKey(key); err != nil {
		return false, err
	}
	if err := s.webhooks(ctx); err != nil {
		return false, err
	}
	var one int
	err = s.r.QueryRowContext(ctx, `SELECT 1 FROM webhook_verified WHERE key = ?1 AND expires_at > ?2`, key, toNanos(s.now())).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

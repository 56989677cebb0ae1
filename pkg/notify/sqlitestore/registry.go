package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpush/mcpush/pkg/notify"
)

// ApplyRegistry implements notify.Store. The idempotency check, the new
// items, their hash (notify.HashItems) and the messageID are read and
// written in one transaction. Items of a put or replace must be valid
// JSON (notify.ErrInvalid otherwise); they are stored compacted. A
// messageID is remembered per kind for Options.EventTTL.
func (s *Store) ApplyRegistry(ctx context.Context, kind, op string, items map[string]json.RawMessage, messageID string) (reg *notify.Registry, applied bool, err error) {
	defer wrap(&err, "sqlitestore: ApplyRegistry(%q, %q, %q)", kind, op, messageID)
	if err := notify.CheckRegistryChange(kind, op, items, messageID); err != nil {
		return nil, false, err
	}

	now := s.now()
	nowN, exp := toNanos(now), toNanos(now.Add(s.eventTTL))
	err = s.write(ctx, func(tx *sql.Tx) error {
		cur, err := s.readRegistry(ctx, tx.StmtContext(ctx, s.st.getRegistryW), kind)
		if err != nil {
			return err
		}
		var one int
		err = tx.StmtContext(ctx, s.st.registryMessageLive).QueryRowContext(ctx, kind, messageID, nowN).Scan(&one)
		switch {
		case err == nil:
			reg = cur
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}

		next, err := notify.ApplyOp(cur.Items, op, items)
		if err != nil {
			return err
		}
		encoded, err := encodeItems(next)
		if err != nil {
			return err
		}
		if len(encoded) > notify.MaxItemBytes {
			return tooLarge(kind+" registry", len(encoded))
		}
		hash := notify.HashItems(next)
		if _, err := tx.StmtContext(ctx, s.st.putRegistry).ExecContext(ctx, kind, hash, encoded); err != nil {
			return err
		}
		if _, err := tx.StmtContext(ctx, s.st.putRegistryMessage).ExecContext(ctx, kind, messageID, exp); err != nil {
			return err
		}
		if err := s.recordChange(ctx, tx, notify.RegistryChanged, nowN); err != nil {
			return err
		}
		reg = &notify.Registry{Kind: kind, Hash: hash}
		reg.Items, err = decodeItems(encoded)
		applied = true
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return reg, applied, nil
}

// GetRegistry implements notify.Store with one SELECT.
func (s *Store) GetRegistry(ctx context.Context, kind string) (_ *notify.Registry, err error) {
	defer wrap(&err, "sqlitestore: GetRegistry(%q)", kind)
	if !notify.ValidRegistry(kind) {
		return nil, invalid("registry kind %q", kind)
	}
	return s.readRegistry(ctx, s.st.getRegistry, kind)
}

// readRegistry reads a registry with stmt, a prepared getRegistry.
func (s *Store) readRegistry(ctx context.Context, stmt *sql.Stmt, kind string) (*notify.Registry, error) {
	reg := &notify.Registry{Kind: kind}
	var encoded []byte
	err := stmt.QueryRowContext(ctx, kind).Scan(&reg.Hash, &encoded)
	if errors.Is(err, sql.ErrNoRows) {
		reg.Items = map[string]json.RawMessage{}
		return reg, nil
	}
	if err != nil {
		return nil, err
	}
	reg.Items, err = decodeItems(encoded)
	return reg, err
}

// RegistryHashes implements notify.Store with one SELECT.
func (s *Store) RegistryHashes(ctx context.Context) (_ map[string]string, err error) {
	defer wrap(&err, "sqlitestore: RegistryHashes")
	rows, err := s.st.registryHashes.QueryContext(ctx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	hashes := make(map[string]string)
	for rows.Next() {
		var kind, hash string
		if err := rows.Scan(&kind, &hash); err != nil {
			return nil, err
		}
		hashes[kind] = hash
	}
	return hashes, rows.Err()
}

// encodeItems encodes items as one compact JSON object. HTML characters
// are not escaped, so that the stored items hash as the given ones do.
func encodeItems(items map[string]json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(items); err != nil {
		return nil, fmt.Errorf("%w: encoding registry items: %v", notify.ErrInvalid, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func decodeItems(b []byte) (map[string]json.RawMessage, error) {
	items := make(map[string]json.RawMessage)
	if err := json.Unmarshal(b, &items); err != nil {
		return nil, fmt.Errorf("decoding registry items: %w", err)
	}
	return items, nil
}

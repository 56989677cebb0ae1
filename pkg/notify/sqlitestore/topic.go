package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// AppendTopicEvent implements notify.Store. A messageID is remembered per
// topic for as long as its event is kept (Options.TopicEventTTL).
// Topic.UpdatedAt is the store's clock at the latest append.
func (s *Store) AppendTopicEvent(ctx context.Context, topic, messageID string, receivedAt time.Time, data json.RawMessage) (ev notify.TopicEvent, created bool, err error) {
	defer wrap(&err, "sqlitestore: AppendTopicEvent(%q, %q)", topic, messageID)
	if err := notify.CheckTopicEvent(topic, messageID, data); err != nil {
		return ev, false, err
	}
	now := s.now()
	nowN, exp := toNanos(now), toNanos(now.Add(s.topicTTL))
	err = s.write(ctx, func(tx *sql.Tx) error {
		var (
			seq, received, oldExp int64
			old                   []byte
		)
		err := tx.StmtContext(ctx, s.st.topicEventByMessage).QueryRowContext(ctx, topic, messageID).
			Scan(&seq, &received, &old, &oldExp)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case oldExp > nowN:
			ev = notify.TopicEvent{Topic: topic, Seq: seq, MessageID: messageID, ReceivedAt: fromNanos(received), Data: old}
			return nil
		default: // expired, not yet pruned
			if _, err := tx.StmtContext(ctx, s.st.deleteTopicEvent).ExecContext(ctx, topic, seq); err != nil {
				return err
			}
		}

		var last int64
		err = tx.StmtContext(ctx, s.st.topicLastSeq).QueryRowContext(ctx, topic).Scan(&last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		last++
		if _, err := tx.StmtContext(ctx, s.st.insertTopicEvent).ExecContext(ctx,
			topic, last, messageID, toNanos(receivedAt), []byte(data), exp); err != nil {
			return err
		}
		if _, err := tx.StmtContext(ctx, s.st.setTopic).ExecContext(ctx, topic, last, nowN); err != nil {
			return err
		}
		ev = notify.TopicEvent{Topic: topic, Seq: last, MessageID: messageID, ReceivedAt: receivedAt, Data: data}
		created = true
		return nil
	})
	if err != nil {
		return notify.TopicEvent{}, false, err
	}
	return ev, created, nil
}

// ReadTopicEvents implements notify.Store with one SELECT. A limit below 1
// is refused with notify.ErrInvalid.
func (s *Store) ReadTopicEvents(ctx context.Context, topic string, after int64, limit int) (_ []notify.TopicEvent, err error) {
	defer wrap(&err, "sqlitestore: ReadTopicEvents(%q, %d, %d)", topic, after, limit)
	if err := notify.CheckTopicRead(topic, limit); err != nil {
		return nil, err
	}
	rows, err := s.st.readTopicEvents.QueryContext(ctx, topic, after, toNanos(s.now()), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var events []notify.TopicEvent
	for rows.Next() {
		ev := notify.TopicEvent{Topic: topic}
		var received int64
		if err := rows.Scan(&ev.Seq, &ev.MessageID, &received, (*[]byte)(&ev.Data)); err != nil {
			return nil, err
		}
		ev.ReceivedAt = fromNanos(received)
		events = append(events, ev)
	}
	return events, rows.Err()
}

// Topics implements notify.Store with one SELECT. A topic stays listed,
// with its LastSeq, after all its events expired.
func (s *Store) Topics(ctx context.Context) (_ []notify.Topic, err error) {
	defer wrap(&err, "sqlitestore: Topics")
	rows, err := s.st.topics.QueryContext(ctx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var topics []notify.Topic
	for rows.Next() {
		var (
			t       notify.Topic
			updated int64
		)
		if err := rows.Scan(&t.Name, &t.LastSeq, &updated); err != nil {
			return nil, err
		}
		t.UpdatedAt = fromNanos(updated)
		topics = append(topics, t)
	}
	return topics, rows.Err()
}

// TopicHead implements notify.TopicHeads with one SELECT.
func (s *Store) TopicHead(ctx context.Context, topic string) (last int64, err error) {
	defer wrap(&err, "sqlitestore: TopicHead(%q)", topic)
	if err := notify.CheckTopicRead(topic, 1); err != nil {
		return 0, err
	}
	err = s.st.topicHead.QueryRowContext(ctx, topic).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return last, err
}

var _ notify.TopicHeads = (*Store)(nil)

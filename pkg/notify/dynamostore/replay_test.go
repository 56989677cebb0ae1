package dynamostore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// replayAPI sends every write twice and returns the second answer, as
// when the first attempt reaches DynamoDB but its response is lost and the
// SDK retries (moto, unlike DynamoDB, ignores TransactWriteItems'
// ClientRequestToken, so the retry really runs again).
type replayAPI struct{ dynamostore.API }

func replay[In, Out any](ctx context.Context, f func(context.Context, In, ...func(*dynamodb.Options)) (Out, error), in In, optFns []func(*dynamodb.Options)) (Out, error) {
	f(ctx, in, optFns...)
	return f(ctx, in, optFns...)
}

func (r replayAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return replay(ctx, r.API.PutItem, in, optFns)
}

func (r replayAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return replay(ctx, r.API.UpdateItem, in, optFns)
}

func (r replayAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return replay(ctx, r.API.DeleteItem, in, optFns)
}

func (r replayAPI) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return replay(ctx, r.API.BatchWriteItem, in, optFns)
}

func (r replayAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return replay(ctx, r.API.TransactWriteItems, in, optFns)
}

// TestRetriedWrites runs one script of calls on a Store whose writes all
// reach DynamoDB twice, and on a plain one: every call must report the
// same, and the stored state must be the same. This is what a lost
// response followed by an SDK retry does to each write.
func TestRetriedWrites(t *testing.T) {
	ctx := t.Context()
	c := client(endpoint(t))
	newStore := func(wrap func(dynamostore.API) dynamostore.API) notify.Store {
		table := newTable(t)
		if err := dynamostore.CreateTable(ctx, c, table); err != nil {
			t.Fatal(err)
		}
		return dynamostore.New(wrap(strictAPI{c}), table, nil)
	}
	plain := newStore(func(a dynamostore.API) dynamostore.API { return a })
	replayed := newStore(func(a dynamostore.API) dynamostore.API { return replayAPI{a} })

	n := time.Now().UTC().Truncate(time.Millisecond)
	sess := func(id string, subs ...string) *notify.Session {
		return &notify.Session{ID: id, ProtocolVersion: "2025-06-18", CreatedAt: n, ExpiresAt: n.Add(time.Hour),
			Subscriptions: subs, NotifiedHashes: map[string]string{notify.RegistryTools: "h0"}}
	}
	cas := func(old, new string) *notify.AppendOptions {
		return &notify.AppendOptions{NotifiedHash: &notify.HashCAS{Registry: notify.RegistryTools, Old: old, New: new}}
	}
	key := func(k string) *notify.AppendOptions { return &notify.AppendOptions{IdempotencyKey: k} }
	type call struct {
		name string
		do   func(notify.Store) string
	}
	appendCall := func(id string, opts *notify.AppendOptions, data ...string) call {
		return call{fmt.Sprintf("Append(%s, %v)", id, data), func(st notify.Store) string {
			var b [][]byte
			for _, d := range data {
				b = append(b, []byte(d))
			}
			seq, ok, err := st.Append(ctx, id, "s", b, opts)
			return fmt.Sprint(seq, ok, errString(err))
		}}
	}
	appendEachCall := func(ids []string, upTo int64) call {
		return call{fmt.Sprintf("AppendEach(%v, %d)", ids, upTo), func(st notify.Store) string {
			got, err := st.AppendEach(ctx, ids, "u1", upTo, func(s *notify.Session, p notify.Position) [][]byte {
				return [][]byte{fmt.Appendf(nil, "%s %d..%d", s.ID, p.At, upTo), []byte(s.LogLevel)}
			})
			return fmt.Sprint(got, errString(err))
		}}
	}
	script := []call{
		{"CreateSession(a)", func(st notify.Store) string { return errString(st.CreateSession(ctx, sess("a"))) }},
		{"CreateSession(a) again", func(st notify.Store) string { return errString(st.CreateSession(ctx, sess("a"))) }},
		{"CreateSession(b, subs)", func(st notify.Store) string { return errString(st.CreateSession(ctx, sess("b", "u1", "u2"))) }},
		{"CreateSession(b) again", func(st notify.Store) string { return errString(st.CreateSession(ctx, sess("b", "u3"))) }},
		{"CreateSession(expired)", func(st notify.Store) string {
			s := sess("old", "u1")
			s.ExpiresAt = n.Add(-time.Minute)
			return errString(st.CreateSession(ctx, s))
		}},
		{"CreateSession(expired) replaced", func(st notify.Store) string { return errString(st.CreateSession(ctx, sess("old"))) }},
		{"UpdateSession(a)", func(st notify.Store) string {
			s := sess("a")
			s.LogLevel = "debug"
			err := st.UpdateSession(ctx, s)
			return fmt.Sprint(s.Version, errString(err))
		}},
		{"UpdateSession(a) stale", func(st notify.Store) string { return errString(st.UpdateSession(ctx, sess("a"))) }},
		appendCall("a", nil, "1"),
		appendCall("a", nil, "2", "3"),
		appendCall("a", key("k"), "4"),
		appendCall("a", key("k"), "4 again"),
		appendCall("a", cas("h0", "h1"), "5"),
		appendCall("a", cas("h0", "h2"), "5 again"),
		appendCall("missing", nil, "x"),
		appendEachCall([]string{"a", "b", "missing"}, 1),
		{"Subscribe(a, u1) for AppendEach", func(st notify.Store) string { return errString(st.Subscribe(ctx, "a", "u1")) }},
		appendEachCall([]string{"b", "a"}, 1),
		appendEachCall([]string{"b"}, 3),
		appendEachCall([]string{"a", "b"}, 5), // the data shows the positions
		{"MarkDelivered", func(st notify.Store) string { return errString(st.MarkDelivered(ctx, "a", 3)) }},
		{"PutMessage", func(st notify.Store) string {
			ok, err := st.PutMessage(ctx, "a", "m", []byte("v"))
			return fmt.Sprint(ok, errString(err))
		}},
		{"PutMessage again", func(st notify.Store) string {
			ok, err := st.PutMessage(ctx, "a", "m", []byte("w"))
			return fmt.Sprint(ok, errString(err))
		}},
		{"Subscribe", func(st notify.Store) string { return errString(st.Subscribe(ctx, "a", "u1")) }},
		{"Unsubscribe", func(st notify.Store) string { return errString(st.Unsubscribe(ctx, "b", "u2")) }},
		{"AppendTopicEvent", func(st notify.Store) string {
			ev, ok, err := st.AppendTopicEvent(ctx, "t", "m1", n, json.RawMessage(`1`))
			return fmt.Sprint(ev.Seq, string(ev.Data), ok, errString(err))
		}},
		{"AppendTopicEvent again", func(st notify.Store) string {
			ev, ok, err := st.AppendTopicEvent(ctx, "t", "m1", n, json.RawMessage(`2`))
			return fmt.Sprint(ev.Seq, string(ev.Data), ok, errString(err))
		}},
		{"AppendTopicEvent(m2)", func(st notify.Store) string {
			ev, ok, err := st.AppendTopicEvent(ctx, "t", "m2", n, json.RawMessage(`3`))
			return fmt.Sprint(ev.Seq, string(ev.Data), ok, errString(err))
		}},
		{"ApplyRegistry", func(st notify.Store) string {
			reg, ok, err := st.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, map[string]json.RawMessage{"x": json.RawMessage(`{}`)}, "r1")
			return fmt.Sprint(registryString(reg), ok, errString(err))
		}},
		{"ApplyRegistry again", func(st notify.Store) string {
			reg, ok, err := st.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, map[string]json.RawMessage{"y": json.RawMessage(`{}`)}, "r1")
			return fmt.Sprint(registryString(reg), ok, errString(err))
		}},
		{"DeleteSession(b)", func(st notify.Store) string { return errString(st.DeleteSession(ctx, "b")) }},
		{"DeleteSession(b) again", func(st notify.Store) string { return errString(st.DeleteSession(ctx, "b")) }},
		{"state", func(st notify.Store) string { return dump(ctx, st, []string{"a", "b", "old"}, []string{"u1", "u2"}) }},
	}
	for _, c := range script {
		want, got := c.do(plain), c.do(replayed)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: replayed writes differ from plain ones (-plain +replayed):\n%s", c.name, diff)
		}
	}
}

func errString(err error) string {
	for _, s := range []error{notify.ErrNotFound, notify.ErrExists, notify.ErrConflict, notify.ErrTooLarge, notify.ErrInvalid} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

func registryString(r *notify.Registry) string {
	if r == nil {
		return "<nil>"
	}
	var keys []string
	for k := range r.Items {
		keys = append(keys, k)
	}
	return fmt.Sprintf("%s %s %q", r.Kind, r.Hash, keys)
}

// dump describes the state of sessions, their streams "s" and
// SessionStream, and subscribers.
func dump(ctx context.Context, st notify.Store, ids, uris []string) string {
	var b strings.Builder
	for _, id := range ids {
		s, err := st.GetSession(ctx, id)
		if err != nil {
			fmt.Fprintf(&b, "%s: %s\n", id, errString(err))
			continue
		}
		fmt.Fprintf(&b, "%s: v%d subs %q hashes %v delivered %d log %s head %d", id, s.Version, s.Subscriptions, s.NotifiedHashes, s.Delivered, s.LogLevel, s.StreamHead)
		for _, stream := range []string{"s", notify.SessionStream} {
			evs, err := st.ReadEvents(ctx, id, stream, 0, 100)
			fmt.Fprintf(&b, " %s events", stream)
			for _, ev := range evs {
				fmt.Fprintf(&b, " %d=%s", ev.Seq, ev.Data)
			}
			fmt.Fprintf(&b, " %s", errString(err))
		}
		b.WriteString("\n")
	}
	for _, uri := range uris {
		subs, err := st.Subscribers(ctx, uri)
		fmt.Fprintf(&b, "%s: %q %s\n", uri, subs, errString(err))
	}
	tevs, err := st.ReadTopicEvents(ctx, "t", 0, 10)
	for _, ev := range tevs {
		fmt.Fprintf(&b, "topic %d=%s %s\n", ev.Seq, ev.Data, ev.MessageID)
	}
	fmt.Fprintf(&b, "topic %s\n", errString(err))
	return b.String()
}

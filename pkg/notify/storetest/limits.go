package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcpush/mcpush/pkg/notify"
)

// testInvalid checks that empty ids and keys, unknown registry kinds and
// unknown registry ops are ErrInvalid, and that nothing of them is stored.
func testInvalid(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	createSession(t, st, "s1")
	item := items{"a": json.RawMessage(`{}`)}
	tools := notify.RegistryTools
	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"CreateSession(empty id)", func(ctx context.Context) error {
			return st.CreateSession(ctx, newSession(""))
		}},
		{"CreateSession(empty subscription)", func(ctx context.Context) error {
			sess := newSession("bad")
			sess.Subscriptions = []string{""}
			return st.CreateSession(ctx, sess)
		}},
		{"CreateSession(unknown registry in NotifiedHashes)", func(ctx context.Context) error {
			sess := newSession("bad")
			sess.NotifiedHashes = map[string]string{"widgets": "h"}
			return st.CreateSession(ctx, sess)
		}},
		{"GetSession(empty id)", func(ctx context.Context) error {
			_, err := st.GetSession(ctx, "")
			return err
		}},
		{"UpdateSession(empty id)", func(ctx context.Context) error {
			return st.UpdateSession(ctx, newSession(""))
		}},
		{"DeleteSession(empty id)", func(ctx context.Context) error {
			return st.DeleteSession(ctx, "")
		}},
		{"Append(empty session)", func(ctx context.Context) error {
			_, _, err := st.Append(ctx, "", "s", bytesOf("x"), nil)
			return err
		}},
		{"Append(empty stream)", func(ctx context.Context) error {
			_, _, err := st.Append(ctx, "s1", "", bytesOf("x"), nil)
			return err
		}},
		{"Append(no data)", func(ctx context.Context) error {
			_, _, err := st.Append(ctx, "s1", "s", nil, nil)
			return err
		}},
		{"Append(over MaxAppendBatch)", func(ctx context.Context) error {
			data := make([][]byte, notify.MaxAppendBatch+1)
			for i := range data {
				data[i] = []byte("x")
			}
			_, _, err := st.Append(ctx, "s1", "s", data, nil)
			return err
		}},
		{"Append(unknown registry)", func(ctx context.Context) error {
			_, _, err := st.Append(ctx, "s1", "s", bytesOf("x"), &notify.AppendOptions{
				NotifiedHash: &notify.HashCAS{Registry: "widgets", Old: "", New: "h"}})
			return err
		}},
		{"ReadEvents(empty session)", func(ctx context.Context) error {
			_, err := st.ReadEvents(ctx, "", "s", 0, 10)
			return err
		}},
		{"ReadEvents(empty stream)", func(ctx context.Context) error {
			_, err := st.ReadEvents(ctx, "s1", "", 0, 10)
			return err
		}},
		{"MarkDelivered(empty session)", func(ctx context.Context) error {
			return st.MarkDelivered(ctx, "", 1)
		}},
		{"PutMessage(empty session)", func(ctx context.Context) error {
			_, err := st.PutMessage(ctx, "", "k", []byte("x"))
			return err
		}},
		{"PutMessage(empty key)", func(ctx context.Context) error {
			_, err := st.PutMessage(ctx, "s1", "", []byte("x"))
			return err
		}},
		{"GetMessage(empty session)", func(ctx context.Context) error {
			_, err := st.GetMessage(ctx, "", "k")
			return err
		}},
		{"GetMessage(empty key)", func(ctx context.Context) error {
			_, err := st.GetMessage(ctx, "s1", "")
			return err
		}},
		{"Subscribe(empty session)", func(ctx context.Context) error {
			return st.Subscribe(ctx, "", "file:///u")
		}},
		{"Subscribe(empty uri)", func(ctx context.Context) error {
			return st.Subscribe(ctx, "s1", "")
		}},
		{"Unsubscribe(empty uri)", func(ctx context.Context) error {
			return st.Unsubscribe(ctx, "s1", "")
		}},
		{"Subscribers(empty uri)", func(ctx context.Context) error {
			_, err := st.Subscribers(ctx, "")
			return err
		}},
		{"AppendTopicEvent(empty topic)", func(ctx context.Context) error {
			_, _, err := st.AppendTopicEvent(ctx, "", "m", now(), json.RawMessage(`1`))
			return err
		}},
		{"AppendTopicEvent(empty message id)", func(ctx context.Context) error {
			_, _, err := st.AppendTopicEvent(ctx, "t", "", now(), json.RawMessage(`1`))
			return err
		}},
		{"ReadTopicEvents(empty topic)", func(ctx context.Context) error {
			_, err := st.ReadTopicEvents(ctx, "", 0, 10)
			return err
		}},
		{"ApplyRegistry(unknown kind)", func(ctx context.Context) error {
			_, _, err := st.ApplyRegistry(ctx, "widgets", notify.OpPut, item, "m")
			return err
		}},
		{"ApplyRegistry(empty kind)", func(ctx context.Context) error {
			_, _, err := st.ApplyRegistry(ctx, "", notify.OpPut, item, "m")
			return err
		}},
		{"ApplyRegistry(unknown op)", func(ctx context.Context) error {
			_, _, err := st.ApplyRegistry(ctx, tools, "upsert", item, "m")
			return err
		}},
		{"ApplyRegistry(empty message id)", func(ctx context.Context) error {
			_, _, err := st.ApplyRegistry(ctx, tools, notify.OpPut, item, "")
			return err
		}},
		{"ApplyRegistry(empty item key)", func(ctx context.Context) error {
			_, _, err := st.ApplyRegistry(ctx, tools, notify.OpPut, items{"": json.RawMessage(`{}`)}, "m")
			return err
		}},
		{"GetRegistry(unknown kind)", func(ctx context.Context) error {
			_, err := st.GetRegistry(ctx, "widgets")
			return err
		}},
	}
	for _, c := range calls {
		if err := c.call(ctx); !errors.Is(err, notify.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", c.name, err)
		}
	}

	// Nothing was stored.
	if _, err := st.GetSession(ctx, "bad"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetSession(bad): got %v, want ErrNotFound", err)
	}
	got := getSession(t, st, "s1")
	if len(got.Subscriptions) != 0 || len(got.NotifiedHashes) != 0 || got.Delivered != 0 {
		t.Errorf("s1 changed: Subscriptions %q, NotifiedHashes %v, Delivered %d", got.Subscriptions, got.NotifiedHashes, got.Delivered)
	}
	if evs := readEvents(t, st, "s1", "s", 0, 10); len(evs) != 0 {
		t.Errorf("s1 has events %v", evs)
	}
	if topics, err := st.Topics(ctx); err != nil || len(topics) != 0 {
		t.Errorf("Topics() = %v, %v; want none", topics, err)
	}
	checkHashes(t, st, "after invalid calls", map[string]string{})
	checkSubscribers(t, st, "file:///u")
}

// testTooLarge checks that every value over notify.MaxItemBytes is
// ErrTooLarge and leaves no trace, and that a value of exactly
// MaxItemBytes is accepted.
func testTooLarge(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	createSession(t, st, "s1")
	big := make([]byte, notify.MaxItemBytes+1)
	max := big[:notify.MaxItemBytes]

	// Append is all or nothing: one big event fails the batch.
	if _, _, err := st.Append(ctx, "s1", "s", [][]byte{[]byte("a"), big, []byte("c")}, nil); !errors.Is(err, notify.ErrTooLarge) {
		t.Errorf("Append(batch with a big event): got %v, want ErrTooLarge", err)
	}
	if _, _, err := st.Append(ctx, "s1", "s", [][]byte{big}, &notify.AppendOptions{IdempotencyKey: "k",
		NotifiedHash: &notify.HashCAS{Registry: notify.RegistryTools, Old: "", New: "h"}}); !errors.Is(err, notify.ErrTooLarge) {
		t.Errorf("Append(big event, with conditions): got %v, want ErrTooLarge", err)
	}
	// A batch of events each within MaxItemBytes but over MaxAppendBytes
	// in all is refused whole.
	var many [][]byte
	for n := 0; n <= notify.MaxAppendBytes; n += len(max) {
		many = append(many, max)
	}
	if _, _, err := st.Append(ctx, "s1", "s", many, nil); !errors.Is(err, notify.ErrTooLarge) {
		t.Errorf("Append(%d events of MaxItemBytes): got %v, want ErrTooLarge", len(many), err)
	}
	if evs := readEvents(t, st, "s1", "s", 0, 10); len(evs) != 0 {
		t.Errorf("after ErrTooLarge: %d events stored", len(evs))
	}
	if h := getSession(t, st, "s1").NotifiedHashes; len(h) != 0 {
		t.Errorf("after ErrTooLarge: NotifiedHashes = %v, want none", h)
	}
	seq, ok, err := st.Append(ctx, "s1", "s", [][]byte{max}, &notify.AppendOptions{IdempotencyKey: "k"})
	if err != nil || !ok || seq != 1 {
		t.Errorf("Append(MaxItemBytes, key of the failed append) = %d, %t, %v; want 1, true, nil", seq, ok, err)
	}

	if _, err := st.PutMessage(ctx, "s1", "k", big); !errors.Is(err, notify.ErrTooLarge) {
		t.Errorf("PutMessage(big): got %v, want ErrTooLarge", err)
	}
	if _, err := st.GetMessage(ctx, "s1", "k"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetMessage after ErrTooLarge: got %v, want ErrNotFound", err)
	}
	if created, err := st.PutMessage(ctx, "s1", "k", max); err != nil || !created {
		t.Errorf("PutMessage(MaxItemBytes) = %t, %v; want true, nil", created, err)
	}

	bigJSON := jsonString(notify.MaxItemBytes + 1)
	if _, _, err := st.AppendTopicEvent(ctx, "t", "m1", now(), bigJSON); !errors.Is(err, notify.ErrTooLarge) {
		t.Errorf("AppendTopicEvent(big): got %v, want ErrTooLarge", err)
	}
	if topics, err := st.Topics(ctx); err != nil || len(topics) != 0 {
		t.Errorf("Topics() after ErrTooLarge = %v, %v; want none", topics, err)
	}
	ev, created, err := st.AppendTopicEvent(ctx, "t", "m1", now(), jsonString(notify.MaxItemBytes))
	if err != nil || !created || ev.Seq != 1 {
		t.Errorf("AppendTopicEvent(MaxItemBytes, message id of the failed one) = seq %d, %t, %v; want 1, true, nil", ev.Seq, created, err)
	}

	// The limit applies to the registry's whole item set after the op.
	kind := notify.RegistryResources
	half := items{"a": jsonString(notify.MaxItemBytes / 2)}
	if _, ok, err := st.ApplyRegistry(ctx, kind, notify.OpPut, half, "r1"); err != nil || !ok {
		t.Fatalf("ApplyRegistry(half the limit): %t, %v", ok, err)
	}
	for _, c := range []struct {
		name  string
		items items
	}{
		{"item over the limit", items{"b": bigJSON}},
		{"items together over the limit", items{"b": jsonString(notify.MaxItemBytes / 2)}},
	} {
		if _, _, err := st.ApplyRegistry(ctx, kind, notify.OpPut, c.items, "r2"); !errors.Is(err, notify.ErrTooLarge) {
			t.Errorf("ApplyRegistry(%s): got %v, want ErrTooLarge", c.name, err)
		}
	}
	reg, err := st.GetRegistry(ctx, kind)
	if err != nil {
		t.Fatal(err)
	}
	checkRegistry(t, "after ErrTooLarge", reg, kind, half)
	checkHashes(t, st, "after ErrTooLarge", map[string]string{kind: notify.HashItems(half)})
	// The failed message id was not used up.
	small := items{"b": json.RawMessage(`{}`)}
	reg, ok, err = st.ApplyRegistry(ctx, kind, notify.OpPut, small, "r2")
	if err != nil || !ok {
		t.Fatalf("ApplyRegistry(small, message id of the failed one) = %t, %v; want true, nil", ok, err)
	}
	checkRegistry(t, "ApplyRegistry(small)", reg, kind, items{"a": half["a"], "b": small["b"]})

}

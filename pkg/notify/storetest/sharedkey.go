package storetest

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mcpush/mcpush/pkg/notify"
)

// testSharedKey checks notify.SharedKeys: racing callers on two Stores of
// the same database, each offering its own value, all get the one value
// that won; later callers get it too, whatever they offer; names are
// independent; bad arguments are refused.
func testSharedKey(t *testing.T, s *suite) {
	st, dsn := s.storeDSN(t)
	other := s.reopen(t, dsn)
	ctx := t.Context()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got = map[string]int{}
	)
	for i := range 8 {
		wg.Go(func() {
			sk := []Store{st, other}[i%2]
			v, err := sk.SharedKey(ctx, "requestState", fmt.Appendf(nil, "value-%d", i))
			if err != nil {
				t.Errorf("SharedKey: %v", err)
				return
			}
			mu.Lock()
			got[string(v)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(got) != 1 {
		t.Fatalf("racing SharedKey calls got %v, want one value for all", got)
	}
	var won string
	for v := range got {
		won = v
	}
	if !strings.HasPrefix(won, "value-") {
		t.Errorf("SharedKey = %q, want one of the offered values", won)
	}
	sk := st
	if v, err := sk.SharedKey(ctx, "requestState", []byte("late")); err != nil || string(v) != won {
		t.Errorf("a later SharedKey = %q, %v; want %q", v, err, won)
	}
	if v, err := sk.SharedKey(ctx, "other", []byte("x")); err != nil || string(v) != "x" {
		t.Errorf("SharedKey of another name = %q, %v; want x", v, err)
	}
	for _, c := range []struct {
		name  string
		value []byte
	}{
		{"", []byte("x")},
		{strings.Repeat("n", notify.MaxSharedKeyName+1), []byte("x")},
		{"k", nil},
		{"k", bytes.Repeat([]byte("v"), notify.MaxSharedKeyValue+1)},
	} {
		if _, err := sk.SharedKey(ctx, c.name, c.value); !wantErr(err, notify.ErrInvalid) {
			t.Errorf("SharedKey(%d-byte name, %d-byte value) = %v, want ErrInvalid", len(c.name), len(c.value), err)
		}
	}
	if v, err := sk.SharedKey(ctx, "k", []byte("y")); err != nil || string(v) != "y" {
		t.Errorf("SharedKey(k) after refused calls = %q, %v; want y (nothing stored by them)", v, err)
	}
}

package mcp

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestEventCursor(t *testing.T) {
	oldKey, newKey := []byte("old-key-0123456789abcdef0123456789"), []byte("new-key-0123456789abcdef0123456789")
	before := &stateSigner{keys: [][]byte{oldKey}, ttl: time.Minute, now: time.Now}
	during := &stateSigner{keys: [][]byte{newKey, oldKey}, ttl: time.Minute, now: time.Now}
	after := &stateSigner{keys: [][]byte{newKey}, ttl: time.Minute, now: time.Now}
	c := eventCursor{Name: "order.created", Topic: "orders", Seq: 42}
	tok := before.signCursor(c)
	for _, s := range []*stateSigner{before, during} {
		got, err := s.verifyCursor(tok, "order.created")
		if err != nil || *got != c {
			t.Errorf("verifyCursor = %+v, %v; want %+v", got, err, c)
		}
	}
	if _, err := after.verifyCursor(tok, "order.created"); !errors.Is(err, ErrCursorSignature) {
		t.Errorf("after the old key is gone: %v, want ErrCursorSignature", err)
	}
	if _, err := before.verifyCursor(tok, "order.shipped"); !errors.Is(err, ErrCursorOtherType) {
		t.Errorf("for another type: %v, want ErrCursorOtherType", err)
	}
	// A requestState signed with the same key is no cursor, and a cursor
	// no requestState.
	state := before.sign(stateBody{Method: "tools/call"})
	if _, err := before.verifyCursor("ev1."+state, "order.created"); err == nil {
		t.Error("a requestState passed for a cursor")
	}
	if _, err := before.verify(strings.TrimPrefix(tok, "ev1.")); err == nil {
		t.Error("a cursor passed for a requestState")
	}
}

// FuzzVerifyCursor: the cursor decoder never panics, refuses with one of
// its three errors, and accepts only what a key signed for the type.
func FuzzVerifyCursor(f *testing.F) {
	s := &stateSigner{keys: [][]byte{[]byte("fuzz-key-0123456789abcdef0123456789")}, ttl: time.Minute, now: time.Now}
	f.Add(s.signCursor(eventCursor{Name: "e", Topic: "t", Seq: 1}), "e")
	f.Add(s.signCursor(eventCursor{Name: "e", Topic: "t", Seq: 1}), "f")
	f.Add("ev1.e30.AAAA", "e")
	f.Add("ev1..", "")
	f.Add("hello", "e")
	f.Fuzz(func(t *testing.T, token, name string) {
		c, err := s.verifyCursor(token, name)
		if err != nil {
			if !errors.Is(err, ErrCursorMalformed) && !errors.Is(err, ErrCursorSignature) && !errors.Is(err, ErrCursorOtherType) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if c.Name != name || c.Topic == "" || c.Seq < 0 {
			t.Fatalf("accepted %q as %+v for %q", token, c, name)
		}
		again, err := s.verifyCursor(s.signCursor(*c), name)
		if err != nil || *again != *c {
			t.Fatalf("re-signed %+v: %+v, %v", c, again, err)
		}
	})
}

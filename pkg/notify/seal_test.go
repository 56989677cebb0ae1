package notify_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mcpush/mcpush/pkg/notify"
)

// TestSealer: a sealed value opens under the same keys and aad, and under
// a rotation that lists the sealing key second; not under another aad,
// another label, other keys or a flipped bit; the plaintext is not in the
// sealed bytes.
func TestSealer(t *testing.T) {
	k0, k1 := []byte("first-state-key-0123456789abcdef"), []byte("second-state-key-0123456789abcde")
	s, err := notify.NewSealer([][]byte{k0}, "webhook secrets")
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte(`{"c":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`)
	sealed := s.Seal(plain, []byte("sub_1"))
	if bytes.Contains(sealed, []byte("whsec_")) || bytes.Equal(sealed, s.Seal(plain, []byte("sub_1"))) {
		t.Errorf("sealed %q: holds the plaintext or is not randomized", sealed)
	}
	if got, err := s.Open(sealed, []byte("sub_1")); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("Open = %q, %v", got, err)
	}
	rotated, _ := notify.NewSealer([][]byte{k1, k0}, "webhook secrets")
	if got, err := rotated.Open(sealed, []byte("sub_1")); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("Open after a rotation = %q, %v", got, err)
	}
	otherLabel, _ := notify.NewSealer([][]byte{k0}, "other")
	otherKey, _ := notify.NewSealer([][]byte{k1}, "webhook secrets")
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)-1] ^= 1
	for name, f := range map[string]func() ([]byte, error){
		"another aad":   func() ([]byte, error) { return s.Open(sealed, []byte("sub_2")) },
		"another label": func() ([]byte, error) { return otherLabel.Open(sealed, []byte("sub_1")) },
		"another key":   func() ([]byte, error) { return otherKey.Open(sealed, []byte("sub_1")) },
		"a flipped bit": func() ([]byte, error) { return s.Open(flipped, []byte("sub_1")) },
		"truncated":     func() ([]byte, error) { return s.Open(sealed[:10], []byte("sub_1")) },
	} {
		if _, err := f(); !errors.Is(err, notify.ErrUnsealable) {
			t.Errorf("Open with %s = %v, want ErrUnsealable", name, err)
		}
	}
}

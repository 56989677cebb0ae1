package webhook

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseSecret(t *testing.T) {
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", n))) }
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"24 bytes", "whsec_" + b64(24), true},
		{"32 bytes", "whsec_" + b64(32), true},
		{"64 bytes", "whsec_" + b64(64), true},
		{"23 bytes", "whsec_" + b64(23), false},
		{"65 bytes", "whsec_" + b64(65), false},
		{"wrong prefix", "whsk_" + b64(32), false},
		{"no prefix", b64(32), false},
		{"upper-case prefix", "WHSEC_" + b64(32), false},
		{"bad base64", "whsec_" + strings.Repeat("!", 44), false},
		{"url-safe base64", "whsec_" + strings.Repeat("-", 44), false},
		{"unpadded", "whsec_" + strings.TrimRight(b64(25), "="), false},
		{"line break inside", "whsec_" + b64(32)[:20] + "\r\n" + b64(32)[20:], false},
		{"empty", "", false},
		{"prefix only", "whsec_", false},
		{"very long", "whsec_" + strings.Repeat("A", 10000), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSecret(tt.in)
			if tt.ok {
				if err != nil {
					t.Fatalf("ParseSecret: %v", err)
				}
				if s.Reveal() != tt.in {
					t.Errorf("Reveal() does not round-trip")
				}
				return
			}
			if !errors.Is(err, ErrInvalidSecret) {
				t.Fatalf("ParseSecret: err %v, want ErrInvalidSecret", err)
			}
			if len(tt.in) > len(SecretPrefix) && strings.Contains(err.Error(), tt.in[len(SecretPrefix):]) {
				t.Errorf("the error echoes the secret: %v", err)
			}
		})
	}
}

// TestSecretNotPrinted: no formatting verb reveals the key.
func TestSecretNotPrinted(t *testing.T) {
	s := newSecret(t, 32)
	key := s.Reveal()[len(SecretPrefix):]
	type holder struct{ S Secret }
	for _, out := range []string{
		s.String(), fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s),
		fmt.Sprintf("%v %+v %#v", holder{s}, holder{s}, holder{s}),
		fmt.Sprintf("%v", []Secret{s}),
	} {
		if strings.Contains(out, key) {
			t.Errorf("%q reveals the key", out)
		}
	}
	if !strings.Contains(s.String(), "redacted") {
		t.Errorf("String() = %q", s.String())
	}
}

// FuzzParseSecret: any input is either refused with ErrInvalidSecret or
// a 24..64-byte key that round-trips through Reveal.
func FuzzParseSecret(f *testing.F) {
	f.Add("whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 24)))
	f.Add("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	f.Add("whsec_")
	f.Add("whsec_====")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSecret(in)
		if err != nil {
			if !errors.Is(err, ErrInvalidSecret) {
				t.Fatalf("error %v does not wrap ErrInvalidSecret", err)
			}
			return
		}
		if n := len(s.key); n < MinSecretBytes || n > MaxSecretBytes {
			t.Fatalf("%d-byte key accepted", n)
		}
		if s.Reveal() != in {
			t.Fatalf("Reveal %q != input %q", s.Reveal(), in)
		}
	})
}

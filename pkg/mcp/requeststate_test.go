package mcp

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStateSigner(t *testing.T) {
	now := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	oldKey, newKey := []byte("old-key-0123456789abcdef0123456789"), []byte("new-key-0123456789abcdef0123456789")
	before := &stateSigner{keys: [][]byte{oldKey}, ttl: time.Minute, now: clock}
	during := &stateSigner{keys: [][]byte{newKey, oldKey}, ttl: time.Minute, now: clock}
	after := &stateSigner{keys: [][]byte{newKey}, ttl: time.Minute, now: clock}
	body := stateBody{Method: "tools/call", Name: "ask", Principal: principalTag("alice"), Data: []byte("d")}
	old, current := before.sign(body), during.sign(body)
	payload, sig, _ := strings.Cut(current, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	tampered := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"n":"ask"`, `"n":"asl"`, 1))) + "." + sig

	tests := []struct {
		name   string
		signer *stateSigner
		token  string
		later  time.Duration
		want   error
	}{
		{"same key", before, old, 0, nil},
		{"old key, during rotation", during, old, 0, nil},
		{"new key, during rotation", during, current, 0, nil},
		{"new key, before rotation reached this process", before, current, 0, ErrStateSignature},
		{"retired key", after, old, 0, ErrStateSignature},
		{"tampered", during, tampered, 0, ErrStateSignature},
		{"forged", during, "eyJ2IjoxfQ.AAAA", 0, ErrStateSignature},
		{"no signature", during, payload, 0, ErrStateMalformed},
		{"expired", during, current, time.Minute, ErrStateExpired},
		{"too long", during, strings.Repeat("a", maxStateBytes) + ".b", 0, ErrStateMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := *tt.signer
			s.now = func() time.Time { return now.Add(tt.later) }
			got, err := s.verify(tt.token)
			if !errors.Is(err, tt.want) {
				t.Fatalf("verify: %v, want %v", err, tt.want)
			}
			if err == nil {
				want := body
				want.Version, want.Expires = 1, now.Add(time.Minute).UnixMilli()
				if diff := cmp.Diff(&want, got); diff != "" {
					t.Errorf("verified body (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestParseStateKeys(t *testing.T) {
	long := strings.Repeat("k", 32)
	if keys, err := ParseStateKeys(" " + long + "1 , " + long + "2 ,"); err != nil || len(keys) != 2 || string(keys[0]) != long+"1" {
		t.Errorf("ParseStateKeys: %q, %v; want two keys, the first first", keys, err)
	}
	for _, bad := range []string{"", " , ", "short", long + ",short"} {
		if _, err := ParseStateKeys(bad); err == nil {
			t.Errorf("ParseStateKeys(%q) accepted it", bad)
		}
	}
}

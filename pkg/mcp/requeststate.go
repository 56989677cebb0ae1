package mcp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// requestState tokens: base64url(JSON body) "." base64url(HMAC-SHA256).
// The body names what the state belongs to (method, name, a tag of the
// principal) and when it expires, so a token is useless for another
// request, another principal, or after StateTTL. The key is shared by
// every process (ServerOptions.StateKeys): the first key signs, every key
// verifies, so keys rotate without breaking requests in flight.

// stateBody is the signed content of a requestState.
type stateBody struct {
	Version   int    `json:"v"`
	Expires   int64  `json:"exp"` // Unix milliseconds
	Method    string `json:"m"`
	Name      string `json:"n,omitempty"`
	Principal string `json:"p,omitempty"` // principalTag
	Data      []byte `json:"d,omitempty"`
	// Answers are the client's answers to the server-to-client requests
	// of earlier rounds (Elicit, CreateMessage, ListRoots), by key.
	Answers map[string]json.RawMessage `json:"a,omitempty"`
	// Asked are the keys of the input requests of the round that issued
	// the state: the only inputResponses a retry with it may carry.
	Asked []string `json:"q,omitempty"`
}

// stateSigner signs and verifies requestState tokens. Immutable after
// construction; safe for concurrent use.
type stateSigner struct {
	keys [][]byte // keys[0] signs; all verify
	ttl  time.Duration
	now  func() time.Time
}

func (s *stateSigner) mac(key []byte, payload string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("mcpush requestState v1\x00"))
	h.Write([]byte(payload))
	return h.Sum(nil)
}

func (s *stateSigner) sign(b stateBody) string {
	b.Version = 1
	b.Expires = s.now().Add(s.ttl).UnixMilli()
	raw, _ := json.Marshal(b)
	payload := base64.RawURLEncoding.EncodeToString(raw)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.mac(s.keys[0], payload))
}

func (s *stateSigner) verify(token string) (*stateBody, error) {
	payload, sig, ok := strings.Cut(token, ".")
	if !ok || payload == "" || len(token) > maxStateBytes {
		return nil, ErrStateMalformed
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return nil, ErrStateMalformed
	}
	verified := false
	for _, k := range s.keys {
		if hmac.Equal(got, s.mac(k, payload)) {
			verified = true
			break
		}
	}
	if !verified {
		return nil, ErrStateSignature
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, ErrStateMalformed
	}
	var b stateBody
	if json.Unmarshal(raw, &b) != nil || b.Version != 1 {
		return nil, ErrStateMalformed
	}
	if s.now().UnixMilli() >= b.Expires {
		return nil, ErrStateExpired
	}
	return &b, nil
}

// maxStateBytes bounds a requestState a client sends back.
const maxStateBytes = 64 << 10

// principalTag identifies a principal inside a token without revealing it.
func principalTag(principal string) string {
	if principal == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(principal))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// ParseStateKeys parses the value of MCPUSH_STATE_KEYS: comma-separated
// keys, the current one first, each at least 32 characters (e.g. 32 random
// bytes, base64). It is for mains; the result goes to
// ServerOptions.StateKeys. It is notify.ParseStateKeys.
func ParseStateKeys(s string) ([][]byte, error) { return notify.ParseStateKeys(s) }

package webhook

import (
	"encoding/base64"
	"fmt"
	"strings"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// SecretPrefix starts every Standard Webhooks symmetric secret.
const SecretPrefix = "whsec_"

// Secret key sizes (decoded bytes) that ParseSecret accepts, per SEP-3415.
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
)

// maxSecretLen bounds the text ParseSecret decodes: the prefix and the
// padded base64 of MaxSecretBytes.
var maxSecretLen = len(SecretPrefix) + base64.StdEncoding.EncodedLen(MaxSecretBytes)

// Secret is a parsed Standard Webhooks symmetric secret: the HMAC-SHA256
// key. Its String and GoString methods never show the key, so a Secret
// that reaches a log or an error message stays secret; Reveal returns it
// for storage. The zero Secret is invalid. A Secret is immutable and safe
// for concurrent use.
type Secret struct {
	key []byte
}

// ParseSecret parses s, which must be "whsec_" followed by the standard
// (padded) base64 encoding of 24 to 64 bytes. Its errors wrap
// ErrInvalidSecret and never contain s.
func ParseSecret(s string) (Secret, error) {
	if !strings.HasPrefix(s, SecretPrefix) {
		return Secret{}, fmt.Errorf("%w: it must start with %q", ErrInvalidSecret, SecretPrefix)
	}
	if len(s) > maxSecretLen {
		return Secret{}, fmt.Errorf("%w: longer than %d characters (%d to %d bytes in base64)", ErrInvalidSecret, maxSecretLen, MinSecretBytes, MaxSecretBytes)
	}
	enc := s[len(SecretPrefix):]
	key, err := base64.StdEncoding.Strict().DecodeString(enc)
	// Strict still skips \r and \n: require the canonical encoding, so a
	// secret has one spelling and Reveal gives back what was parsed.
	if err != nil || base64.StdEncoding.EncodeToString(key) != enc {
		return Secret{}, fmt.Errorf("%w: the part after %q is not standard base64", ErrInvalidSecret, SecretPrefix)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return Secret{}, fmt.Errorf("%w: it decodes to %d bytes, not %d to %d", ErrInvalidSecret, len(key), MinSecretBytes, MaxSecretBytes)
	}
	return Secret{key: key}, nil
}

// Reveal returns the secret in its "whsec_" form, for the store that keeps
// it. Never log it.
func (s Secret) Reveal() string {
	if len(s.key) == 0 {
		return ""
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(s.key)
}

// String returns a placeholder that does not reveal the key.
func (s Secret) String() string {
	if len(s.key) == 0 {
		return "whsec_(none)"
	}
	return "whsec_…(redacted)"
}

// GoString is String, so that %#v does not reveal the key either.
func (s Secret) GoString() string { return s.String() }

// IsZero reports whether s is the zero (invalid) Secret.
func (s Secret) IsZero() bool { return len(s.key) == 0 }

// Equal reports whether s and o hold the same key.
func (s Secret) Equal(o Secret) bool { return string(s.key) == string(o.key) }

// webhook returns the Standard Webhooks signer and verifier for s.
func (s Secret) webhook() *standardwebhooks.Webhook {
	wh, _ := standardwebhooks.NewWebhookRaw(s.key) // never fails
	return wh
}

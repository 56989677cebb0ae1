package notify

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
)

// Sealer encrypts small values kept at rest in a store (the signing
// secrets of webhook subscriptions) with AES-256-GCM from the standard
// library, under keys derived with HKDF-SHA256 from the deployment's
// state keys (mcp.ServerOptions.StateKeys) and a label: the first key
// seals, every key opens, so a rotation of the state keys (the previous
// one listed second) keeps opening what was sealed before. Anyone who
// reads the store without the state keys sees only ciphertext; whoever
// has the state keys can open it. The associated data binds a sealed
// value to its record (a value moved to another record does not open).
// Immutable after construction; safe for concurrent use.
type Sealer struct {
	aeads []cipher.AEAD
}

// sealVersion starts every sealed value.
const sealVersion = 1

// NewSealer returns a Sealer under keys (the first seals) for values of
// one kind, named by label.
func NewSealer(keys [][]byte, label string) (*Sealer, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key to seal with", ErrInvalid)
	}
	s := &Sealer{}
	for _, k := range keys {
		dk, err := hkdf.Key(sha256.New, k, nil, "mcpush seal v1\x00"+label, 32)
		if err != nil {
			return nil, err
		}
		block, err := aes.NewCipher(dk)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		s.aeads = append(s.aeads, aead)
	}
	return s, nil
}

// Seal encrypts plain, bound to aad: a version byte, a random 96-bit
// nonce and the ciphertext with its tag (29 bytes more than plain).
func (s *Sealer) Seal(plain, aad []byte) []byte {
	a := s.aeads[0]
	out := make([]byte, 1+a.NonceSize(), 1+a.NonceSize()+len(plain)+a.Overhead())
	out[0] = sealVersion
	rand.Read(out[1:])
	return a.Seal(out, out[1:], plain, aad)
}

// Open decrypts what Seal returned for the same aad, with any key:
// ErrUnsealable when none opens it.
func (s *Sealer) Open(sealed, aad []byte) ([]byte, error) {
	for _, a := range s.aeads {
		if len(sealed) < 1+a.NonceSize()+a.Overhead() || sealed[0] != sealVersion {
			return nil, ErrUnsealable
		}
		if plain, err := a.Open(nil, sealed[1:1+a.NonceSize()], sealed[1+a.NonceSize():], aad); err == nil {
			return plain, nil
		}
	}
	return nil, ErrUnsealable
}

package notify

import (
	"context"
	"fmt"
)

// SharedKeys keeps small secrets that every process sharing a store must
// agree on, such as the key that signs 2026-era requestState, with no
// configuration: the first process to ask stores one, the others read
// it. Both stores implement it; it is a capability beside Store
// that mcp.Store requires. Anyone who can read the store can read the
// values. Safe for concurrent use by many processes.
type SharedKeys interface {
	// SharedKey returns the value stored under name. When there is none
	// it first stores value, with a conditional put that exactly one of
	// racing callers wins, and every caller gets the value that won.
	// Values never change or expire once stored. An empty name or
	// value, or a name over MaxSharedKeyName or a value over
	// MaxSharedKeyValue bytes, is ErrInvalid.
	SharedKey(ctx context.Context, name string, value []byte) ([]byte, error)
}

// Bounds of SharedKeys.SharedKey's arguments.
const (
	MaxSharedKeyName  = 128
	MaxSharedKeyValue = 4096
)

// CheckSharedKey validates the arguments of SharedKeys.SharedKey the same
// way for every store.
func CheckSharedKey(name string, value []byte) error {
	switch {
	case name == "" || len(name) > MaxSharedKeyName:
		return fmt.Errorf("%w: shared key name of %d bytes (want 1 to %d)", ErrInvalid, len(name), MaxSharedKeyName)
	case len(value) == 0 || len(value) > MaxSharedKeyValue:
		return fmt.Errorf("%w: shared key value of %d bytes (want 1 to %d)", ErrInvalid, len(value), MaxSharedKeyValue)
	}
	return nil
}

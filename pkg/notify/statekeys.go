package notify

import (
	"errors"
	"strings"
)

// ParseStateKeys parses a list of state keys (MCPUSH_STATE_KEYS, or a
// Secrets Manager value): comma-separated, the current one first, each
// at least 32 characters (e.g. 32 random bytes, base64). The keys sign
// requestState and event cursors and seal secrets at rest (Sealer); every
// process of a deployment needs the same ones.
func ParseStateKeys(s string) ([][]byte, error) {
	var keys [][]byte
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if len(k) < 32 {
			return nil, errors.New("a requestState key must be at least 32 characters")
		}
		keys = append(keys, []byte(k))
	}
	if len(keys) == 0 {
		return nil, errors.New("no requestState key")
	}
	return keys, nil
}

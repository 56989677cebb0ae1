package mcp

import (
	"testing"
	"time"
)

// TestGetEventID: a GET stream's event id resumes the same position as
// the plain event id and carries the owner; priming ids differ between
// streams (a client sees progress on every idle reconnection); malformed
// tags are refused.
func TestGetEventID(t *testing.T) {
	tests := []struct {
		seq, owner, nonce int64
		want              string
	}{
		{17, 15, 0, "g.17~f"},
		{17, 15, 36, "g.17~f.10"},
		{0, -1, 0, "g.0~0"},
	}
	for _, tt := range tests {
		id := getEventID(tt.seq, tt.owner, tt.nonce)
		if id != tt.want {
			t.Errorf("getEventID(%d, %d, %d) = %q, want %q", tt.seq, tt.owner, tt.nonce, id, tt.want)
		}
		stream, seq, ok := parseEventID(id)
		if !ok || stream != getStream || seq != tt.seq {
			t.Errorf("parseEventID(%q) = %q, %d, %v; want g, %d, true", id, stream, seq, ok, tt.seq)
		}
		if owner, ok := eventOwner(id); !ok || owner != max(tt.owner, 0) {
			t.Errorf("eventOwner(%q) = %d, %v; want %d, true", id, owner, ok, max(tt.owner, 0))
		}
	}
	if _, ok := eventOwner("g.17"); ok {
		t.Error(`eventOwner("g.17") found an owner in an id without a tag`)
	}
	if getEventID(1, 1, time.Now().UnixNano()) == getEventID(1, 1, time.Now().Add(time.Millisecond).UnixNano()) {
		t.Error("two priming ids at different times are equal")
	}
	for _, bad := range []string{"g.1~", "g.1~A", "g~1", "g.1~2~3", "g.x~1", "g.1~-1", "g.1~1.", "g.1~.1", "g.1~1.2.3"} {
		if _, _, ok := parseEventID(bad); ok {
			t.Errorf("parseEventID(%q) accepted a malformed id", bad)
		}
	}
}

package notify

import (
	"errors"
	"testing"
	"time"
)

func TestCheckAppend(t *testing.T) {
	big := make([]byte, MaxItemBytes+1)
	many := make([][]byte, MaxAppendBatch+1)
	for i := range many {
		many[i] = []byte("x")
	}
	var heavy [][]byte
	for n := 0; n <= MaxAppendBytes; n += MaxItemBytes {
		heavy = append(heavy, make([]byte, MaxItemBytes))
	}
	tests := []struct {
		name      string
		sid, strm string
		data      [][]byte
		opts      *AppendOptions
		want      error
	}{
		{"ok", "s", "g", [][]byte{[]byte("x")}, nil, nil},
		{"empty session", "", "g", [][]byte{[]byte("x")}, nil, ErrInvalid},
		{"empty stream", "s", "", [][]byte{[]byte("x")}, nil, ErrInvalid},
		{"no data", "s", "g", nil, nil, ErrInvalid},
		{"too many", "s", "g", many, nil, ErrInvalid},
		{"unknown registry", "s", "g", [][]byte{[]byte("x")}, &AppendOptions{NotifiedHash: &HashCAS{Registry: "widgets"}}, ErrInvalid},
		{"big event", "s", "g", [][]byte{big}, nil, ErrTooLarge},
		{"too many bytes", "s", "g", heavy, nil, ErrTooLarge},
	}
	for _, tt := range tests {
		if err := CheckAppend(tt.sid, tt.strm, tt.data, tt.opts); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: CheckAppend = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestUnixNanos(t *testing.T) {
	now := time.Now().UTC()
	for _, tm := range []time.Time{{}, now, time.Unix(0, 1).UTC()} {
		if got := FromUnixNanos(UnixNanos(tm)); !got.Equal(tm) {
			t.Errorf("round trip of %v gave %v", tm, got)
		}
	}
	if UnixNanos(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)) <= 0 {
		t.Error("a time after 2262 must clamp to the largest value, not overflow")
	}
}

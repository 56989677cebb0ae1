package mcp

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []sseEvent
		err  error
	}{
		{"priming then message", "id: s.0\nretry: 500\ndata: \n\nid: s.1\ndata: {\"a\":1}\n\n",
			[]sseEvent{{ID: "s.0", HasID: true, Retry: 500 * time.Millisecond}, {ID: "s.1", HasID: true, Data: []byte(`{"a":1}`)}}, io.EOF},
		{"multi-line data, CRLF, comments", ": keep-alive\r\n\r\ndata: a\r\ndata: b\r\n\r\n",
			[]sseEvent{{Data: []byte("a\nb")}}, io.EOF},
		{"retry alone", "retry: 1000\n\n", []sseEvent{{Retry: time.Second}}, io.EOF},
		{"cut off event is dropped", "id: s.1\ndata: {\"a\"", nil, io.EOF},
		{"no space after colon, unknown fields", "data:x\nevent: message\nfoo: bar\n\n", []sseEvent{{Data: []byte("x")}}, io.EOF},
		{"bad retry ignored", "retry: soon\ndata: y\n\n", []sseEvent{{Data: []byte("y")}}, io.EOF},
		{"too large", "data: " + strings.Repeat("x", maxEventBytes+1) + "\n\n", nil, errEventTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSSEReader(strings.NewReader(tc.in))
			var got []sseEvent
			var err error
			for {
				var ev *sseEvent
				if ev, err = r.next(); err != nil {
					break
				}
				got = append(got, *ev)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("error %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

package mcp

import (
	"testing"

	"github.com/mcpush/mcpush/pkg/metrics"
)

// TestHeldStreamKind: a held stream counts under the kind of its source:
// a GET stream, a resumed POST response stream, a listen stream, an
// events/stream (counted with listen, as metrics.StreamListen documents).
func TestHeldStreamKind(t *testing.T) {
	for _, tc := range []struct {
		src  heldSource
		want metrics.StreamKind
	}{
		{&getSource{stream: getStream}, metrics.StreamGet},
		{&getSource{stream: "a-request-stream"}, metrics.StreamResume},
		{&listenSource{}, metrics.StreamListen},
		{&eventStream{}, metrics.StreamListen},
	} {
		if got := (&heldStream{src: tc.src}).kind(); got != tc.want {
			t.Errorf("%T (%+v): kind %q, want %q", tc.src, tc.src, got, tc.want)
		}
	}
}

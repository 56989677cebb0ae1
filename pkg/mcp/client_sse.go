package mcp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// sseEvent is one Server-Sent Event as a client reads it. Retry is the
// reconnection delay the event set (zero: none).
type sseEvent struct {
	ID    string
	HasID bool
	Data  []byte
	Retry time.Duration
}

// maxEventBytes bounds one SSE event a client buffers (16 MiB).
const maxEventBytes = 16 << 20

// sseReader parses an event stream (text/event-stream, as the WHATWG HTML
// standard defines it, restricted to what MCP uses: id, data, retry).
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next event, including events with an id or a retry
// and no data (the priming event), and io.EOF at the end of the stream.
// An event cut off by the end of the stream is not returned.
func (s *sseReader) next() (*sseEvent, error) {
	ev := &sseEvent{}
	var data bytes.Buffer
	hasData, seen := false, false
	for {
		line, err := s.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it whole, within the bound.
			buf := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(buf) > maxEventBytes {
					return nil, errEventTooLarge
				}
				line, err = s.r.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if seen {
				if hasData {
					ev.Data = data.Bytes()
				}
				return ev, nil
			}
			continue
		}
		if line[0] == ':' {
			continue // a comment (keep-alive)
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "id":
			ev.ID, ev.HasID, seen = string(value), true, true
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData, seen = true, true
			if data.Len() > maxEventBytes {
				return nil, errEventTooLarge
			}
		case "retry":
			if ms, err := strconv.ParseInt(string(value), 10, 64); err == nil && ms >= 0 {
				ev.Retry, seen = time.Duration(ms)*time.Millisecond, true
			}
		case "event":
			// MCP sends only "message" events; the type is not needed.
		default:
			// Unknown fields are ignored, as the standard says.
		}
	}
}

// String describes an event for logs.
func (e *sseEvent) String() string {
	return fmt.Sprintf("id=%q retry=%v data=%dB", e.ID, e.Retry, len(e.Data))
}

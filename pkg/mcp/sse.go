package mcp

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// sseWriter writes Server-Sent Events to an HTTP response.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// start writes the headers of an event stream.
func (s *sseWriter) start() {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// event writes one event with an id and data, and flushes.
func (s *sseWriter) event(id string, data []byte) error {
	var b bytes.Buffer
	if id != "" {
		fmt.Fprintf(&b, "id: %s\n", id)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return s.write(b.Bytes())
}

// prime writes a priming event (SEP-1699): an id the client can resume
// from, the reconnection delay, and empty data.
func (s *sseWriter) prime(id string, retry time.Duration) error {
	return s.write(fmt.Appendf(nil, "id: %s\nretry: %d\ndata: \n\n", id, retry.Milliseconds()))
}

// retry tells the client to reconnect after d; sent before the server
// closes a stream that is not finished.
func (s *sseWriter) retry(d time.Duration) error {
	return s.write(fmt.Appendf(nil, "retry: %d\n\n", d.Milliseconds()))
}

// comment writes a comment line, which keeps idle connections open.
func (s *sseWriter) comment(text string) error {
	return s.write([]byte(": " + text + "\n\n"))
}

// writeTimeout bounds one write: a client that stops reading while its
// connection stays open must not hold a stream past its deadline.
const writeTimeout = 10 * time.Second

func (s *sseWriter) write(b []byte) error {
	// Not every ResponseWriter supports deadlines (Lambda's does not, and
	// needs none: the invocation deadline bounds it); then write without.
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// eventID names an event: the stream it belongs to and its sequence
// number in that stream's log, "<stream>.<seq>". Any process can resume
// any stream from it.
func eventID(stream string, seq int64) string {
	return stream + "." + strconv.FormatInt(seq, 10)
}

// parseEventID splits a Last-Event-ID into stream and seq.
func parseEventID(id string) (stream string, seq int64, ok bool) {
	i := strings.LastIndexByte(id, '.')
	if i <= 0 {
		return "", 0, false
	}
	seq, err := strconv.ParseInt(id[i+1:], 10, 64)
	if err != nil || seq < 0 {
		return "", 0, false
	}
	stream = id[:i]
	for _, r := range stream {
		if !(r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')) {
			return "", 0, false
		}
	}
	return stream, seq, true
}

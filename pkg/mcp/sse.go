package mcp

import (
	"bytes"
	"fmt"
	"math"
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

// getEventID names an event of a GET stream: eventID(getStream, seq) and a
// tag, "g.<seq>~<owner>[.<nonce>]" (base 36). owner is the seq of the
// takeover record of the stream that sent it, so that a stream resumed
// from it yields only to a takeover record appended after that one. A
// priming event's id adds a nonce that differs on every stream: a client
// that counts reconnections without a new event id as failures (the Go
// SDK gives up after a few) sees progress on every idle reconnection. The
// tag does not change the position the id resumes from.
func getEventID(seq, owner int64, nonce int64) string {
	id := eventID(getStream, seq) + "~" + strconv.FormatInt(max(owner, 0), 36)
	if nonce != 0 {
		id += "." + strconv.FormatInt(nonce&math.MaxInt64, 36)
	}
	return id
}

// eventOwner returns the owner in the tag of a GET stream's event id (see
// getEventID); ok is false when the id has no tag.
func eventOwner(id string) (owner int64, ok bool) {
	_, tag, found := strings.Cut(id, "~")
	if !found {
		return 0, false
	}
	tag, _, _ = strings.Cut(tag, ".")
	owner, err := strconv.ParseInt(tag, 36, 64)
	return owner, err == nil && owner >= 0
}

// maxEventIDBytes bounds a Last-Event-ID: the ids this server makes are far
// shorter (a stream id of a few characters, a seq, a tag of two base-36
// numbers), and a longer one would only reach the store as a key.
const maxEventIDBytes = 128

// parseEventID splits a Last-Event-ID into stream and seq, checking and
// then ignoring the tag of a GET stream's event id (see getEventID). An id
// over maxEventIDBytes is malformed.
func parseEventID(id string) (stream string, seq int64, ok bool) {
	if len(id) > maxEventIDBytes {
		return "", 0, false
	}
	if i := strings.IndexByte(id, '~'); i >= 0 {
		owner, nonce, hasNonce := strings.Cut(id[i+1:], ".")
		if !base36(owner) || (hasNonce && !base36(nonce)) {
			return "", 0, false
		}
		id = id[:i]
	}
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

// base36 reports whether s is a non-empty string of base-36 digits.
func base36(s string) bool {
	for _, r := range s {
		if !(('a' <= r && r <= 'z') || ('0' <= r && r <= '9')) {
			return false
		}
	}
	return s != "" && len(s) <= 13
}

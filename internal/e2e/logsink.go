package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
)

// logSink collects the output of one process, line by line, in memory and
// in a file. It is safe for concurrent use.
type logSink struct {
	path string // the file holding the whole log

	mu      sync.Mutex
	file    *os.File // nil once closed or if it could not be created
	lines   []string
	partial []byte
}

// newLogSink returns a sink that also writes to path; it closes the file
// when t ends.
func newLogSink(t testing.TB, path string) *logSink {
	s := &logSink{path: path}
	if f, err := os.Create(path); err == nil {
		s.file = f
	} else {
		t.Logf("e2e: cannot keep a log file: %v", err)
	}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.partial) > 0 {
			s.addLocked(string(s.partial))
			s.partial = nil
		}
		if s.file != nil {
			s.file.Close()
			s.file = nil
		}
	})
	return s
}

var _ io.Writer = (*logSink)(nil)

// Write implements io.Writer, splitting p into lines.
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data := append(s.partial, p...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		s.addLocked(string(data[:i]))
		data = data[i+1:]
	}
	s.partial = append([]byte(nil), data...)
	return len(p), nil
}

// Printf adds one line of the harness's own, marked with "e2e:".
func (s *logSink) Printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked("e2e: " + fmt.Sprintf(format, args...))
}

func (s *logSink) addLocked(line string) {
	s.lines = append(s.lines, line)
	if s.file != nil {
		s.file.WriteString(line + "\n")
	}
}

// Mark returns a position for Since.
func (s *logSink) Mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lines)
}

// Since returns the lines logged after mark, at most limit of them (the
// last ones), and how many were left out.
func (s *logSink) Since(mark, limit int) (lines []string, omitted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines = s.lines[min(mark, len(s.lines)):]
	if len(lines) > limit {
		omitted = len(lines) - limit
		lines = lines[omitted:]
	}
	return append([]string(nil), lines...), omitted
}

// Contains reports whether any line contains substr.
func (s *logSink) Contains(substr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

// dump writes the lines after mark (at most limit) to t's log under title.
func (s *logSink) dump(t testing.TB, title string, mark, limit int) {
	t.Helper()
	lines, omitted := s.Since(mark, limit)
	if len(lines) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s: %d lines", title, len(lines)+omitted)
	if omitted > 0 {
		fmt.Fprintf(&b, ", first %d omitted", omitted)
	}
	fmt.Fprintf(&b, "; whole log in %s (kept with go test -artifacts) ---\n", s.path)
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	t.Log(b.String())
}

package ingest

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ErrInvalidMessage reports an SNS message that Parse refuses: malformed
// JSON, a missing or ill-typed field, an unknown registry kind, op, item
// field or tool, a duplicate key. Oversize messages report
// notify.ErrTooLarge instead. Retrying such a message cannot succeed; it
// ends in the dead-letter queue.
var ErrInvalidMessage = errors.New("invalid SNS message")

// ParseError is the error Parse returns. It names the offending value by
// its path in the message ("items[2].uri"), never quoting the message
// body beyond short excerpts of the offending value.
type ParseError struct {
	// Path locates the offending value: "topic", "items[2].arguments[0].name",
	// "TopicArn" for a topic derived from the SNS TopicArn, or "" for the
	// message as a whole.
	Path string
	// Msg says what is wrong with it.
	Msg string
	// Err is ErrInvalidMessage or notify.ErrTooLarge.
	Err error
}

func (e *ParseError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%v: %s", e.Err, e.Msg)
	}
	return fmt.Sprintf("%v: %s: %s", e.Err, e.Path, e.Msg)
}

func (e *ParseError) Unwrap() error { return e.Err }

// invalidf returns a *ParseError wrapping ErrInvalidMessage.
func invalidf(path, format string, args ...any) error {
	return &ParseError{Path: path, Msg: fmt.Sprintf(format, args...), Err: ErrInvalidMessage}
}

// maxQuote bounds how much of a value an error message quotes: enough to
// recognise a name or a URI, never a payload.
const maxQuote = 64

// quote returns s as a Go string literal, shortened to maxQuote bytes.
func quote(s string) string {
	if len(s) <= maxQuote {
		return strconv.Quote(s)
	}
	return strconv.Quote(cut(s)) + "..."
}

// cut returns the longest prefix of s that has at most maxQuote bytes and
// does not split a UTF-8 sequence.
func cut(s string) string {
	if len(s) <= maxQuote {
		return s
	}
	n := maxQuote
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Limits of the JSON-RPC layer. A client gets an error that names the
// limit; nothing is stored.
const (
	// MaxJSONDepth is the deepest nesting of arrays and objects a message
	// may have (CodeParseError beyond it), for the server and the client
	// alike; ingest stores nothing that would make a message deeper
	// (notify.MaxStoredJSONDepth).
	MaxJSONDepth = notify.MaxJSONDepth
	// MaxIDBytes bounds a JSON-RPC id as written (CodeInvalidRequest
	// beyond it); a requestId in notifications/cancelled likewise.
	MaxIDBytes = 256
	// MaxProgressTokenBytes bounds a progressToken as written
	// (CodeInvalidParams beyond it).
	MaxProgressTokenBytes = 256
	// MaxErrorMessageBytes bounds the message of every error the server
	// sends: an error that quotes a client's input never echoes more than
	// this.
	MaxErrorMessageBytes = 512
)

// Error is a JSON-RPC error object. A handler that returns an *Error sends
// it to the client as is; any other error becomes CodeInternalError.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Message is one JSON-RPC 2.0 message on the wire: a request (Method and
// ID), a notification (Method, no ID) or a response (ID with Result or
// Error). ID keeps the client's exact JSON (a string or a number).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// IsRequest reports whether m is a request.
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsNotification reports whether m is a notification.
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// IsResponse reports whether m is a response (success or error).
func (m *Message) IsResponse() bool { return m.Method == "" && m.ID != nil }

// DecodeMessages parses an HTTP body holding one JSON-RPC message or a
// batch (a JSON array). It validates the envelope of every message: the
// "jsonrpc" member must be "2.0", an id must be a string or a number (a
// response to an unparseable request may carry a null id), and a message
// is exactly one of request, notification or response. Failures are
// *Error values with CodeParseError or CodeInvalidRequest and a message
// that says what is wrong.
func DecodeMessages(body []byte) (msgs []*Message, batch bool, err *Error) {
	msgs, bad, batch, err := decodeBatch(body)
	if err != nil {
		return nil, batch, err
	}
	if len(bad) > 0 {
		return nil, batch, bad[0].err
	}
	return msgs, batch, nil
}

// badMember is an invalid member of a batch: its error, and its id when
// one could be read (JSON-RPC answers it with that id, else null).
type badMember struct {
	id  json.RawMessage
	err *Error
}

// decodeBatch is DecodeMessages keeping the valid members of a batch: a
// batch answers an invalid member with an error of its own (JSON-RPC
// 2.0), the others are served. err is for a body that is not a message
// or a batch at all.
func decodeBatch(body []byte) (msgs []*Message, bad []badMember, batch bool, err *Error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, nil, false, Errorf(CodeParseError, "parse error: empty body")
	}
	if d := notify.JSONDepth(body); d > MaxJSONDepth {
		return nil, nil, false, Errorf(CodeParseError, "parse error: JSON nested more than %d levels deep", MaxJSONDepth)
	}
	if !json.Valid(body) {
		return nil, nil, false, Errorf(CodeParseError, "parse error: body is not valid JSON")
	}
	var raws []json.RawMessage
	if body[0] == '[' {
		batch = true
		if e := json.Unmarshal(body, &raws); e != nil {
			return nil, nil, true, Errorf(CodeParseError, "parse error: %v", e)
		}
		if len(raws) == 0 {
			return nil, nil, true, Errorf(CodeInvalidRequest, "invalid request: empty batch")
		}
	} else {
		raws = []json.RawMessage{body}
	}
	msgs = make([]*Message, 0, len(raws))
	for i, raw := range raws {
		m, e := decodeOne(raw)
		if e != nil {
			if batch {
				e.Message = fmt.Sprintf("%s (batch element %d)", e.Message, i)
			}
			bad = append(bad, badMember{id: memberID(raw), err: e})
			continue
		}
		msgs = append(msgs, m)
	}
	return msgs, bad, batch, nil
}

// memberID returns the id of an invalid message when it is a valid id,
// so that its error can name it; nil otherwise.
func memberID(raw json.RawMessage) json.RawMessage {
	var w struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &w) != nil || !validID(w.ID) || bytes.Equal(w.ID, []byte("null")) {
		return nil
	}
	return w.ID
}

func decodeOne(raw json.RawMessage) (*Message, *Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, Errorf(CodeInvalidRequest, "invalid request: a message must be a JSON object")
	}
	// Decode into a shape that distinguishes absent members from null ones.
	var w struct {
		JSONRPC *string         `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
		Params  json.RawMessage `json:"params"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, Errorf(CodeInvalidRequest, "invalid request: %v", err)
	}
	if w.JSONRPC == nil || *w.JSONRPC != "2.0" {
		return nil, Errorf(CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
	}
	m := &Message{JSONRPC: "2.0"}
	hasID := w.ID != nil
	if hasID {
		if !validID(w.ID) {
			return nil, Errorf(CodeInvalidRequest, `invalid request: "id" must be a string or a number of at most %d bytes, in valid UTF-8`, MaxIDBytes)
		}
		m.ID = w.ID
	}
	switch {
	case w.Method != nil:
		if *w.Method == "" {
			return nil, Errorf(CodeInvalidRequest, `invalid request: "method" must not be empty`)
		}
		if w.Result != nil || w.Error != nil {
			return nil, Errorf(CodeInvalidRequest, `invalid request: a request carries no "result" or "error"`)
		}
		if hasID && bytes.Equal(w.ID, []byte("null")) {
			return nil, Errorf(CodeInvalidRequest, `invalid request: a request id must not be null`)
		}
		if w.Params != nil && !bytes.Equal(w.Params, []byte("null")) {
			if c := w.Params[0]; c != '{' && c != '[' {
				return nil, Errorf(CodeInvalidRequest, `invalid request: "params" must be an object or an array`)
			}
			m.Params = w.Params
		}
		m.Method = *w.Method
	case hasID:
		if (w.Result == nil) == (w.Error == nil) {
			return nil, Errorf(CodeInvalidRequest, `invalid request: a response carries exactly one of "result" and "error"`)
		}
		m.Result = w.Result
		if w.Error != nil {
			var e Error
			if err := json.Unmarshal(w.Error, &e); err != nil {
				return nil, Errorf(CodeInvalidRequest, `invalid request: "error" must be an object with "code" and "message"`)
			}
			m.Error = &e
		}
	default:
		return nil, Errorf(CodeInvalidRequest, `invalid request: a message needs "method" or "id"`)
	}
	return m, nil
}

func validID(id json.RawMessage) bool {
	if len(id) == 0 || len(id) > MaxIDBytes || !utf8.Valid(id) {
		// Invalid UTF-8 would come back as U+FFFD: the client could not
		// match the response to its request.
		return false
	}
	switch c := id[0]; {
	case c == '"':
		var s string
		return json.Unmarshal(id, &s) == nil
	case c == '-' || (c >= '0' && c <= '9'):
		var n json.Number
		return json.Unmarshal(id, &n) == nil
	case bytes.Equal(id, []byte("null")):
		return true // allowed in responses only; requests are checked above
	}
	return false
}

// validRequestID reports whether id may name a request: a string or a
// number, within MaxIDBytes.
func validRequestID(id json.RawMessage) bool {
	return validID(id) && !bytes.Equal(id, []byte("null"))
}

// validProgressToken reports whether tok is a progressToken MCP allows: a
// string or an integer, within MaxProgressTokenBytes.
func validProgressToken(tok json.RawMessage) bool {
	if len(tok) == 0 || len(tok) > MaxProgressTokenBytes || !utf8.Valid(tok) {
		return false
	}
	if tok[0] == '"' {
		var s string
		return json.Unmarshal(tok, &s) == nil
	}
	for i, c := range tok {
		if (c < '0' || c > '9') && !(i == 0 && c == '-' && len(tok) > 1) {
			return false
		}
	}
	return true
}

// clipText shortens s to at most n bytes (at a UTF-8 boundary), marking
// the cut: errors quote client input, and must not echo it whole.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…(truncated)"
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// canonicalID returns a stable string form of a JSON-RPC id, used as a key.
func canonicalID(id json.RawMessage) string {
	var s string
	if len(id) > 0 && id[0] == '"' && json.Unmarshal(id, &s) == nil {
		return "s:" + s
	}
	var n json.Number
	if json.Unmarshal(id, &n) == nil {
		if f, err := n.Float64(); err == nil {
			return "n:" + fmt.Sprint(f)
		}
	}
	return "r:" + string(id)
}

// encodeResponse marshals a response to id carrying result or err.
func encodeResponse(id json.RawMessage, result any, rpcErr *Error) []byte {
	m := Message{JSONRPC: "2.0", ID: id}
	if id == nil {
		m.ID = json.RawMessage("null")
	}
	if rpcErr != nil {
		m.Error = rpcErr
		if len(rpcErr.Message) > MaxErrorMessageBytes {
			e := *rpcErr
			e.Message = clipText(e.Message, MaxErrorMessageBytes)
			m.Error = &e
		}
	} else {
		b, err := json.Marshal(result)
		if err != nil {
			m.Error = Errorf(CodeInternalError, "internal error: encoding result: %v", err)
		} else {
			m.Result = b
		}
	}
	b, _ := json.Marshal(m)
	return b
}

// encodeNotification marshals a notification.
func encodeNotification(method string, params any) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return json.Marshal(Message{JSONRPC: "2.0", Method: method, Params: p})
}

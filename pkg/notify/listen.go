package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// ListenState is what the backing session of a listen stream (or of an
// events stream) records beside its profile, in Session.Listen: which
// process serves the stream and for which request, or that the stream is
// parked and where it stopped. pkg/mcp writes it (listen.go,
// events_stream.go; its reserved names are in reserved.go); the stores
// keep it in fields of its own (SQLite: the sessions table's listen_*
// columns; DynamoDB: the session item's map attribute "lis"), and
// ProfileLister.PrincipalProfiles selects sessions by it (ListenMatch).
// The zero ListenState records nothing: the state of every session that
// backs no stream. Its strings count against MaxItemBytes with the
// session's ClientInfo and ClientCapabilities (CheckSession).
type ListenState struct {
	// Process is the id of the liveness record of the process serving
	// the stream ("" when parked).
	Process string
	// Request is the canonical id of the request the stream serves: what
	// a notifications/cancelled names.
	Request string
	// Parked is the park key of a parked stream (a hash of its principal
	// and filter), which the next listen with the same principal and
	// filter adopts.
	Parked string
	// After is a parked stream's read position in the session's log.
	After int64
	// Session is the 2025-era session an events stream was opened in: a
	// DELETE of that session ends the stream.
	Session string
}

// size is what l counts against MaxItemBytes.
func (l ListenState) size() int {
	return len(l.Process) + len(l.Request) + len(l.Parked) + len(l.Session)
}

// ListenMatch selects sessions by their ListenState in
// ProfileLister.PrincipalProfiles: a session matches when each non-empty
// field of the match equals the same field of its Listen. The zero
// ListenMatch matches every session.
type ListenMatch struct {
	Request string
	Parked  string
	Session string
}

// Matches reports whether l matches m.
func (m ListenMatch) Matches(l ListenState) bool {
	return (m.Request == "" || m.Request == l.Request) &&
		(m.Parked == "" || m.Parked == l.Parked) &&
		(m.Session == "" || m.Session == l.Session)
}

// legacyListenPrefix starts the principal of every backing session that
// recorded its ListenState in its ClientInfo before Session.Listen
// existed: pkg/mcp's reserved prefix (reserved.go).
const legacyListenPrefix = "mcpush-listen:"

// legacyListen is a ListenState as versions before Session.Listen wrote
// it into a backing session's ClientInfo.
type legacyListen struct {
	Process string `json:"mcpush/process"`
	Request string `json:"mcpush/request"`
	Parked  string `json:"mcpush/parked"`
	After   int64  `json:"mcpush/after"`
	Session string `json:"mcpush/session"`
}

// UpgradeListen moves the ListenState that a session record written
// before Session.Listen existed keeps in its ClientInfo into sess.Listen,
// clears its ClientInfo, and reports whether it did. Such a record is a
// backing session (its principal starts with "mcpush-listen:") whose
// Listen is zero and whose ClientInfo is a JSON object with no keys but
// "mcpush/process", "mcpush/request", "mcpush/parked", "mcpush/after"
// and "mcpush/session", which records something; any other session is
// left as it is (a client's ClientInfo, which the server stores as the
// client's name and version, never has that form).
//
// This is the one place that reads the previous format. The stores call
// it where they meet such records, so that the listen streams of the
// previous version are adopted, cancelled and reclaimed after an
// upgrade: sqlitestore once for every row when it upgrades a file to
// schema version 4, dynamostore on each read of a session item (an item
// written by the previous version is written in the new form by its
// session's next UpdateSession).
func UpgradeListen(sess *Session) bool {
	if sess.Listen != (ListenState{}) || !strings.HasPrefix(sess.Principal, legacyListenPrefix) ||
		!bytes.HasPrefix(sess.ClientInfo, []byte(`{"mcpush/`)) {
		return false
	}
	var v legacyListen
	dec := json.NewDecoder(bytes.NewReader(sess.ClientInfo))
	dec.DisallowUnknownFields()
	if dec.Decode(&v) != nil || !errors.Is(dec.Decode(&struct{}{}), io.EOF) || v == (legacyListen{}) {
		return false
	}
	sess.Listen, sess.ClientInfo = ListenState(v), nil
	return true
}

package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
)

// This file owns the names and records the server reserves in the store
// beside what clients create, so that a reader finds them in one place
// (docs/design.md describes them):
//
//   - principals: listenPrincipal (a principal's listen and events/stream
//     backing sessions, counted apart from its 2025-era sessions),
//     livenessPrincipal (the processes' liveness records), and the
//     addressPrefix principals of anonymous clients (per client address);
//   - subscription URIs: taskURI (a listen stream's interest in a task);
//   - the listen state of a backing session: not a name but a typed field
//     of its record, notify.ListenState in Session.Listen (the process
//     serving the stream and its request; or, parked, its listenParkKey
//     and read position; the 2025-era session an events stream was
//     opened in), written by listen.go and events_stream.go and looked
//     up through the store with a notify.ListenMatch (listenProfiles);
//   - control records in a log, never sent to a client (isControl):
//     takeover (a GET stream replaced), streamOpen (a POST stream's log
//     started), listenCancel (a listen stream ended by its request id).
//
// The principals and URIs of the server's own records start with
// reservedPrefix, which no request's principal can (those are
// issuer#subject with an https issuer, IAM ARNs, or addressPrefix and an
// address), and every control record is a JSON object whose first member
// is controlKey, which no JSON-RPC message has.

// reservedPrefix starts every principal and subscription URI the server
// reserves. pkg/notify spells it once more (legacyListenPrefix, frozen:
// the records of the previous listen state that notify.UpgradeListen
// reads); TestReservedPrefixUpgrade ties the two together.
const reservedPrefix = "mcpush-listen:"

// controlKey is the first member of every control record.
const controlKey = "mcpush/control"

// takeover is a control record in a GET stream's log: a GET stream that
// reads one appended after its own closes, so that at most one GET stream
// of a session delivers messages at a time, whichever process serves it.
var takeover = []byte(`{"` + controlKey + `":"takeover"}`)

// isControl reports whether a log entry is a control record rather than a
// JSON-RPC message for the client.
func isControl(data []byte) bool { return bytes.HasPrefix(data, []byte(`{"`+controlKey+`"`)) }

// streamOpen is the control record that starts the log of a POST stream
// whose client got an event id (the priming event) before any message
// was logged: it makes the stream known to a resume.
var streamOpen = []byte(`{"` + controlKey + `":"open"}`)

// listenCancel is the control record that ends the listen stream of
// request id (and not a later stream that adopts its backing session).
func listenCancel(id json.RawMessage) []byte { return listenCancelOf(canonicalID(id)) }

// listenCancelOf is listenCancel of the request whose canonicalID is
// request.
func listenCancelOf(request string) []byte {
	b, _ := json.Marshal(map[string]string{controlKey: "cancel", "id": request})
	return b
}

// listenPrincipal is the Principal of principal's listen backing
// sessions. The store counts sessions by Principal (notify.SessionCounter),
// so a principal's listen streams are counted apart from its 2025-era
// sessions (MaxListensPerPrincipal, not MaxSessionsPerPrincipal) and never
// crowd them out; and no request's principal owns a backing session, so
// none can be used as a 2025-era session. It is injective: the backing
// sessions of two principals never share a count.
func listenPrincipal(principal string) string {
	sum := sha256.Sum256([]byte(principal))
	return reservedPrefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

// addressPrefix starts the principal of a session that an anonymous
// client created: "addr:" and the client's address.
const addressPrefix = "addr:"

// taskURI is what the backing session of a listen stream that names a
// task in its taskIds is subscribed to (the principal's task only):
// publish finds the streams to notify through the store's subscription
// index, on whichever process they are served.
func taskURI(principal, id string) string {
	sum := sha256.Sum256([]byte(principal + "\x00task\x00" + id))
	return reservedPrefix + "task:" + base64.RawURLEncoding.EncodeToString(sum[:18])
}

// livenessPrincipal is the Principal of the liveness records (liveness.go).
// It is not the listenPrincipal of any principal (whose suffix is a
// 43-byte hash), so no count sees the records.
const livenessPrincipal = reservedPrefix + "process"

package notify

import "time"

// SessionStream is the stream id of a session's own log: the 2025-era
// standalone GET stream, or a 2026-era listen stream's. Everything that
// reaches a session outside a request (registry changes, events fanned out
// by the ingest, server-to-client messages) is appended to it, and the
// server's held streams read it (pkg/mcp held.go). Request streams have ids of their own.
// GetSession reports its head (Session.StreamHead), so that one read
// tells an idle stream's poll whether there is anything new.
const SessionStream = "g"

// ChangeFeedTTL is how long the change feed (Store.Changes) keeps a
// change. A reader that falls further behind may miss changes: the feed
// is a hint, so such a reader (pkg/mcp's watcher, after ChangeFeedTTL/2)
// has every stream read its own log instead.
const ChangeFeedTTL = time.Minute

// RegistryChanged is the id the change feed (Store.Changes) reports after
// an ApplyRegistry that applied a change (written in its transaction): a
// watcher reads the registry hashes then, rather than on a timer. It is
// no session's id.
const RegistryChanged = "*registries"

// MaxChangesRead bounds the ids one Changes call returns; a reader that
// gets that many reads again at once.
const MaxChangesRead = 1000

// ChangesOverflow is what Changes reports, in place of the sessions' ids,
// when more sessions changed since the cursor than one call returns and
// the store cannot page through them (dynamostore): the reader must take
// every session it watches as changed. Nothing is dropped either way.
const ChangesOverflow = "*overflow"

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

// RegistryChanged is the id a store writes into its change feed in the
// transaction of an ApplyRegistry that applied a change; Changes reports
// it as ChangeSet.Registries. It is no session's id.
const RegistryChanged = "*registries"

// ChangeSet is what one Store.Changes call reports.
type ChangeSet struct {
	// Sessions are the sessions whose log or profile changed.
	Sessions []string
	// Registries reports an ApplyRegistry that applied a change: a
	// watcher reads the registry hashes then.
	Registries bool
	// Overflow reports that more sessions changed than one call returns
	// and the store cannot page through them (dynamostore): the reader
	// takes every session it watches as changed. Sessions is empty then.
	Overflow bool
	// Full reports a read of MaxChangesRead ids: more may follow at
	// once, so the reader reads again without waiting.
	Full bool
}

// ChangesOf sorts the ids a store's change feed holds into a ChangeSet:
// the reserved ids RegistryChanged and ChangesOverflow, which the stores
// write into their feeds, become Registries and Overflow. For the
// stores' Changes.
func ChangesOf(ids []string) ChangeSet {
	c := ChangeSet{Full: len(ids) >= MaxChangesRead}
	for _, id := range ids {
		switch id {
		case RegistryChanged:
			c.Registries = true
		case ChangesOverflow:
			c.Overflow = true
		default:
			c.Sessions = append(c.Sessions, id)
		}
	}
	if c.Overflow {
		c.Sessions = nil
	}
	return c
}

// MaxChangesRead bounds the ids one Changes call returns; a reader that
// gets that many reads again at once.
const MaxChangesRead = 1000

// ChangesOverflow is the id a store's feed read yields, in place of the
// sessions' ids, when more sessions changed since the cursor than one
// call returns and the store cannot page through them (dynamostore);
// Changes reports it as ChangeSet.Overflow. Nothing is dropped either
// way.
const ChangesOverflow = "*overflow"

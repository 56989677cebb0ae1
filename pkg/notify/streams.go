package notify

// SessionStream is the stream id of a session's own log: the 2025-era
// standalone GET stream, or a 2026-era listen stream's. Everything that
// reaches a session outside a request (registry changes, events fanned out
// by the ingest, server-to-client messages) is appended to it, and the
// server's stream pumps read it. Request streams have ids of their own.
const SessionStream = "g"

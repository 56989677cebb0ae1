// Package costs holds no code: its tests measure what mcpush costs in
// store requests (DynamoDB API calls counted by an SDK middleware, and
// notify.Store calls on SQLite) and check the targets: a warm tools/call
// makes at most one request and no writes, creating a session at most two
// writes, an idle stream at most one read per poll interval whatever its
// subscriptions. Its benchmark times a tools/call on both stores.
package costs

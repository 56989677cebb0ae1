// Package notify holds the durable state of mcpush: sessions, per-stream
// event logs, keyed mailboxes between processes, resource subscriptions,
// topic event logs and registries with their content hashes.
//
// Every MCP request may be served by a different process (a different
// Lambda instance), so nothing a session needs lives only in memory: it
// lives in a [Store]. Two implementations pass one contract suite
// (package storetest): SQLite (sqlitestore, embedded, several local
// processes may share one file) and DynamoDB (dynamostore, production).
//
// All Store methods are safe for concurrent use by many goroutines and by
// many processes sharing the same backing database.
package notify

import (
	"context"
	"encoding/json"
	"time"
)

// Registry kinds.
const (
	RegistryTools     = "tools"
	RegistryResources = "resources"
	RegistryPrompts   = "prompts"
	// RegistryEvents holds the event types of the Events extension
	// (EventItem), keyed by name.
	RegistryEvents = "events"
)

// Registry operations, as carried by SNS registry messages.
const (
	OpPut     = "put"     // upsert the items by key
	OpDelete  = "delete"  // remove the items by key
	OpReplace = "replace" // the items become the whole registry
)

// Session is the durable state of one 2025-era MCP session.
type Session struct {
	ID        string // at least 128 random bits, URL-safe
	Principal string // who created it; "" is the anonymous principal

	// Mutable profile, written by CreateSession and UpdateSession.
	ProtocolVersion    string
	ClientInfo         json.RawMessage // may be nil
	ClientCapabilities json.RawMessage // may be nil
	LogLevel           string          // "" when the client never set one
	Initialized        bool            // notifications/initialized received
	CreatedAt          time.Time
	ExpiresAt          time.Time // idle expiry; an expired session is not found
	// Listen is what the backing session of a listen or events stream
	// records (ListenState); zero for every other session.
	Listen ListenState

	// Read-only views, filled by GetSession and maintained by other methods.
	Version        int64             // optimistic-concurrency token for UpdateSession
	Subscriptions  []string          // resource URIs, sorted (Subscribe/Unsubscribe)
	NotifiedHashes map[string]string // registry kind -> last notified hash (Append with HashCAS)
	Delivered      int64             // highest GET-stream seq written to a client (MarkDelivered)
	StreamHead     int64             // seq of the last event of the SessionStream log; 0 when there is none
}

// Position is where a subscription stands in Store.AppendEach's order.
type Position struct {
	At    int64     // the upTo of the last AppendEach that reached it; 0 before the first
	Since time.Time // when the subscription started, by the store's clock
}

// Event is one entry of a stream log.
type Event struct {
	Seq  int64 // 1, 2, 3, ... with no gaps within one (session, stream)
	Data []byte
}

// HashCAS makes an Append conditional on a session's last-notified registry
// hash, and sets it in the same atomic step.
type HashCAS struct {
	Registry string // RegistryTools, RegistryResources, RegistryPrompts or RegistryEvents
	Old      string // the append happens only if the stored hash equals Old ("" = never set)
	New      string // stored hash after the append
}

// AppendOptions are optional conditions on Append. A nil *AppendOptions
// means an unconditional append.
type AppendOptions struct {
	// IdempotencyKey, when set, makes the append happen at most once per
	// (session, key): a second Append with the same key appends nothing
	// and reports appended == false with a nil error.
	IdempotencyKey string
	// NotifiedHash, when set, makes the append conditional on the session's
	// last-notified hash; if it does not match, nothing is appended and
	// Append reports appended == false with a nil error.
	NotifiedHash *HashCAS
}

// TopicEvent is one external event on a topic (from SNS).
type TopicEvent struct {
	Topic      string
	Seq        int64 // 1, 2, 3, ... with no gaps within one topic
	MessageID  string
	ReceivedAt time.Time
	Data       json.RawMessage
}

// Topic summarises one topic's log.
type Topic struct {
	Name      string
	LastSeq   int64
	UpdatedAt time.Time
}

// Registry is the dynamic part of one registry (tools, resources,
// prompts or events) published through SNS: items by key, and the content hash.
type Registry struct {
	Kind  string
	Hash  string                     // content hash of Items; "" for an empty, never-written registry
	Items map[string]json.RawMessage // key (tool, prompt or event name, resource URI) -> item JSON
}

// Store is the durable state behind an mcpush deployment.
//
// Conventions every implementation follows (the contract suite pins them):
// an empty id, key or topic is [ErrInvalid], on reads too; a limit < 1 is
// ErrInvalid; an Append with no data is ErrInvalid; each value is limited
// to [MaxItemBytes] ([ErrTooLarge]), and one Append carries at most
// [MaxAppendBatch] values (ErrInvalid) and [MaxAppendBytes] in all
// (ErrTooLarge); Subscribe, MarkDelivered, conditional Appends and
// PutMessage leave [Session.Version] alone, so they never make a profile
// update conflict; a message id counts once per topic (AppendTopicEvent)
// or per registry kind (ApplyRegistry) for as long as the store keeps it
// (topic events: their TTL; registry message ids: the event TTL, 24h by
// default); a registry replaced with nothing stays in RegistryHashes
// with hash "".
type Store interface {
	// CreateSession stores a new session. It returns ErrExists if the id is
	// taken. Subscriptions, NotifiedHashes and Delivered start as given.
	CreateSession(ctx context.Context, s *Session) error
	// GetSession returns a session; ErrNotFound when missing, deleted or
	// expired. One read, which also reports the head of the session's
	// SessionStream log (Session.StreamHead): an idle stream's whole poll.
	GetSession(ctx context.Context, id string) (*Session, error)
	// UpdateSession writes the mutable profile of s (ProtocolVersion,
	// ClientInfo, ClientCapabilities, LogLevel, Initialized, ExpiresAt)
	// if the stored Version still equals s.Version, and then increments
	// s.Version. ErrConflict when it changed, ErrNotFound when gone.
	UpdateSession(ctx context.Context, s *Session) error
	// DeleteSession removes a session with its logs, mailbox and
	// subscriptions. ErrNotFound when there was none.
	DeleteSession(ctx context.Context, id string) error

	// Append adds data as consecutive events to the log of (session,
	// stream), atomically: all or nothing, with gap-free sequence numbers.
	// It returns the seq of the last event appended. The session must
	// exist (ErrNotFound otherwise). With opts it is conditional; a failed
	// condition is (0, false, nil).
	Append(ctx context.Context, sessionID, streamID string, data [][]byte, opts *AppendOptions) (lastSeq int64, appended bool, err error)
	// ReadEvents returns up to limit events of (session, stream) with
	// Seq > after, in order; ErrNotFound when the session is gone. One
	// read when there is little or nothing new (an idle stream's poll).
	ReadEvents(ctx context.Context, sessionID, streamID string, after int64, limit int) ([]Event, error)
	// AppendEach appends to the SessionStream log of each live session in
	// ids that is subscribed to uri what pick returns for it, in the order
	// of a position the subscription keeps (Position.At): 0 when it
	// starts (Subscribe; subscribing again keeps it, Unsubscribe forgets
	// it), moved to upTo by an append, which happens only while the
	// position is below upTo, atomically with the events. This is the
	// fan-out of a topic's events to its subscribers in a few batched
	// requests: with upTo the event's topic sequence number, each
	// subscriber gets each event at most once and in topic order, however
	// the fan-outs of different events interleave. pick sees the
	// session's profile (ID, Principal, ProtocolVersion, ClientInfo,
	// ClientCapabilities, LogLevel, Initialized, CreatedAt, ExpiresAt; not
	// its subscriptions) and the subscription's Position, and returns the
	// events that bring the session from there to upTo (nil: none, the
	// position stays). It may be called again for a session whose
	// position another writer moved meanwhile. What it returns is checked
	// as Append's data: a value Append would refuse fails the call, before
	// anything is appended when pick returns it the first time it is asked
	// (the session's events otherwise). Sessions that are gone, or not
	// subscribed to uri, are skipped. It returns the ids appended to now,
	// in the order of ids; on error some sessions may have been appended
	// to (they are in appended), and the same call again completes the
	// rest. ids holds at most MaxAppendEach distinct ids (ErrInvalid);
	// upTo is at least 1.
	AppendEach(ctx context.Context, ids []string, uri string, upTo int64, pick func(s *Session, p Position) [][]byte) (appended []string, err error)
	// MarkDelivered records that GET-stream events up to seq were written to
	// a client; it never moves Session.Delivered backwards.
	MarkDelivered(ctx context.Context, sessionID string, seq int64) error

	// PutMessage stores a write-once message under (session, key): the
	// response to a server-to-client request, a cancellation. The first
	// write wins; a later one is (false, nil).
	PutMessage(ctx context.Context, sessionID, key string, data []byte) (created bool, err error)
	// GetMessage returns the message under (session, key); ErrSessionGone
	// when the session does not exist, ErrNotFound when the message does
	// not.
	GetMessage(ctx context.Context, sessionID, key string) ([]byte, error)

	// Subscribe and Unsubscribe maintain a session's resource subscriptions
	// and the index Subscribers reads. Both are idempotent.
	Subscribe(ctx context.Context, sessionID, uri string) error
	Unsubscribe(ctx context.Context, sessionID, uri string) error
	// Subscribers lists the ids of live sessions subscribed to uri, sorted.
	Subscribers(ctx context.Context, uri string) ([]string, error)

	// AppendTopicEvent appends an external event to a topic's log,
	// idempotent on messageID: a repeated messageID appends nothing and
	// returns the original event with created == false.
	AppendTopicEvent(ctx context.Context, topic, messageID string, receivedAt time.Time, data json.RawMessage) (ev TopicEvent, created bool, err error)
	// ReadTopicEvents returns up to limit events with Seq > after, in order.
	ReadTopicEvents(ctx context.Context, topic string, after int64, limit int) ([]TopicEvent, error)
	// Topics lists every topic that has events, sorted by name.
	Topics(ctx context.Context) ([]Topic, error)

	// ApplyRegistry applies op to a registry's items, idempotent on
	// messageID, and stores the new content hash in the same atomic step.
	// A repeated messageID changes nothing and reports applied == false.
	ApplyRegistry(ctx context.Context, kind, op string, items map[string]json.RawMessage, messageID string) (reg *Registry, applied bool, err error)
	// GetRegistry returns a registry's items and hash (empty if never written).
	GetRegistry(ctx context.Context, kind string) (*Registry, error)
	// RegistryHashes returns the current hash of every registry kind that
	// has been written, in one read.
	RegistryHashes(ctx context.Context) (map[string]string, error)

	// Changes reads the change feed: the ids of the sessions whose
	// SessionStream log grew (Append, AppendEach) or that were deleted
	// after cursor (ChangeSet.Sessions), whether an ApplyRegistry applied
	// a change (Registries), and the cursor to pass next time. An empty cursor
	// starts at the feed's end: no ids, and the cursor from which later
	// changes are reported. One read, whatever the number of sessions
	// that stream: a process watches its streams with one reader (see
	// ChangeFeedTTL). The feed is a wake-up hint, not a log: an id may
	// be reported more than once, or after its change is visible; a
	// change is reported after it is visible to GetSession and
	// ReadEvents. The feed keeps a change ChangeFeedTTL: a reader that
	// has not read for longer may have missed some, and must look at its
	// sessions itself. At most MaxChangesRead ids per call (Full when
	// it read that many): the rest are reported by the next call, or
	// the call reports Overflow instead of ids.
	Changes(ctx context.Context, cursor string) (changes ChangeSet, next string, err error)

	// Close releases the store's resources.
	Close() error
}

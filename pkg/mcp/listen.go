package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// subscriptions/listen (2026 era) is the only way the server pushes to a
// client. A listen stream is backed by a session in the store (never
// visible to the client), which names the process serving it (see
// liveness.go): it holds the stream's baseline registry
// hashes and its resource subscriptions, so that registry changes and SNS
// events reach it through the same store paths as a 2025 session's GET
// stream, from any process, exactly once per change (the conditional
// append of notifyChanges), coalesced between two checks, and nothing
// for a change back to the last notified hash.

// SubscriptionFilter names the notifications a listen stream wants.
type SubscriptionFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
	TaskIDs               []string `json:"taskIds,omitempty"` // notifications/tasks (tasks_push.go)
	// EventsListChanged asks for notifications/events/list_changed (the
	// Events extension, events.go).
	EventsListChanged bool `json:"eventsListChanged,omitempty"`
}

// Bounds of a listen filter.
const (
	// MaxListenSubscriptions bounds resourceSubscriptions.
	MaxListenSubscriptions = 100
	// maxListenURI bounds one subscribed URI.
	maxListenURI = 2048
)

// listenParkKey names the parked listen streams (see park) of principal
// with the acknowledged filter f: a parked stream's backing session
// records it (its Listen's Parked) while it waits to be adopted.
func listenParkKey(principal string, f *SubscriptionFilter) string {
	g := *f
	g.ResourceSubscriptions = slices.Sorted(slices.Values(f.ResourceSubscriptions))
	b, _ := json.Marshal(&g)
	sum := sha256.Sum256([]byte(principal + "\x00" + string(b)))
	return base64.RawURLEncoding.EncodeToString(sum[:18])
}

// listenCreateSubs is how many of a listen stream's subscriptions its
// backing session is created with (the rest are added one by one): within
// what every store takes in one CreateSession (dynamostore: 49).
const listenCreateSubs = 40

// listenParkFor is how long a listen stream that the server ended (at the
// request's deadline, or on shutdown) waits for its client to listen again
// with the same filter.
const listenParkFor = 2 * time.Minute

// Lifetime of a listen backing session. A stream extends its backing
// session's expiry at half of it (listenStream.refresh), so the session
// of a stream whose process died (SIGKILL, a crash, a frozen Lambda
// sandbox) expires within listenTTL: it stops receiving fan-out then. It
// stops counting against MaxListensPerPrincipal sooner: once its
// process's liveness record expires (livenessTTL), a listen of its
// principal refused at the bound deletes it (reclaimListens).
const (
	// listenHeldTTL is the shortest expiry a stream gives its backing
	// session. Its refresh, one write per listenHeldTTL/2 per idle
	// stream, is most of what an idle 2026 client costs on Managed
	// Instances (internal/costs BenchmarkScaleCostModel): 5 minutes keep
	// that under the goal of $0.05 per client-month (about $0.011 of it),
	// and bound the fan-out to a dead process's streams that no count
	// reclaims to 5 minutes.
	listenHeldTTL = 5 * time.Minute
	// listenTTLPolls is how many of its longest poll intervals a backing
	// session outlives its stream's last poll by, at least.
	listenTTLPolls = 4
)

// listenQuotaRetry is the Retry-After of a listen refused because its
// principal holds MaxListensPerPrincipal streams: one frees up when the
// client ends one, or once a crashed process's liveness record expires
// (livenessTTL) and a listen reclaims its streams.
const listenQuotaRetry = 10 * time.Second

// errListenQuota refuses a listen over MaxListensPerPrincipal.
type errListenQuota struct{ limit int }

func (e *errListenQuota) Error() string {
	return "this principal has " + itoa(int64(e.limit)) +
		" open listen streams, the limit; end one (notifications/cancelled or closing it) or retry later"
}

// refusal is the answer to a stream over the quota: 429 with Retry-After;
// for an events/stream (events set: the server's dialect), with the
// Events extension's ResourceExhausted code and data naming the limit.
func (e *errListenQuota) refusal(events EventsErrors) *refusal {
	r := rateLimited(listenQuotaRetry, e.Error())
	if events != "" {
		r.kind = errResourceExhausted
		r.data, _ = json.Marshal(map[string]any{"limit": "streams", "max": e.limit})
		r.cause = &Error{Code: events.Code(CodeResourceExhausted), Message: r.msg, Data: r.data}
	}
	return r
}

// cancelListen ends the listen streams a notifications/cancelled names:
// it appends listenCancel to the log of each backing session that records
// the request id (its Listen's Request), which the stream reads at its next
// poll, on whichever process it is served. It looks among the backing
// sessions of owner (quotaPrincipal: for an anonymous client, its
// address): one read (listenProfiles); a cancellation of a request that
// is not a listen stream writes nothing.
func (s *Server) cancelListen(ctx context.Context, owner string, m *Message) {
	p, err := decodeParams[CancelledParams](m.Params)
	if err != nil || len(p.RequestID) == 0 {
		return
	}
	want := canonicalID(p.RequestID)
	listens, err := s.listenProfiles(ctx, listenPrincipal(owner), notify.ListenMatch{Request: want}, s.listenScan())
	if err != nil {
		s.log.WarnContext(ctx, "cancelling a listen stream", "err", err)
		return
	}
	for _, st := range listens {
		id := st.ID
		if _, _, err := s.store.Append(ctx, id, getStream, [][]byte{listenCancel(p.RequestID)}, nil); err != nil && !errors.Is(err, notify.ErrNotFound) {
			s.log.WarnContext(ctx, "cancelling a listen stream", "stream", id, "err", err)
		}
		s.watcher.wake(id)
	}
}

// listenProfiles returns up to limit backing sessions of lp's listen
// streams (lp a listenPrincipal), open or parked, whose listen state
// matches match (the zero match: all), sorted by id, without their
// subscriptions: one read of the store's per-principal index
// (notify.ProfileLister). What a cancellation, an
// adoption or a reclaim costs thus grows with the streams one principal
// holds (at most MaxListensPerPrincipal), not with all; on SQLite only
// the matching ones are read.
func (s *Server) listenProfiles(ctx context.Context, lp string, match notify.ListenMatch, limit int) ([]*notify.Session, error) {
	return s.store.PrincipalProfiles(ctx, lp, match, limit)
}

// listenScan is how many of a principal's backing sessions a
// cancellation or an adoption looks at: twice the bound, as streams
// opened at once on several processes may exceed it.
func (s *Server) listenScan() int { return 2 * s.opts.Limits.MaxListensPerPrincipal }

// parseListenFilter decodes and checks a listen request's filter: unknown
// notification types and unbounded lists are invalid params.
func parseListenFilter(params json.RawMessage) (*SubscriptionFilter, *Error) {
	var p struct {
		Notifications json.RawMessage `json:"notifications"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, Errorf(CodeInvalidParams, "invalid params: %v", err)
	}
	if len(p.Notifications) == 0 || p.Notifications[0] != '{' {
		return nil, Errorf(CodeInvalidParams, "invalid params: subscriptions/listen needs a notifications object")
	}
	dec := json.NewDecoder(bytes.NewReader(p.Notifications))
	dec.DisallowUnknownFields()
	var f SubscriptionFilter
	if err := dec.Decode(&f); err != nil {
		return nil, Errorf(CodeInvalidParams, "invalid params: notifications: %v (known types: toolsListChanged, promptsListChanged, resourcesListChanged, resourceSubscriptions, taskIds, eventsListChanged)", err)
	}
	if err := checkListenTaskIDs(f.TaskIDs); err != nil {
		return nil, err
	}
	if len(f.ResourceSubscriptions) > MaxListenSubscriptions {
		return nil, Errorf(CodeInvalidParams, "invalid params: at most %d resourceSubscriptions", MaxListenSubscriptions)
	}
	for _, uri := range f.ResourceSubscriptions {
		if uri == "" || len(uri) > maxListenURI {
			return nil, Errorf(CodeInvalidParams, "invalid params: a resourceSubscriptions URI must have 1 to %d bytes", maxListenURI)
		}
		if reservedURI(uri) {
			return nil, Errorf(CodeInvalidParams, "invalid params: %q is not a resource (the %s URI scheme prefix is reserved)", clipText(uri, 64), reservedURIPrefix)
		}
	}
	return &f, nil
}

// acknowledged narrows f to what the server can deliver.
func (s *Server) acknowledged(f *SubscriptionFilter) *SubscriptionFilter {
	caps := s.capabilities()
	return &SubscriptionFilter{
		ToolsListChanged:      f.ToolsListChanged && caps.Tools != nil && caps.Tools.ListChanged,
		PromptsListChanged:    f.PromptsListChanged && caps.Prompts != nil && caps.Prompts.ListChanged,
		ResourcesListChanged:  f.ResourcesListChanged && caps.Resources != nil && caps.Resources.ListChanged,
		ResourceSubscriptions: map[bool][]string{true: f.ResourceSubscriptions}[caps.Resources != nil && caps.Resources.Subscribe],
		TaskIDs:               f.TaskIDs,
		EventsListChanged:     f.EventsListChanged && s.eventsOn(),
	}
}

// admits reports whether a logged notification goes to a stream with
// filter f.
func (f *SubscriptionFilter) admits(method string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return f.ToolsListChanged
	case "notifications/prompts/list_changed":
		return f.PromptsListChanged
	case "notifications/resources/list_changed":
		return f.ResourcesListChanged
	case "notifications/resources/updated":
		return len(f.ResourceSubscriptions) > 0
	case "notifications/tasks":
		return len(f.TaskIDs) > 0
	case methodEventsListChanged:
		return f.EventsListChanged
	}
	return false
}

// tagSubscription adds the subscription id to a notification's
// params._meta.
func tagSubscription(msg []byte, id json.RawMessage) ([]byte, string, error) {
	var m Message
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, "", err
	}
	params := map[string]json.RawMessage{}
	if len(m.Params) > 0 {
		if err := json.Unmarshal(m.Params, &params); err != nil {
			return nil, "", err
		}
	}
	meta := map[string]json.RawMessage{}
	if raw := params["_meta"]; len(raw) > 0 {
		_ = json.Unmarshal(raw, &meta)
	}
	meta[metaSubscriptionID] = id
	params["_meta"], _ = json.Marshal(meta)
	m.Params, _ = json.Marshal(params)
	out, err := json.Marshal(m)
	return out, m.Method, err
}

// listenStream is the transport-free state of one listen stream: its
// backing session in the store, its filter and its read position. Not
// safe for concurrent use: one goroutine serves a stream.
type listenStream struct {
	srv       *Server
	sess      *ServerSession // the backing session
	principal string         // the client's (the backing session's is listenPrincipal of it)
	id        json.RawMessage
	filter    *SubscriptionFilter // what the server acknowledged
	after     int64
	ttl       time.Duration      // the backing session's expiry after a refresh
	info      notify.ListenState // what the backing session records while this stream serves it (its Listen)

	tasks listenTasks // see checkTaskLeases
}

// openListen opens a listen stream for the 2026-era request (ss, id) with
// the client's filter f, whose backing session expires ttl after the
// stream's last refresh. It adopts a parked stream of the same principal
// and filter if there is one (see park), and so starts with what reached
// that one since it ended; otherwise, if owner holds fewer than
// MaxListensPerPrincipal listen streams (*errListenQuota if not, before
// anything is stored), it creates a backing session whose baseline is the
// registries as they are now (nothing from before the stream), subscribed
// to the acknowledged resources and the named tasks. owner is
// the principal whose quota the stream counts against and whose parked
// streams it may adopt (quotaPrincipal: an anonymous client's address).
func (s *Server) openListen(ctx context.Context, ss *ServerSession, owner string, id json.RawMessage, f *SubscriptionFilter, ttl time.Duration) (*listenStream, error) {
	ack := s.acknowledged(f)
	if l, err := s.adoptListen(ctx, ss, owner, id, ack, ttl); l != nil || err != nil {
		return l, err
	}
	if err := s.allowListen(ctx, owner); err != nil {
		return nil, err
	}
	hashes, err := s.store.RegistryHashes(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading registry hashes: %w", err)
	}
	process, err := s.holdLiveness(ctx)
	if err != nil {
		return nil, fmt.Errorf("storing the liveness record: %w", err)
	}
	uris := slices.Clone(ack.ResourceSubscriptions)
	for _, task := range ack.TaskIDs {
		uris = append(uris, taskURI(taskOwner(ss.Principal(), task), task))
	}
	// The first listenCreateSubs with the session, in the write that
	// creates it (on DynamoDB a Subscribe is a transaction of its own,
	// with a check of the session: 6 or more write units each); the rest
	// one by one.
	first := min(len(uris), listenCreateSubs)
	l, err := s.createBacking(ctx, &backing{
		kind: "listen", ss: ss, owner: owner, id: id, filter: ack, process: process,
		caps: ss.state.ClientCapabilities, hashes: hashes, subs: uris[:first], ttl: ttl,
	})
	if err != nil {
		s.releaseLiveness(ctx)
		return nil, fmt.Errorf("creating the backing session: %w", err)
	}
	for _, uri := range uris[first:] {
		if err := s.store.Subscribe(ctx, l.sess.ID(), uri); err != nil {
			l.close(ctx)
			s.releaseLiveness(ctx)
			return nil, fmt.Errorf("subscribing to %s: %w", uri, err)
		}
	}
	return l, nil
}

// backing is what a held stream's backing session is made of
// ([Server.createBacking]).
type backing struct {
	kind  string         // the session id's prefix: "listen" or "evstream"
	ss    *ServerSession // the session or request the stream was opened in: its principal and protocol version
	owner string         // quotaPrincipal of the client: the session's principal is listenPrincipal of it
	id    json.RawMessage
	// filter is what the stream delivers of its log: a listen stream's
	// acknowledged filter; none for an events stream, which reads its
	// log only as a doorbell.
	filter  *SubscriptionFilter
	process string // the liveness record of the process serving the stream (holdLiveness)
	// session is the 2025-era session an events stream was opened in
	// (endEventStreams); "" for a listen stream.
	session string
	// caps are the client capabilities the session is created with,
	// which decide whether it is told of changes of the events registry
	// (notifiedKinds).
	caps   json.RawMessage
	hashes map[string]string // the registries' hashes now: the baseline, nothing from before the stream
	subs   []string          // the URIs subscribed in the write that creates the session
	ttl    time.Duration     // the session's expiry after the stream's refresh
}

// createBacking creates the backing session of a held stream, a
// subscriptions/listen stream's (openListen) or an events/stream's
// (serveEventStream), and returns the stream's listenStream. It is the
// one place a backing session is made. The session is never visible to
// the client: its principal is [listenPrincipal] of b.owner, so that it
// counts against MaxListensPerPrincipal and a cancellation, an adoption
// or a reclaim finds it ([Server.listenProfiles]); its Listen records the
// process and the request serving it.
//
// The doorbell rule: the ingest puts only a notifications/resources/updated
// of a subscribed URI (a doorbell) into a backing session, never the
// notifications/message that carries an event's payload. The session's
// log level, the highest, states it; the ingest's fan-out enforces it
// (admitsInfo, in pkg/notify/ingest/fanout.go). A listen stream's filter
// admits no log message anyway ([SubscriptionFilter.admits]); an events
// stream reads its events from the topic's log ([Server.readEventsAfter]),
// and its backing session's log only wakes it ([doorbell]).
func (s *Server) createBacking(ctx context.Context, b *backing) (*listenStream, error) {
	now := s.opts.Now()
	info := notify.ListenState{Process: b.process, Request: canonicalID(b.id), Session: b.session}
	st := &notify.Session{
		ID:                 b.kind + "-" + randomID(16),
		Principal:          listenPrincipal(b.owner),
		ProtocolVersion:    b.ss.ProtocolVersion(),
		Listen:             info,
		ClientCapabilities: b.caps,
		Initialized:        true,
		LogLevel:           string(loggingLevels[len(loggingLevels)-1]), // the doorbell rule
		CreatedAt:          now,
		ExpiresAt:          now.Add(b.ttl),
		NotifiedHashes:     b.hashes,
		Subscriptions:      slices.Compact(slices.Sorted(slices.Values(b.subs))),
	}
	if err := s.store.CreateSession(ctx, st); err != nil {
		return nil, err
	}
	return &listenStream{srv: s, sess: &ServerSession{srv: s, state: st}, principal: b.ss.Principal(), id: b.id,
		filter: b.filter, ttl: b.ttl, info: info}, nil
}

// allowListen returns *errListenQuota if principal holds
// MaxListensPerPrincipal listen streams (open or parked, on any process):
// one read of the store's per-principal index of their backing sessions;
// at the bound, the streams of processes found dead are reclaimed
// (reclaimListens) and the count is read again. A failed read does not
// refuse (the failure is logged).
func (s *Server) allowListen(ctx context.Context, principal string) error {
	sc := s.store
	limit := s.opts.Limits.MaxListensPerPrincipal
	lp := listenPrincipal(principal)
	n, err := sc.CountSessions(ctx, lp, limit)
	if err == nil && n >= limit && s.reclaimListens(ctx, lp, limit) > 0 {
		n, err = sc.CountSessions(ctx, lp, limit)
	}
	if err != nil {
		s.log.WarnContext(ctx, "counting the listen streams of a principal", "err", err)
		return nil
	}
	if n >= limit {
		return &errListenQuota{limit: limit}
	}
	return nil
}

// adoptListen takes over a parked listen stream of owner with the
// acknowledged filter ack for the request id, if there is one (nil if
// not): found among owner's backing sessions (listenProfiles: one read),
// parked with ack's listenParkKey, and claimed with one conditional write
// of its session, on the version read (of two claimants one wins, the
// other looks further), which extends its expiry to ttl and records this
// process and the request. The stream reads its log from where the
// parked one stopped. An adopted stream holds the liveness record
// (releaseLiveness).
func (s *Server) adoptListen(ctx context.Context, ss *ServerSession, owner string, id json.RawMessage, ack *SubscriptionFilter, ttl time.Duration) (*listenStream, error) {
	key := listenParkKey(ss.Principal(), ack)
	listens, err := s.listenProfiles(ctx, listenPrincipal(owner), notify.ListenMatch{Parked: key}, s.listenScan())
	if err != nil {
		return nil, fmt.Errorf("looking for a parked listen stream: %w", err)
	}
	for _, st := range listens {
		parked := st.Listen
		process, err := s.holdLiveness(ctx)
		if err != nil {
			return nil, fmt.Errorf("storing the liveness record: %w", err)
		}
		info := notify.ListenState{Process: process, Request: canonicalID(id)}
		st.ExpiresAt, st.Listen = s.opts.Now().Add(ttl), info
		err = s.store.UpdateSession(ctx, st)
		if errors.Is(err, notify.ErrConflict) || errors.Is(err, notify.ErrNotFound) {
			s.releaseLiveness(ctx)
			continue // another stream took it, or it expired meanwhile
		}
		if err != nil {
			s.releaseLiveness(ctx)
			return nil, fmt.Errorf("adopting a parked listen stream: %w", err)
		}
		return &listenStream{srv: s, sess: &ServerSession{srv: s, state: st}, principal: ss.Principal(), id: id, filter: ack, after: parked.After, ttl: ttl, info: info}, nil
	}
	return nil, nil
}

// park keeps the backing session of a stream that the server ends (the
// request's deadline, shutdown) for listenParkFor, so that the client's
// next listen with the same filter adopts it and gets what reached it in
// between: the era has no replay, and this is what keeps a change from
// falling between two streams. One write of the session: its expiry set
// to listenParkFor, and its Listen to parked, with the stream's filter
// and read position, and no process (a parked stream counts against its
// principal's bound until adopted or expired, whichever process parked
// it) and no request (a late cancellation of the ended request finds
// nothing). A failure deletes the session instead.
func (l *listenStream) park(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s := l.srv
	until := s.opts.Now().Add(listenParkFor)
	parked := notify.ListenState{Parked: listenParkKey(l.principal, l.filter), After: l.after}
	err := l.update(ctx, func(st *notify.Session) { st.ExpiresAt, st.Listen = until, parked })
	if errors.Is(err, errListenTaken) {
		return // parked (the answer was lost) and adopted since: not ours to delete
	}
	if err != nil {
		s.log.WarnContext(ctx, "parking a listen stream", "stream", l.sess.ID(), "err", err)
		l.close(ctx)
	}
}

// update writes f's change to the stream's backing session
// (Server.updateSessionIf), applying it again after a conflict only if
// the session read back still records this stream (l.info): a park whose
// write landed but whose answer was lost, and which another stream
// adopted meanwhile, must not park the adopter's session again. It
// returns errListenTaken then.
func (l *listenStream) update(ctx context.Context, f func(*notify.Session)) error {
	return l.srv.updateSessionIf(ctx, l.sess, f, func(fresh *notify.Session) error {
		if fresh.Listen != l.info {
			return errListenTaken
		}
		return nil
	})
}

// ack is the acknowledgement, the stream's first message.
func (l *listenStream) ack() []byte {
	msg, _ := encodeNotification("notifications/subscriptions/acknowledged", map[string]any{
		"notifications": l.filter,
		"_meta":         map[string]json.RawMessage{metaSubscriptionID: l.id},
	})
	return msg
}

// result is the empty listen result that ends the stream gracefully.
func (l *listenStream) result() []byte { return emptyStreamResult(l.id) }

// emptyStreamResult is the response to the held-stream request id that
// ends it gracefully, the same for subscriptions/listen and events/stream
// (the empty StreamEventsResult): resultType complete, and the
// subscription id in _meta.
func emptyStreamResult(id json.RawMessage) []byte {
	res, _ := json.Marshal(map[string]any{
		"resultType": resultComplete,
		"_meta":      map[string]json.RawMessage{metaSubscriptionID: id},
	})
	return encodeResponse(id, json.RawMessage(res), nil)
}

// next checks the registries (logging any change into the backing
// session's log, exactly once among all processes) and returns the
// opted-in notifications logged since the last call, tagged with the
// subscription id. cancelled reports a notifications/cancelled; more
// that a full batch was read.
func (l *listenStream) next(ctx context.Context, registryAge time.Duration) (msgs [][]byte, cancelled, more bool, err error) {
	l.checkTaskLeases(ctx)
	// One read when there is nothing new (see pollGetLog).
	evs, err := l.srv.pollGetLog(ctx, l.sess, l.after, false, registryAge)
	if err != nil && len(evs) == 0 {
		return nil, false, false, err
	}
	for _, ev := range evs {
		l.after = ev.Seq
		if bytes.Equal(ev.Data, listenCancel(l.id)) {
			return msgs, true, false, nil
		}
		if isControl(ev.Data) {
			continue
		}
		msg, method, err := tagSubscription(ev.Data, l.id)
		if err != nil || !l.filter.admits(method) {
			continue
		}
		msgs = append(msgs, msg)
	}
	return msgs, false, len(evs) == readBatch, err // err: a failed registry check
}

// refresh extends the backing session's expiry to ttl from now once less
// than half of ttl is left: one conditional update per ttl/2 of a live
// stream (listenHeldTTL/2: minutes), not one per poll (the poll reads the
// stored expiry). A stream whose process died refreshes nothing, so its
// session expires within ttl of its last poll, unless a count reclaims
// it before (reclaimListens).
func (l *listenStream) refresh(ctx context.Context) {
	now := l.srv.opts.Now()
	if l.sess.state.ExpiresAt.Sub(now) > l.ttl/2 {
		return
	}
	if err := l.update(ctx, func(st *notify.Session) { st.ExpiresAt = now.Add(l.ttl) }); err != nil {
		l.srv.log.WarnContext(ctx, "extending a listen stream's expiry", "stream", l.sess.ID(), "err", err)
	}
}

// chores is how long until the stream's own upkeep is due, which a
// stream woken only by the watcher must wake for by itself: the backing
// session's refresh (half its ttl before it expires) and, when it names
// tasks, the next checkTaskLeases; between a second and livenessBeat.
func (l *listenStream) chores() time.Duration {
	now := l.srv.opts.Now()
	next := l.sess.state.ExpiresAt.Add(-l.ttl / 2).Sub(now)
	if e := l.srv.tasks; e != nil && len(l.filter.TaskIDs) > len(l.tasks.over) {
		next = min(next, l.tasks.checked.Add(e.opts.Lease/2).Sub(now))
	}
	// At most once a second: a refresh that fails is tried again, not in
	// a loop. At least once per livenessBeat: a wake-up that finds
	// nothing due costs no store request, and a clock that jumped (Now is
	// injected; timers run on the monotonic clock) is noticed in time.
	return min(max(next, time.Second), l.ttl/4, livenessBeat)
}

// listenTTL is the expiry of a listen backing session after its stream's
// refresh: listenTTLPolls of the stream's longest poll interval (an idle
// stream polls every RetryInterval, and at least once per KeepAlive), and
// at least listenHeldTTL.
func (h *StreamableHandler) listenTTL() time.Duration {
	poll := h.srv.opts.PollInterval
	gap := max(poll, min(max(poll, h.opts.RetryInterval), h.opts.KeepAlive))
	return max(listenTTLPolls*gap, listenHeldTTL)
}

// close deletes the backing session, with its log and subscriptions.
func (l *listenStream) close(ctx context.Context) {
	if err := l.srv.store.DeleteSession(context.WithoutCancel(ctx), l.sess.ID()); err != nil && !errors.Is(err, notify.ErrNotFound) {
		l.srv.log.WarnContext(ctx, "closing listen stream", "stream", l.sess.ID(), "err", err)
	}
}

// serveListen serves subscriptions/listen over SSE: the acknowledgement,
// then the opted-in notifications as they happen (a heldStream with a
// listenSource), until the client leaves or cancels (no response), or the
// server shuts down or nears the request's deadline (the empty listen
// result: the client listens again).
func (h *StreamableHandler) serveListen(w http.ResponseWriter, r *http.Request, ss *ServerSession, m *Message) {
	// What opens the stream is in openListenStream, whose frame is gone
	// while the stream waits (see heldStream.run).
	hs, l := h.openListenStream(w, r, ss, m)
	if hs == nil {
		return
	}
	ctx := r.Context()
	// Close waits for the backing session's deletion too: defers run last
	// first, so l.close runs before streams.Done.
	defer h.streams.Done()
	// Last (defers run last first): once the stream is closed or parked.
	defer h.srv.releaseLiveness(ctx)
	parked := false
	defer func() {
		if !parked {
			l.close(ctx)
		}
	}()
	parked = hs.run(ctx) == endDeadline
}

// openListenStream opens the listen stream of a request to serveListen:
// it checks the filter, opens the backing session (openListen) and writes
// the acknowledgement. It returns the stream to run on the listen stream
// l, counted in h.streams and holding the liveness record, which the
// caller releases and closes once it ends; nil when the request was
// answered otherwise.
//
//go:noinline
func (h *StreamableHandler) openListenStream(w http.ResponseWriter, r *http.Request, ss *ServerSession, m *Message) (hs *heldStream, l *listenStream) {
	ctx := r.Context()
	f, bad := parseListenFilter(m.Params)
	if bad == nil && len(f.TaskIDs) > 0 && !clientDeclaresTasks(ss) {
		bad = missingTasksCapability("taskIds need it")
	}
	if bad != nil {
		writeError(w, Era2026, m.ID, bad)
		return nil, nil
	}
	h.streams.Add(1)
	defer func() {
		if hs == nil { // not opened: released here, as serveListen would
			h.streams.Done()
		}
	}()
	l, err := h.srv.openListen(ctx, ss, quotaPrincipal(r, ss.Principal()), m.ID, f, h.listenTTL())
	var quota *errListenQuota
	if errors.As(err, &quota) {
		writeError(w, Era2026, m.ID, quota.refusal(""))
		return nil, nil
	}
	if err != nil {
		h.storeFailure(ctx, w, Era2026, m.ID, err, "opening listen stream")
		return nil, nil
	}
	sse := newSSEWriter(w)
	sse.start()
	if sse.event("", l.ack()) != nil {
		// In serveListen's order: closed, then the liveness record.
		l.close(ctx)
		h.srv.releaseLiveness(ctx)
		return nil, nil
	}
	// Registered before the first read (an adopted stream delivers what
	// reached it while parked): no change between the two is missed.
	hs = &heldStream{h: h, sse: sse, src: (*listenSource)(l), session: l.sess.ID(), hold: h.opts.StreamHold, watchFirst: true, hooks: h.heldHooks}
	return hs, l
}

// listenSource is the heldSource of a listen stream. The 2026-07-28 era
// cannot resume a listen stream, so it is held for as long as the client
// listens (on Lambda, until the deadline, where it is parked: see park).
// What an idle one costs besides is its polling: without a watcher, for
// StreamHold after it opens or last delivers, it polls every
// PollInterval; then every RetryInterval (the delay after which an idle
// GET client reconnects, the same latency), with the registry hashes
// trusted up to idleRegistryAge as an idle GET reconnection does.
type listenSource listenStream

func (ls *listenSource) read(ctx context.Context, age time.Duration) (heldBatch, error) {
	l := (*listenStream)(ls)
	msgs, cancelled, more, err := l.next(ctx, age)
	if err == nil {
		// The backing session lives as long as the stream: extend its
		// expiry (one write per half its ttl).
		l.refresh(ctx)
	}
	b := heldBatch{end: cancelled, more: more} // cancelled: no response
	for _, msg := range msgs {
		b.msgs = append(b.msgs, heldMsg{data: msg})
	}
	b.msgs = l.srv.filterTopicMessages(ctx, b.msgs)
	return b, err
}

func (ls *listenSource) wrote(heldMsg) {}

func (ls *listenSource) delivered(context.Context, bool) {}

// upkeepIn is when the backing session's refresh or a check of the
// leases of the tasks the stream names is due (chores).
func (ls *listenSource) upkeepIn(time.Time) time.Duration { return (*listenStream)(ls).chores() }

func (ls *listenSource) upkeep(ctx context.Context) []heldMsg {
	l := (*listenStream)(ls)
	l.refresh(ctx)
	l.checkTaskLeases(ctx)
	return nil
}

// finish parks the stream at the deadline or on shutdown, and ends it
// with the empty listen result then and when its backing session is gone
// (expired, deleted): the client listens again.
func (ls *listenSource) finish(ctx context.Context, sse *sseWriter, why heldEnd) {
	l := (*listenStream)(ls)
	switch why {
	case endDeadline:
		l.park(ctx)
		sse.event("", l.result())
	case endGone:
		sse.event("", l.result())
	}
}

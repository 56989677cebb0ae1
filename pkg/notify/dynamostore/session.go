package dynamostore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/pkg/notify"
)

// Session item attributes.
const (
	attrSID          = "sid"
	attrPrincipal    = "pr"
	attrProtocol     = "pv"
	attrClientInfo   = "ci"
	attrClientCaps   = "cc"
	attrLogLevel     = "ll"
	attrInitialized  = "ini"
	attrCreatedAt    = "ca"
	attrVersion      = "ver"
	attrDelivered    = "dl"
	attrHashes       = "nh"
	attrUpdateTok    = "utok"
	attrDeleteTok    = "dtok"
	attrURI          = "uri"
	attrListen       = "lis" // notify.ListenState, a map (listenAV)
	maxTransactItems = 100
)

// CreateSession implements notify.Store with one TransactWriteItems: the
// session item, the entry of its principal's session index
// (CountSessions) and its subscriptions, if it starts with any (at most
// 49). An expired session with the same id counts as gone: it is replaced,
// after everything it owned is deleted. A zero ExpiresAt is refused with
// notify.ErrInvalid.
func (s *Store) CreateSession(ctx context.Context, sess *notify.Session) (err error) {
	if sess == nil {
		return fmt.Errorf("dynamostore: CreateSession: %w", invalid("nil session"))
	}
	defer wrap(&err, "dynamostore: CreateSession(%q)", sess.ID)
	if err := notify.CheckSession(sess); err != nil {
		return err
	}
	var subs []string
	for _, uri := range sess.Subscriptions {
		if err := notify.CheckSubscription(sess.ID, uri); err != nil {
			return err
		}
		if !slices.Contains(subs, uri) {
			subs = append(subs, uri)
		}
	}
	if n := 2 + 2*len(subs); n > maxTransactItems {
		return fmt.Errorf("%w: %d subscriptions; a session starts with at most %d", notify.ErrTooLarge, len(subs), (maxTransactItems-2)/2)
	}
	hashes := make(map[string]types.AttributeValue, len(sess.NotifiedHashes))
	for kind, h := range sess.NotifiedHashes {
		if !notify.ValidRegistry(kind) {
			return invalid("registry kind %q in NotifiedHashes", kind)
		}
		hashes[kind] = avS(h)
	}

	tok := newToken()
	pk := sessPK(sess.ID)
	meta := sessionItem(sess, hashes, tok)

	for replaced := 0; ; replaced++ {
		var at attempts
		var e expr
		cond := "attribute_not_exists(" + e.n(attrPK) + ")"
		items := []types.TransactWriteItem{{Put: &types.Put{
			TableName:                           s.table,
			Item:                                meta,
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            e.namesOrNil(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}, s.principalPut(sess)}
		for _, uri := range subs {
			items = append(items, s.subscriptionPuts(sess.ID, uri)...)
		}
		err = s.transact(ctx, items, &at)
		if err == nil {
			return nil
		}
		var (
			failed bool
			old    item
		)
		if c, ok := asCancellation(err); ok {
			failed, old = c.failed(0)
		} else {
			failed, old = conditionFailed(err)
		}
		switch {
		case !failed:
			return err
		case getS(old, attrTok) == tok:
			return nil // our own earlier attempt, retried by the SDK
		case len(old) == 0 || live(old, toNanos(s.now())) || replaced == 3:
			return notify.ErrExists
		}
		// An expired session: delete what it owned, then the session
		// item itself if it is still the same one, and try again. No
		// write can add to an expired session meanwhile.
		same := func(meta item) bool { return getS(meta, attrTok) == getS(old, attrTok) }
		if err := s.purge(ctx, sess.ID, same, true); err != nil {
			return fmt.Errorf("deleting expired session: %w", err)
		}
		var d expr
		_, err = s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                 s.table,
			Key:                       key(pk, metaSK),
			ConditionExpression:       aws.String(d.n(attrTok) + " = " + d.v(avS(getS(old, attrTok)))),
			ExpressionAttributeNames:  d.namesOrNil(),
			ExpressionAttributeValues: d.valuesOrNil(),
		})
		if failed, _ := conditionFailed(err); err != nil && !failed {
			return fmt.Errorf("deleting expired session: %w", err)
		}
		s.seqs.forget(pk + "|")
	}
}

// sessionItem is the session item of sess, written by the call of token
// tok, with its notified registry hashes.
func sessionItem(sess *notify.Session, hashes map[string]types.AttributeValue, tok string) item {
	meta := key(sessPK(sess.ID), metaSK)
	meta[attrSID] = avS(sess.ID)
	meta[attrPrincipal] = avS(sess.Principal)
	meta[attrProtocol] = avS(sess.ProtocolVersion)
	if sess.ClientInfo != nil {
		meta[attrClientInfo] = avB(sess.ClientInfo)
	}
	if sess.ClientCapabilities != nil {
		meta[attrClientCaps] = avB(sess.ClientCapabilities)
	}
	meta[attrLogLevel] = avS(sess.LogLevel)
	meta[attrInitialized] = avBool(sess.Initialized)
	meta[attrCreatedAt] = avN(toNanos(sess.CreatedAt))
	setExpiry(meta, sess.ExpiresAt)
	meta[attrVersion] = avN(sess.Version)
	meta[attrDelivered] = avN(sess.Delivered)
	meta[attrHashes] = &types.AttributeValueMemberM{Value: hashes}
	if sess.Listen != (notify.ListenState{}) {
		meta[attrListen] = listenAV(sess.Listen)
	}
	meta[attrTok] = avS(tok)
	return meta
}

// Members of a session item's listen state (attrListen): only those set.
const (
	listenProcess = "p"
	listenRequest = "r"
	listenParked  = "k"
	listenAfter   = "a"
	listenSession = "s"
)

// listenAV is the attribute value of a non-zero listen state: a map of
// its non-empty fields.
func listenAV(l notify.ListenState) types.AttributeValue {
	m := make(item, 5)
	for _, f := range [...]struct{ name, v string }{
		{listenProcess, l.Process}, {listenRequest, l.Request}, {listenParked, l.Parked}, {listenSession, l.Session},
	} {
		if f.v != "" {
			m[f.name] = avS(f.v)
		}
	}
	if l.After != 0 {
		m[listenAfter] = avN(l.After)
	}
	return &types.AttributeValueMemberM{Value: m}
}

// listenOf is the listen state a session item records (zero if none).
func listenOf(meta item) notify.ListenState {
	m, ok := meta[attrListen].(*types.AttributeValueMemberM)
	if !ok {
		return notify.ListenState{}
	}
	return notify.ListenState{
		Process: getS(m.Value, listenProcess),
		Request: getS(m.Value, listenRequest),
		Parked:  getS(m.Value, listenParked),
		After:   getN(m.Value, listenAfter),
		Session: getS(m.Value, listenSession),
	}
}

// subscriptionPuts returns the writes that subscribe session id to uri:
// the marker in the session's partition and the subscriber index entry.
func (s *Store) subscriptionPuts(id, uri string) []types.TransactWriteItem {
	marker := key(sessPK(id), markerSK(uri))
	marker[attrURI] = avS(uri)
	marker[attrSince] = avN(toNanos(s.now()))
	index := key(subPK(uri), part(id))
	index[attrSID] = avS(id)
	return []types.TransactWriteItem{
		{Put: &types.Put{TableName: s.table, Item: marker}},
		{Put: &types.Put{TableName: s.table, Item: index}},
	}
}

// transact runs TransactWriteItems, retrying while it is cancelled only by
// conflicts with concurrent transactions or by throttling.
func (s *Store) transact(ctx context.Context, items []types.TransactWriteItem, at *attempts) error {
	for n := 1; ; n++ {
		_, err := s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, at.option)
		if c, ok := asCancellation(err); ok && c.transient() && n < maxRaces {
			if err := backoff(ctx, n); err != nil {
				return err
			}
			continue
		}
		return err
	}
}

// GetSession implements notify.Store with one Query: the session item, its
// subscriptions and its GET stream's head share a partition and the sk
// prefix "#".
func (s *Store) GetSession(ctx context.Context, id string) (_ *notify.Session, err error) {
	defer wrap(&err, "dynamostore: GetSession(%q)", id)
	if id == "" {
		return nil, invalid("empty session id")
	}
	var e expr
	in := &dynamodb.QueryInput{
		TableName:              s.table,
		ConsistentRead:         consistent,
		KeyConditionExpression: aws.String(e.n(attrPK) + " = " + e.v(avS(sessPK(id))) + " AND begins_with(" + e.n(attrSK) + ", " + e.v(avS(metaSK)) + ")"),
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
	var (
		meta item
		subs []string
		head int64
	)
	for {
		res, err := s.api.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range res.Items {
			switch sk := getS(it, attrSK); {
			case sk == metaSK:
				meta = it
			case sk == getHeadSK:
				head = getN(it, attrSeq)
			case strings.HasPrefix(sk, markerPref):
				subs = append(subs, getS(it, attrURI))
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	if !live(meta, toNanos(s.now())) {
		return nil, notify.ErrNotFound
	}
	slices.Sort(subs)
	sess := sessionOf(id, meta)
	sess.Subscriptions = subs
	sess.StreamHead = head
	return sess, nil
}

// sessionOf returns the session of a live session item, without its
// subscriptions and stream head.
func sessionOf(id string, meta item) *notify.Session {
	sess := &notify.Session{
		ID:                 id,
		Principal:          getS(meta, attrPrincipal),
		ProtocolVersion:    getS(meta, attrProtocol),
		ClientInfo:         getB(meta, attrClientInfo),
		ClientCapabilities: getB(meta, attrClientCaps),
		LogLevel:           getS(meta, attrLogLevel),
		Initialized:        getBool(meta, attrInitialized),
		CreatedAt:          fromNanos(getN(meta, attrCreatedAt)),
		ExpiresAt:          fromNanos(getN(meta, attrExp)),
		Version:            getN(meta, attrVersion),
		NotifiedHashes:     make(map[string]string),
		Delivered:          getN(meta, attrDelivered),
		Listen:             listenOf(meta),
	}
	if m, ok := meta[attrHashes].(*types.AttributeValueMemberM); ok {
		for kind, v := range m.Value {
			if v, ok := v.(*types.AttributeValueMemberS); ok {
				sess.NotifiedHashes[kind] = v.Value
			}
		}
	}
	// An item of a version before the listen state had an attribute of
	// its own keeps it in its client info: read as this version writes it
	// (its session's next UpdateSession writes it so).
	notify.UpgradeListen(sess)
	return sess
}

// UpdateSession implements notify.Store with one conditional UpdateItem.
// On success it increments sess.Version.
func (s *Store) UpdateSession(ctx context.Context, sess *notify.Session) (err error) {
	if sess == nil {
		return fmt.Errorf("dynamostore: UpdateSession: %w", invalid("nil session"))
	}
	defer wrap(&err, "dynamostore: UpdateSession(%q)", sess.ID)
	if err := notify.CheckSession(sess); err != nil {
		return err
	}
	tok := newToken()
	now := toNanos(s.now())
	var e expr
	exp, ttl := expiry(sess.ExpiresAt)
	set := []string{
		e.n(attrProtocol) + " = " + e.v(avS(sess.ProtocolVersion)),
		e.n(attrLogLevel) + " = " + e.v(avS(sess.LogLevel)),
		e.n(attrInitialized) + " = " + e.v(avBool(sess.Initialized)),
		e.n(attrExp) + " = " + e.v(exp),
		e.n(attrExpiresAt) + " = " + e.v(ttl),
		e.n(attrVersion) + " = " + e.n(attrVersion) + " + " + e.v(avN(1)),
		e.n(attrUpdateTok) + " = " + e.v(avS(tok)),
	}
	var remove []string
	for _, f := range []struct {
		name string
		v    []byte
	}{{attrClientInfo, sess.ClientInfo}, {attrClientCaps, sess.ClientCapabilities}} {
		if f.v == nil {
			remove = append(remove, e.n(f.name))
		} else {
			set = append(set, e.n(f.name)+" = "+e.v(avB(f.v)))
		}
	}
	if sess.Listen == (notify.ListenState{}) {
		remove = append(remove, e.n(attrListen))
	} else {
		set = append(set, e.n(attrListen)+" = "+e.v(listenAV(sess.Listen)))
	}
	update := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		update += " REMOVE " + strings.Join(remove, ", ")
	}
	cond := e.live(now) + " AND " + e.n(attrVersion) + " = " + e.v(avN(sess.Version))
	var at attempts
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           s.table,
		Key:                                 key(sessPK(sess.ID), metaSK),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            e.namesOrNil(),
		ExpressionAttributeValues:           e.valuesOrNil(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, at.option)
	if failed, old := conditionFailed(err); failed {
		switch {
		case getS(old, attrUpdateTok) == tok && getN(old, attrVersion) == sess.Version+1:
			err = nil // our own earlier attempt, retried by the SDK
		case !live(old, now):
			return notify.ErrNotFound
		default:
			return fmt.Errorf("%w: version is %d, not %d", notify.ErrConflict, getN(old, attrVersion), sess.Version)
		}
	}
	if err != nil {
		return err
	}
	sess.Version++
	return nil
}

// DeleteSession implements notify.Store: one UpdateItem that marks the
// session deleted (expired, with this call's token), conditional on it
// being live; then one Query of its partition, BatchWriteItem requests (25
// items each) that delete everything it owned, and a DeleteItem of the
// session item, last.
// Once the session is marked nothing can be added to the partition. An
// expired session is deleted too, but reported as notify.ErrNotFound.
func (s *Store) DeleteSession(ctx context.Context, id string) (err error) {
	defer wrap(&err, "dynamostore: DeleteSession(%q)", id)
	if id == "" {
		return invalid("empty session id")
	}
	tok := newToken()
	now := s.now()
	// exp 0 is expired whatever a reader's clock says; expiresAt now lets
	// DynamoDB's TTL remove the item should the purge below fail.
	_, ttl := expiry(now)
	var e expr
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table,
		Key:       key(sessPK(id), metaSK),
		UpdateExpression: aws.String("SET " + e.n(attrExp) + " = " + e.v(avN(0)) + ", " +
			e.n(attrExpiresAt) + " = " + e.v(ttl) + ", " + e.n(attrDeleteTok) + " = " + e.v(avS(tok))),
		ConditionExpression:                 aws.String(e.live(toNanos(now))),
		ExpressionAttributeNames:            e.namesOrNil(),
		ExpressionAttributeValues:           e.valuesOrNil(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	failed, old := conditionFailed(err)
	if err != nil && !failed {
		return err
	}
	s.seqs.forget(sessPK(id) + "|")
	mine := func(meta item) bool {
		return getS(meta, attrDeleteTok) == tok || len(old) > 0 && getS(meta, attrTok) == getS(old, attrTok)
	}
	if err := s.purge(ctx, id, mine, false); err != nil {
		return err
	}
	// A failed condition means the session was missing or expired, unless
	// this call's own first attempt marked it (the SDK retried).
	if failed && getS(old, attrDeleteTok) != tok {
		return notify.ErrNotFound
	}
	s.recordChange(ctx, id)
	return nil
}

// purge deletes every item of a session's partition and its subscriber
// index entries, and then, unless keepMeta, the session item. It does
// nothing when the session item it finds is not one that owner accepts:
// another incarnation of the session (a CreateSession that replaced an
// expired one) owns the partition now.
func (s *Store) purge(ctx context.Context, id string, owner func(meta item) bool, keepMeta bool) error {
	var e expr
	in := &dynamodb.QueryInput{
		TableName:              s.table,
		ConsistentRead:         consistent,
		KeyConditionExpression: aws.String(e.n(attrPK) + " = " + e.v(avS(sessPK(id)))),
		ProjectionExpression: aws.String(strings.Join([]string{
			e.n(attrPK), e.n(attrSK), e.n(attrURI), e.n(attrTok), e.n(attrDeleteTok), e.n(attrPrincipal)}, ", ")),
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
	var (
		keys []item
		meta item
	)
	for {
		res, err := s.api.Query(ctx, in)
		if err != nil {
			return err
		}
		for _, it := range res.Items {
			sk := getS(it, attrSK)
			if sk == metaSK {
				if !owner(it) {
					return nil
				}
				meta = it
				keys = append(keys, key(principalPK(getS(it, attrPrincipal)), part(id)))
				continue
			}
			keys = append(keys, key(getS(it, attrPK), sk))
			if strings.HasPrefix(sk, markerPref) {
				keys = append(keys, key(subPK(getS(it, attrURI)), part(id)))
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	if err := s.batchDelete(ctx, keys); err != nil {
		return err
	}
	if meta == nil || keepMeta {
		return nil
	}
	// Last, so that a failure above leaves the session expired with its
	// items, for DeleteSession or CreateSession to finish; and only the
	// incarnation seen above.
	var d expr
	_, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 s.table,
		Key:                       key(sessPK(id), metaSK),
		ConditionExpression:       aws.String(d.n(attrTok) + " = " + d.v(avS(getS(meta, attrTok)))),
		ExpressionAttributeNames:  d.namesOrNil(),
		ExpressionAttributeValues: d.valuesOrNil(),
	})
	if failed, _ := conditionFailed(err); failed {
		return nil // gone already, or replaced
	}
	return err
}

// MarkDelivered implements notify.Store with one conditional UpdateItem.
func (s *Store) MarkDelivered(ctx context.Context, sessionID string, seq int64) (err error) {
	defer wrap(&err, "dynamostore: MarkDelivered(%q, %d)", sessionID, seq)
	if sessionID == "" {
		return invalid("empty session id")
	}
	now := toNanos(s.now())
	var e expr
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           s.table,
		Key:                                 key(sessPK(sessionID), metaSK),
		UpdateExpression:                    aws.String("SET " + e.n(attrDelivered) + " = " + e.v(avN(seq))),
		ConditionExpression:                 aws.String(e.live(now) + " AND " + e.n(attrDelivered) + " < " + e.v(avN(seq))),
		ExpressionAttributeNames:            e.namesOrNil(),
		ExpressionAttributeValues:           e.valuesOrNil(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if failed, old := conditionFailed(err); failed {
		if !live(old, now) {
			return notify.ErrNotFound
		}
		return nil // already at or beyond seq
	}
	return err
}

// Subscribe implements notify.Store with one TransactWriteItems: a check
// that the session is live, its subscription marker and the subscriber
// index entry. The marker is updated, not replaced, so that subscribing
// again keeps the subscription's AppendEach position and start.
func (s *Store) Subscribe(ctx context.Context, sessionID, uri string) (err error) {
	defer wrap(&err, "dynamostore: Subscribe(%q, %q)", sessionID, uri)
	if err := checkSubscription(sessionID, uri); err != nil {
		return err
	}
	writes := s.subscriptionPuts(sessionID, uri)
	var e expr
	writes[0] = types.TransactWriteItem{Update: &types.Update{
		TableName: s.table,
		Key:       key(sessPK(sessionID), markerSK(uri)),
		UpdateExpression: aws.String("SET " + e.n(attrURI) + " = " + e.v(avS(uri)) + ", " +
			e.n(attrSince) + " = if_not_exists(" + e.n(attrSince) + ", " + e.v(avN(toNanos(s.now()))) + ")"),
		ExpressionAttributeNames:  e.namesOrNil(),
		ExpressionAttributeValues: e.valuesOrNil(),
	}}
	return s.subscription(ctx, sessionID, writes)
}

// Unsubscribe implements notify.Store like Subscribe.
func (s *Store) Unsubscribe(ctx context.Context, sessionID, uri string) (err error) {
	defer wrap(&err, "dynamostore: Unsubscribe(%q, %q)", sessionID, uri)
	if err := checkSubscription(sessionID, uri); err != nil {
		return err
	}
	return s.subscription(ctx, sessionID, []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: s.table, Key: key(sessPK(sessionID), markerSK(uri))}},
		{Delete: &types.Delete{TableName: s.table, Key: key(subPK(uri), part(sessionID))}},
	})
}

func checkSubscription(sessionID, uri string) error {
	return notify.CheckSubscription(sessionID, uri)
}

// subscription runs writes in one transaction with a check that the
// session is live.
func (s *Store) subscription(ctx context.Context, sessionID string, writes []types.TransactWriteItem) error {
	items := append([]types.TransactWriteItem{{ConditionCheck: s.liveCheck(sessPK(sessionID), toNanos(s.now()))}}, writes...)
	var at attempts
	err := s.transact(ctx, items, &at)
	if c, ok := asCancellation(err); ok {
		if failed, _ := c.failed(0); failed {
			return notify.ErrNotFound
		}
	}
	return err
}

// liveCheck is a transaction check that the session of partition pk is
// live.
func (s *Store) liveCheck(pk string, now int64) *types.ConditionCheck {
	var e expr
	return &types.ConditionCheck{
		TableName:                           s.table,
		Key:                                 key(pk, metaSK),
		ConditionExpression:                 aws.String(e.live(now)),
		ExpressionAttributeNames:            e.namesOrNil(),
		ExpressionAttributeValues:           e.valuesOrNil(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// Subscribers implements notify.Store with one Query of the subscriber
// index and one BatchGetItem per 100 subscribers, which filters out
// sessions that are not live. Index entries whose session item is gone
// (deleted by DynamoDB's TTL without DeleteSession) are deleted on the way,
// best effort.
func (s *Store) Subscribers(ctx context.Context, uri string) (_ []string, err error) {
	defer wrap(&err, "dynamostore: Subscribers(%q)", uri)
	if uri == "" {
		return nil, invalid("empty URI")
	}
	var e expr
	in := &dynamodb.QueryInput{
		TableName:              s.table,
		ConsistentRead:         consistent,
		KeyConditionExpression: aws.String(e.n(attrPK) + " = " + e.v(avS(subPK(uri)))),
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
	ids, err := s.queryIDs(ctx, in)
	if err != nil {
		return nil, err
	}
	now := toNanos(s.now())
	var (
		out     []string
		garbage []item
	)
	for chunk := range slices.Chunk(ids, 100) {
		var p expr
		found, err := s.sessionMetas(ctx, chunk, p.n(attrPK)+", "+p.n(attrExp), p.namesOrNil())
		if err != nil {
			return nil, err
		}
		for _, id := range chunk {
			m, ok := found[id]
			switch {
			case !ok:
				garbage = append(garbage, key(subPK(uri), part(id)), key(sessPK(id), markerSK(uri)))
			case live(m, now):
				out = append(out, id)
			}
		}
	}
	if len(garbage) > 0 {
		// Best effort: a failure leaves entries the next call skips again.
		_ = s.batchDelete(ctx, garbage)
	}
	slices.Sort(out)
	return out, nil
}

// PutMessage implements notify.Store with one TransactWriteItems: a check
// that the session is live and a conditional put. An expired message under
// the same key is replaced; a live one wins.
func (s *Store) PutMessage(ctx context.Context, sessionID, msgKey string, data []byte) (created bool, err error) {
	defer wrap(&err, "dynamostore: PutMessage(%q, %q)", sessionID, msgKey)
	if err := notify.CheckMessage(sessionID, msgKey, data); err != nil {
		return false, err
	}
	now := s.now()
	nowN := toNanos(now)
	tok := newToken()
	msg := setExpiry(key(sessPK(sessionID), msgSK(msgKey)), now.Add(s.eventTTL))
	msg[attrData] = avB(data)
	msg[attrTok] = avS(tok)
	var e expr
	put := &types.Put{
		TableName:                           s.table,
		Item:                                msg,
		ConditionExpression:                 aws.String(e.absent(nowN)),
		ExpressionAttributeNames:            e.namesOrNil(),
		ExpressionAttributeValues:           e.valuesOrNil(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	var at attempts
	err = s.transact(ctx, []types.TransactWriteItem{{ConditionCheck: s.liveCheck(sessPK(sessionID), nowN)}, {Put: put}}, &at)
	if c, ok := asCancellation(err); ok {
		if failed, _ := c.failed(0); failed {
			return false, notify.ErrNotFound
		}
		if failed, old := c.failed(1); failed {
			// A live message wins, unless it is this call's own.
			return getS(old, attrTok) == tok, nil
		}
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// GetMessage implements notify.Store with one BatchGetItem of the session
// item and the message.
func (s *Store) GetMessage(ctx context.Context, sessionID, msgKey string) (_ []byte, err error) {
	defer wrap(&err, "dynamostore: GetMessage(%q, %q)", sessionID, msgKey)
	if err := notify.CheckMessage(sessionID, msgKey, nil); err != nil {
		return nil, err
	}
	pk := sessPK(sessionID)
	var p expr
	proj := strings.Join([]string{p.n(attrPK), p.n(attrSK), p.n(attrExp), p.n(attrData)}, ", ")
	items, err := s.batchGet(ctx, []item{key(pk, metaSK), key(pk, msgSK(msgKey))}, proj, p.namesOrNil())
	if err != nil {
		return nil, err
	}
	var meta, msg item
	for _, it := range items {
		if getS(it, attrSK) == metaSK {
			meta = it
		} else {
			msg = it
		}
	}
	now := toNanos(s.now())
	if !live(meta, now) {
		return nil, notify.ErrSessionGone
	}
	if !live(msg, now) {
		return nil, fmt.Errorf("message: %w", notify.ErrNotFound)
	}
	return getB(msg, attrData), nil
}

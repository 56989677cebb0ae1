package dynamostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// TestListenStateOfBefore: a backing session item as a version before
// notify.Session.Listen wrote it, its listen state JSON in its client
// info ("ci") and no listen attribute ("lis"), is read with that state
// in Listen and no client info (GetSession, PrincipalProfiles, whose
// typed match finds it), and its next UpdateSession writes it in the new
// form; a session of another principal whose client info looks the same
// keeps it.
func TestListenStateOfBefore(t *testing.T) {
	ep := endpoint(t)
	table := newTable(t)
	ctx := context.Background()
	if err := dynamostore.CreateTable(ctx, client(ep), table); err != nil {
		t.Fatal(err)
	}
	st := dynamostore.New(strictAPI{client(ep)}, table, nil)
	const lp = "mcpush-listen:4h8nkvUPd4rkvnp-Ig3W26Zkw_7XRDqDbTv1nWVMkBk"
	now := time.Now()
	rawItem := func(id string) map[string]types.AttributeValue {
		t.Helper()
		out, err := client(ep).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "S#" + id}, "sk": &types.AttributeValueMemberS{Value: "#"}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	for _, r := range []struct{ id, principal, info string }{
		{"listen-parked", lp, `{"mcpush/parked":"pk1","mcpush/after":7}`},
		{"evstream-1", lp, `{"mcpush/process":"process-a","mcpush/request":"n:3","mcpush/session":"sess-2025"}`},
		{"lookalike", "alice", `{"mcpush/parked":"pk1"}`},
	} {
		if err := st.CreateSession(ctx, &notify.Session{ID: r.id, Principal: r.principal, ProtocolVersion: "2026-07-28",
			Initialized: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		// The client info as the earlier version wrote it.
		if _, err := client(ep).UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
			Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "S#" + r.id}, "sk": &types.AttributeValueMemberS{Value: "#"}},
			UpdateExpression:          aws.String("SET ci = :ci"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":ci": &types.AttributeValueMemberB{Value: []byte(r.info)}},
		}); err != nil {
			t.Fatal(err)
		}
	}

	parked := notify.ListenState{Parked: "pk1", After: 7}
	for id, want := range map[string]notify.ListenState{
		"listen-parked": parked,
		"evstream-1":    {Process: "process-a", Request: "n:3", Session: "sess-2025"},
	} {
		sess, err := st.GetSession(ctx, id)
		if err != nil || sess.Listen != want || sess.ClientInfo != nil {
			t.Errorf("GetSession(%s): Listen %+v, ClientInfo %s, %v; want %+v and no client info", id, sess.Listen, sess.ClientInfo, err, want)
		}
	}
	if sess, err := st.GetSession(ctx, "lookalike"); err != nil || sess.Listen != (notify.ListenState{}) || string(sess.ClientInfo) != `{"mcpush/parked":"pk1"}` {
		t.Errorf("GetSession(lookalike): Listen %+v, ClientInfo %s, %v; want its client info as written", sess.Listen, sess.ClientInfo, err)
	}
	for _, c := range []struct {
		match notify.ListenMatch
		want  string
	}{
		{notify.ListenMatch{Parked: "pk1"}, "listen-parked"},
		{notify.ListenMatch{Session: "sess-2025"}, "evstream-1"},
		{notify.ListenMatch{Request: "n:3"}, "evstream-1"},
	} {
		got, err := st.PrincipalProfiles(ctx, lp, c.match, 10)
		if err != nil || len(got) != 1 || got[0].ID != c.want {
			t.Errorf("PrincipalProfiles(%+v) = %v, %v; want %s", c.match, got, err, c.want)
		}
	}

	// Adopted: written in the new form.
	got, err := st.PrincipalProfiles(ctx, lp, notify.ListenMatch{Parked: "pk1"}, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("PrincipalProfiles(parked) = %v, %v", got, err)
	}
	sess := got[0]
	sess.Listen = notify.ListenState{Process: "process-b", Request: "s:L2"}
	if err := st.UpdateSession(ctx, sess); err != nil {
		t.Fatalf("UpdateSession(adopt): %v", err)
	}
	it := rawItem("listen-parked")
	if _, ok := it["ci"]; ok {
		t.Errorf("after UpdateSession the item still has its client info %v", it["ci"])
	}
	if _, ok := it["lis"].(*types.AttributeValueMemberM); !ok {
		t.Errorf("after UpdateSession the item's listen attribute is %#v, want a map", it["lis"])
	}
	if again, err := st.GetSession(ctx, "listen-parked"); err != nil || again.Listen != sess.Listen {
		t.Errorf("GetSession after the adoption: %+v, %v; want %+v", again.Listen, err, sess.Listen)
	}
}

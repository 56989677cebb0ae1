package notify

import (
	"encoding/json"
	"testing"
)

// TestUpgradeListen: the listen state a backing session's ClientInfo held
// before Session.Listen moves to Listen (ClientInfo cleared); anything
// else is left as it is.
func TestUpgradeListen(t *testing.T) {
	const lp = "mcpush-listen:abc"
	tests := []struct {
		name      string
		principal string
		info      string
		listen    ListenState
		want      ListenState // zero: not upgraded
	}{
		{"parked", lp, `{"mcpush/parked":"k","mcpush/after":9}`, ListenState{}, ListenState{Parked: "k", After: 9}},
		{"served", lp, `{"mcpush/process":"process-1","mcpush/request":"s:L1"}`, ListenState{}, ListenState{Process: "process-1", Request: "s:L1"}},
		{"events stream", lp, `{"mcpush/process":"p","mcpush/request":"n:1","mcpush/session":"s1"}`, ListenState{}, ListenState{Process: "p", Request: "n:1", Session: "s1"}},
		{"another principal", "alice", `{"mcpush/parked":"k"}`, ListenState{}, ListenState{}},
		{"a client's info", lp, `{"name":"c","version":"1"}`, ListenState{}, ListenState{}},
		{"an unknown key", lp, `{"mcpush/parked":"k","name":"c"}`, ListenState{}, ListenState{}},
		{"trailing data", lp, `{"mcpush/parked":"k"} {}`, ListenState{}, ListenState{}},
		{"records nothing", lp, `{"mcpush/parked":""}`, ListenState{}, ListenState{}},
		{"not JSON", lp, `{"mcpush/parked":`, ListenState{}, ListenState{}},
		{"no client info", lp, ``, ListenState{}, ListenState{}},
		{"already typed", lp, `{"mcpush/parked":"k"}`, ListenState{Parked: "typed"}, ListenState{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var info json.RawMessage
			if tt.info != "" {
				info = json.RawMessage(tt.info)
			}
			sess := &Session{ID: "s", Principal: tt.principal, ClientInfo: info, Listen: tt.listen}
			upgraded := UpgradeListen(sess)
			if want := tt.want != (ListenState{}); upgraded != want {
				t.Fatalf("UpgradeListen = %t, want %t", upgraded, want)
			}
			if !upgraded {
				if string(sess.ClientInfo) != tt.info || sess.Listen != tt.listen {
					t.Errorf("not upgraded, but changed: ClientInfo %s, Listen %+v", sess.ClientInfo, sess.Listen)
				}
				return
			}
			if sess.Listen != tt.want || sess.ClientInfo != nil {
				t.Errorf("Listen %+v, ClientInfo %s; want %+v and none", sess.Listen, sess.ClientInfo, tt.want)
			}
		})
	}
}

// TestListenMatch: each non-empty field of a match must equal its own
// field of the state; the zero match matches everything.
func TestListenMatch(t *testing.T) {
	l := ListenState{Process: "p", Request: "r", Parked: "k", Session: "s"}
	for _, tt := range []struct {
		m    ListenMatch
		want bool
	}{
		{ListenMatch{}, true},
		{ListenMatch{Request: "r"}, true},
		{ListenMatch{Parked: "k", Session: "s"}, true},
		{ListenMatch{Request: "p"}, false},
		{ListenMatch{Request: "r", Parked: "x"}, false},
		{ListenMatch{Session: "k"}, false},
	} {
		if got := tt.m.Matches(l); got != tt.want {
			t.Errorf("%+v.Matches(%+v) = %t, want %t", tt.m, l, got, tt.want)
		}
	}
}

package notify

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestStoreOptionsWithDefaults(t *testing.T) {
	var nilOpts *StoreOptions
	d := nilOpts.WithDefaults()
	if d.Now == nil || d.EventTTL != DefaultEventTTL || d.TopicEventTTL != DefaultTopicEventTTL {
		t.Errorf("nil options: %+v", d)
	}
	now := func() time.Time { return time.Unix(7, 0) }
	o := (&StoreOptions{Now: now, EventTTL: time.Minute, TopicEventTTL: -1}).WithDefaults()
	if !o.Now().Equal(time.Unix(7, 0)) || o.EventTTL != time.Minute || o.TopicEventTTL != DefaultTopicEventTTL {
		t.Errorf("set options: %+v", o)
	}
}

func TestCheckSession(t *testing.T) {
	exp := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name string
		sess *Session
		want error
	}{
		{"ok", &Session{ID: "s", ExpiresAt: exp}, nil},
		{"nil", nil, ErrInvalid},
		{"no id", &Session{ExpiresAt: exp}, ErrInvalid},
		{"no expiry", &Session{ID: "s"}, ErrInvalid},
		{"too large", &Session{ID: "s", ExpiresAt: exp, ClientInfo: []byte(strings.Repeat("x", MaxItemBytes)), ClientCapabilities: []byte("{}")}, ErrTooLarge},
		{"at the limit", &Session{ID: "s", ExpiresAt: exp, ClientInfo: []byte(strings.Repeat("x", MaxItemBytes-2)), ClientCapabilities: []byte("{}")}, nil},
	} {
		if err := CheckSession(tc.sess); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: CheckSession = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestCheckTopicEventAndMessage(t *testing.T) {
	big := make([]byte, MaxItemBytes+1)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"event ok", CheckTopicEvent("t", "m", []byte("1")), nil},
		{"event no topic", CheckTopicEvent("", "m", nil), ErrInvalid},
		{"event no id", CheckTopicEvent("t", "", nil), ErrInvalid},
		{"event too large", CheckTopicEvent("t", "m", big), ErrTooLarge},
		{"message ok", CheckMessage("s", "k", []byte("x")), nil},
		{"message no session", CheckMessage("", "k", nil), ErrInvalid},
		{"message no key", CheckMessage("s", "", nil), ErrInvalid},
		{"message too large", CheckMessage("s", "k", big), ErrTooLarge},
	} {
		if !errors.Is(tc.err, tc.want) || (tc.want == nil) != (tc.err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
}

func TestCheckReadsAndRegistryChange(t *testing.T) {
	item := map[string]json.RawMessage{"a": json.RawMessage(`{"name":"a"}`)}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"read ok", CheckRead("s", "x", 1), nil},
		{"read no session", CheckRead("", "x", 1), ErrInvalid},
		{"read no stream", CheckRead("s", "", 1), ErrInvalid},
		{"read limit 0", CheckRead("s", "x", 0), ErrInvalid},
		{"topic read ok", CheckTopicRead("t", 5), nil},
		{"topic read no topic", CheckTopicRead("", 5), ErrInvalid},
		{"topic read limit -1", CheckTopicRead("t", -1), ErrInvalid},
		{"registry ok", CheckRegistryChange(RegistryTools, OpPut, item, "m"), nil},
		{"registry empty replace", CheckRegistryChange(RegistryPrompts, OpReplace, nil, "m"), nil},
		{"registry kind", CheckRegistryChange("widgets", OpPut, item, "m"), ErrInvalid},
		{"registry op", CheckRegistryChange(RegistryTools, "upsert", item, "m"), ErrInvalid},
		{"registry message id", CheckRegistryChange(RegistryTools, OpPut, item, ""), ErrInvalid},
		{"registry empty key", CheckRegistryChange(RegistryTools, OpPut, map[string]json.RawMessage{"": json.RawMessage(`{}`)}, "m"), ErrInvalid},
		{"registry bad JSON", CheckRegistryChange(RegistryTools, OpPut, map[string]json.RawMessage{"a": json.RawMessage(`{`)}, "m"), ErrInvalid},
		{"registry delete ignores values", CheckRegistryChange(RegistryTools, OpDelete, map[string]json.RawMessage{"a": nil}, "m"), nil},
	} {
		if !errors.Is(tc.err, tc.want) || (tc.want == nil) != (tc.err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
}

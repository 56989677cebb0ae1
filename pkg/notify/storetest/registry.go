package storetest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
)

type items = map[string]json.RawMessage

func compactJSON(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkRegistry checks that reg holds want, with hash HashItems(want).
func checkRegistry(t *testing.T, what string, reg *notify.Registry, kind string, want items) {
	t.Helper()
	if reg == nil {
		t.Errorf("%s: nil registry", what)
		return
	}
	if reg.Kind != kind {
		t.Errorf("%s: Kind = %q, want %q", what, reg.Kind, kind)
	}
	if h := notify.HashItems(want); reg.Hash != h {
		t.Errorf("%s: Hash = %q, want HashItems(items) = %q", what, reg.Hash, h)
	}
	if h := notify.HashItems(reg.Items); reg.Hash != h {
		t.Errorf("%s: Hash = %q, but HashItems of its own Items = %q", what, reg.Hash, h)
	}
	if diff := cmp.Diff(compactItems(want), compactItems(reg.Items), cmpOpts); diff != "" {
		t.Errorf("%s: Items mismatch (-want +got):\n%s", what, diff)
	}
}

func checkHashes(t *testing.T, st notify.Store, what string, want map[string]string) {
	t.Helper()
	got, err := st.RegistryHashes(t.Context())
	if err != nil {
		t.Fatalf("%s: RegistryHashes: %v", what, err)
	}
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("%s: RegistryHashes mismatch (-want +got):\n%s", what, diff)
	}
}

func testRegistry(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	const kind = notify.RegistryTools

	reg, err := st.GetRegistry(ctx, kind)
	if err != nil {
		t.Fatalf("GetRegistry(never written): %v", err)
	}
	checkRegistry(t, "GetRegistry(never written)", reg, kind, nil)
	checkHashes(t, st, "never written", map[string]string{})

	var (
		a  = json.RawMessage(`{"name":"a","inputSchema":{"type":"object"}}`)
		b  = json.RawMessage(`{"name":"b"}`)
		b2 = json.RawMessage(`{"name":"b","description":"<b> & </b>"}`) // not HTML-escaped
		c  = json.RawMessage("{ \"name\" : \"c\",\n \"n\": [1, 2] }")   // stored compacted
		d  = json.RawMessage(`{"name":"d"}`)
		e  = json.RawMessage(`"e"`)
		f  = json.RawMessage(`{"name":"f"}`)
	)
	steps := []struct {
		name        string
		op          string
		items       items
		messageID   string
		want        items
		wantApplied bool
	}{
		{"put two", notify.OpPut, items{"a": a, "b": b}, "m1", items{"a": a, "b": b}, true},
		{"put overwrites", notify.OpPut, items{"b": b2}, "m2", items{"a": a, "b": b2}, true},
		{"repeated message id", notify.OpReplace, items{"z": d}, "m2", items{"a": a, "b": b2}, false},
		{"delete", notify.OpDelete, items{"a": nil}, "m3", items{"b": b2}, true},
		{"delete missing", notify.OpDelete, items{"zz": nil}, "m4", items{"b": b2}, true},
		{"put with whitespace", notify.OpPut, items{"c": c}, "m5", items{"b": b2, "c": c}, true},
		{"replace", notify.OpReplace, items{"d": d, "e": e}, "m6", items{"d": d, "e": e}, true},
		{"replace with nothing", notify.OpReplace, items{}, "m7", items{}, true},
		{"put after empty", notify.OpPut, items{"f": f}, "m8", items{"f": f}, true},
		{"old message id", notify.OpPut, items{"g": f}, "m1", items{"f": f}, false},
	}
	for _, step := range steps {
		reg, applied, err := st.ApplyRegistry(ctx, kind, step.op, step.items, step.messageID)
		if err != nil || applied != step.wantApplied {
			t.Errorf("%s: ApplyRegistry = applied %t, %v; want %t, nil", step.name, applied, err, step.wantApplied)
			continue
		}
		checkRegistry(t, step.name+": ApplyRegistry", reg, kind, step.want)
		got, err := st.GetRegistry(ctx, kind)
		if err != nil {
			t.Fatalf("%s: GetRegistry: %v", step.name, err)
		}
		checkRegistry(t, step.name+": GetRegistry", got, kind, step.want)
		// A kind once written is listed, even when now empty (hash "").
		checkHashes(t, st, step.name, map[string]string{kind: notify.HashItems(step.want)})
	}
}

// testRegistryKinds checks that registries of different kinds are
// independent, and that RegistryHashes lists exactly the kinds written.
func testRegistryKinds(t *testing.T, s *suite) {
	st := s.store(t)
	ctx := t.Context()
	tools := items{"echo": json.RawMessage(`{"name":"echo"}`)}
	prompts := items{"greet": json.RawMessage(`{"name":"greet","arguments":[]}`)}
	if _, ok, err := st.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, tools, "t1"); err != nil || !ok {
		t.Fatalf("ApplyRegistry(tools): %t, %v", ok, err)
	}
	checkHashes(t, st, "after tools", map[string]string{notify.RegistryTools: notify.HashItems(tools)})
	if _, ok, err := st.ApplyRegistry(ctx, notify.RegistryPrompts, notify.OpReplace, prompts, "p1"); err != nil || !ok {
		t.Fatalf("ApplyRegistry(prompts): %t, %v", ok, err)
	}
	checkHashes(t, st, "after prompts", map[string]string{
		notify.RegistryTools:   notify.HashItems(tools),
		notify.RegistryPrompts: notify.HashItems(prompts),
	})
	// The events registry (the Events extension's event types) is a
	// fourth kind like the others.
	events := items{"order.created": json.RawMessage(`{"name":"order.created","topic":"orders","delivery":["poll"],"inputSchema":{"type":"object"},"payloadSchema":{"type":"object"}}`)}
	if _, ok, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, events, "t1"); err != nil || !ok {
		t.Fatalf("ApplyRegistry(events) with the message id of a tools change: %t, %v (message ids count per kind)", ok, err)
	}
	if _, ok, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, events, "t1"); err != nil || ok {
		t.Fatalf("ApplyRegistry(events) again: %t, %v; want a duplicate", ok, err)
	}
	checkHashes(t, st, "after events", map[string]string{
		notify.RegistryTools:   notify.HashItems(tools),
		notify.RegistryPrompts: notify.HashItems(prompts),
		notify.RegistryEvents:  notify.HashItems(events),
	})
	for kind, want := range map[string]items{
		notify.RegistryTools:     tools,
		notify.RegistryPrompts:   prompts,
		notify.RegistryResources: nil,
		notify.RegistryEvents:    events,
	} {
		reg, err := st.GetRegistry(ctx, kind)
		if err != nil {
			t.Fatalf("GetRegistry(%q): %v", kind, err)
		}
		checkRegistry(t, "GetRegistry("+kind+")", reg, kind, want)
	}
}

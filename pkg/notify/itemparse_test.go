package notify

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestDecodeItems(t *testing.T) {
	tests := []struct {
		name string
		kind string
		raw  string
		ok   bool
	}{
		{"prompt", RegistryPrompts, `{"name":"p","arguments":[{"name":"a"}],"messages":[{"role":"assistant","text":"{{a}}"}]}`, true},
		{"prompt without name", RegistryPrompts, `{"title":"t"}`, false},
		{"duplicate argument", RegistryPrompts, `{"name":"p","arguments":[{"name":"a"},{"name":"a"}]}`, false},
		{"bad role", RegistryPrompts, `{"name":"p","messages":[{"role":"system"}]}`, false},
		{"resource", RegistryResources, `{"uri":"file:///a","name":"a","text":"x"}`, true},
		{"resource text and blob", RegistryResources, `{"uri":"file:///a","text":"x","blob":"eA=="}`, false},
		{"resource without uri", RegistryResources, `{"name":"a"}`, false},
		{"tool", RegistryTools, `{"name":"events_wait","enabled":false}`, true},
		{"tool without name", RegistryTools, `{"enabled":true}`, false},
		{"array", RegistryTools, `[{"name":"x"}]`, false},
		{"null", RegistryPrompts, `null`, false},
		{"trailing data", RegistryTools, `{"name":"x"}{}`, false},
		{"invalid UTF-8", RegistryTools, "{\"name\":\"\xff\"}", false},
		{"wrong type", RegistryPrompts, `{"name":3}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeKind(tt.kind, json.RawMessage(tt.raw))
			if (err == nil) != tt.ok {
				t.Fatalf("decode %s = %v, want ok %v", tt.raw, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadItem) {
				t.Errorf("error %v is not ErrBadItem", err)
			}
		})
	}
}

func decodeKind(kind string, raw json.RawMessage) (any, error) {
	switch kind {
	case RegistryPrompts:
		return DecodePromptItem(raw)
	case RegistryResources:
		return DecodeResourceItem(raw)
	default:
		return DecodeToolItem(raw)
	}
}

// FuzzDecodeItem: the registry item decoders never panic, fail only with
// ErrBadItem, and what they accept is a fixed point: encoded and decoded
// again it is the same item. The seed corpus is in
// testdata/fuzz/FuzzDecodeItem.
func FuzzDecodeItem(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind uint8, raw []byte) {
		k := []string{RegistryPrompts, RegistryResources, RegistryTools}[int(kind)%3]
		item, err := decodeKind(k, raw)
		if err != nil {
			if !errors.Is(err, ErrBadItem) {
				t.Fatalf("error %v is not ErrBadItem", err)
			}
			return
		}
		again, err := json.Marshal(item)
		if err != nil {
			t.Fatalf("an accepted item does not encode: %v", err)
		}
		item2, err := decodeKind(k, again)
		if err != nil {
			t.Fatalf("an accepted item, re-encoded as %s, is refused: %v", again, err)
		}
		if diff := cmp.Diff(item, item2, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("not a fixed point (-first +again):\n%s", diff)
		}
	})
}

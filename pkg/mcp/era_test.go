package mcp

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEraOf(t *testing.T) {
	tests := []struct {
		version string
		want    Era
	}{
		{"2026-07-28", Era2026},
		{"2025-11-25", Era2025},
		{"2025-06-18", Era2025},
		{"2025-03-26", Era2025},
		{"2024-11-05", Era2025},
		{"2099-01-01", 0},
		{"", 0},
	}
	for _, tt := range tests {
		if got := eraOf(tt.version); got != tt.want {
			t.Errorf("eraOf(%q) = %v, want %v", tt.version, got, tt.want)
		}
	}
	if diff := cmp.Diff([]string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}, AllProtocolVersions()); diff != "" {
		t.Errorf("AllProtocolVersions (-want +got):\n%s", diff)
	}
}

func TestVersionFeatures(t *testing.T) {
	tests := []struct {
		v                            version
		primes, batch, logsByDefault bool
	}{
		{"2026-07-28", false, false, false},
		{"2025-11-25", true, false, true},
		{"2025-06-18", false, false, true},
		{"2025-03-26", false, true, true},
		{"2024-11-05", false, false, true},
	}
	for _, tt := range tests {
		got := []bool{tt.v.primesStreams(), tt.v.allowsBatch(), tt.v.logsByDefault()}
		if diff := cmp.Diff([]bool{tt.primes, tt.batch, tt.logsByDefault}, got); diff != "" {
			t.Errorf("%s: primesStreams, allowsBatch, logsByDefault (-want +got):\n%s", tt.v, diff)
		}
	}
}

func TestDecorate(t *testing.T) {
	tests := []struct {
		v      version
		method string
		in     string
		want   string
	}{
		{"2026-07-28", "tools/list", `{"tools":[]}`, `{"cacheScope":"private","resultType":"complete","tools":[],"ttlMs":0}`},
		{"2026-07-28", "tools/call", `{"content":[]}`, `{"content":[],"resultType":"complete"}`},
		{"2026-07-28", "resources/read", `{"contents":[],"ttlMs":5}`, `{"cacheScope":"private","contents":[],"resultType":"complete","ttlMs":5}`},
		// input_required is not cacheable.
		{"2026-07-28", "tools/call", `{"resultType":"input_required","requestState":"s"}`, `{"requestState":"s","resultType":"input_required"}`},
		{"2025-11-25", "tools/list", `{"tools":[]}`, `{"tools":[]}`},
	}
	for _, tt := range tests {
		got := tt.v.decorate(tt.method, json.RawMessage(tt.in))
		if string(got) != tt.want {
			t.Errorf("%s %s: decorate(%s) = %s, want %s", tt.v, tt.method, tt.in, got, tt.want)
		}
	}
}

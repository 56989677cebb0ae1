package mcp

import (
	"encoding/json"
	"slices"
)

// Era is a family of protocol versions that share a wire model. Every
// decision that depends on the protocol version is made here, from the
// Era or the version, never by comparing version strings elsewhere.
type Era int

const (
	// Era2025 is the session era (2024-11-05 through 2025-11-25): an
	// initialize handshake, an Mcp-Session-Id, a GET stream, resumption
	// with Last-Event-ID, server-to-client requests on the streams.
	Era2025 Era = iota + 1
	// Era2026 is the era of 2026-07-28: no session; every request carries its
	// protocol version, client capabilities and log level in _meta; push
	// happens only on subscriptions/listen streams; the server asks the
	// client for input with input_required results (multi round-trip
	// requests) instead of requests of its own.
	Era2026
)

// ProtocolVersion2026 is the protocol version of the 2026 era.
const ProtocolVersion2026 = "2026-07-28"

// The _meta keys of the 2026 era, for the client and the server: what a
// request carries (protocol version, client capabilities and identity,
// log level) and what the server sends (its identity, the listen stream
// a message belongs to).
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaLogLevel           = "io.modelcontextprotocol/logLevel"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
	metaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// ProtocolVersions2026 are the versions of the 2026 era, newest first.
var ProtocolVersions2026 = []string{ProtocolVersion2026}

// StatelessProtocolVersions is ProtocolVersions2026's former name.
//
// Deprecated: use [ProtocolVersions2026].
var StatelessProtocolVersions = ProtocolVersions2026

// AllProtocolVersions are every version the server speaks, newest first:
// what server/discover and UnsupportedProtocolVersion errors list.
func AllProtocolVersions() []string {
	return append(slices.Clone(ProtocolVersions2026), SupportedProtocolVersions...)
}

// eraOf returns the era of a supported version, and 0 for any other.
func eraOf(version string) Era {
	switch {
	case slices.Contains(ProtocolVersions2026, version):
		return Era2026
	case slices.Contains(SupportedProtocolVersions, version):
		return Era2025
	}
	return 0
}

// String names the era.
func (e Era) String() string {
	switch e {
	case Era2025:
		return "2025"
	case Era2026:
		return "2026"
	}
	return "unknown"
}

// version is one negotiated protocol version: its era plus the features
// that differ inside the 2025 era.
type version string

func (v version) era() Era { return eraOf(string(v)) }

// primesStreams reports whether SSE streams start with a priming event
// (SEP-1699, 2025-11-25): only then can a client resume a stream that the
// server closes early.
func (v version) primesStreams() bool { return v == "2025-11-25" }

// allowsBatch reports whether a POST may carry a JSON-RPC batch.
func (v version) allowsBatch() bool { return v == "2025-03-26" }

// logsByDefault reports whether notifications/message is sent when the
// client set no level: in the 2025 era every level is sent until
// logging/setLevel; in the 2026 era nothing is sent without a per-request
// logLevel.
func (v version) logsByDefault() bool { return v.era() != Era2026 }

// cacheableMethods are the methods whose 2026 results carry ttlMs and
// cacheScope.
var cacheableMethods = map[string]bool{
	"server/discover":          true,
	"tools/list":               true,
	"prompts/list":             true,
	"resources/list":           true,
	"resources/templates/list": true,
	"resources/read":           true,
}

// Result types of the 2026 era.
const (
	resultComplete      = "complete"
	resultInputRequired = "input_required"
)

// decorate adds the members the 2026 era requires on a result: resultType
// on every result, and ttlMs and cacheScope on cacheable ones (0 ms and
// private: lists can change at any moment through the dynamic
// registries, and a deployment may serve principals differently). Members
// the result already has are kept. A 2025-era result is returned as is.
func (v version) decorate(method string, result json.RawMessage) json.RawMessage {
	if v.era() != Era2026 || len(result) == 0 || result[0] != '{' {
		return result
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(result, &m) != nil {
		return result
	}
	if _, ok := m["resultType"]; !ok {
		m["resultType"] = json.RawMessage(`"` + resultComplete + `"`)
	}
	if cacheableMethods[method] && string(m["resultType"]) == `"`+resultComplete+`"` {
		if _, ok := m["ttlMs"]; !ok {
			m["ttlMs"] = json.RawMessage("0")
		}
		if _, ok := m["cacheScope"]; !ok {
			m["cacheScope"] = json.RawMessage(`"private"`)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return result
	}
	return b
}

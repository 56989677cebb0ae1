package notify

// MaxJSONDepth is the deepest nesting of arrays and objects a JSON-RPC
// message may have: the server refuses a deeper request and the client a
// deeper message (pkg/mcp.MaxJSONDepth is this bound).
const MaxJSONDepth = 1000

// MaxStoredJSONDepth is the deepest nesting ingest accepts in a published
// message: MaxJSONDepth less the levels of the deepest message that
// carries stored data to a client (a tool result's structuredContent
// with a list of events, inside a task result), so that nothing a reader
// would refuse is ever stored.
const MaxStoredJSONDepth = MaxJSONDepth - 32

// JSONDepth returns the deepest nesting of arrays and objects in b (0
// for a scalar), ignoring brackets inside strings. It does not validate
// b, and runs in one pass over it.
func JSONDepth(b []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// MaxNameBytes bounds the tool name of tools/call and the prompt name of
// prompts/get (pkg/mcp.MaxNameBytes is this bound); ingest refuses a
// registry prompt with a longer name, which nobody could get.
const MaxNameBytes = 256

// ReservedSchemePrefix begins the URI schemes of the server's own
// subscriptions in the store (pkg/mcp's mcpush-listen: URIs): no client
// subscribes to one and no registry resource has one.
const ReservedSchemePrefix = "mcpush-"

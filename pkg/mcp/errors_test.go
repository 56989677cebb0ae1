package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpush/mcpush/pkg/notify"
)

// TestErrorStatus pins the one map from a failed request to its HTTP
// status and JSON-RPC code: every kind of refusal, the store's and the
// Authenticator's errors, and the JSON-RPC errors dispatch answers, in
// both eras. A changed row fails here before it changes what clients get.
func TestErrorStatus(t *testing.T) {
	type want struct{ status, code int }
	both := func(status, code int) [2]want { return [2]want{{status, code}, {status, code}} }
	rpc := func(code int) error { return &Error{Code: code, Message: "m"} }
	tests := []struct {
		name string
		err  error
		want [2]want // Era2025, Era2026
	}{
		// Refusals: the same in both eras.
		{"shutdown", refuse(errServerShutdown, "m"), both(503, CodeInternalError)},
		{"auth unavailable", &refusal{kind: ErrUnauthorized, cause: fmt.Errorf("keys: %w", ErrAuthUnavailable)}, both(503, CodeInternalError)},
		{"store unavailable", fmt.Errorf("get: %w", notify.ErrUnavailable), both(503, CodeInternalError)},
		{"store unavailable, refused", &refusal{kind: fmt.Errorf("get: %w", notify.ErrUnavailable)}, both(503, CodeInternalError)},
		{"insufficient scope", &refusal{kind: ErrUnauthorized, cause: fmt.Errorf("token: %w", ErrInsufficientScope)}, both(403, CodeInvalidRequest)},
		{"unauthorized", &refusal{kind: ErrUnauthorized, cause: errors.New("no token")}, both(401, CodeInvalidRequest)},
		{"unauthorized, whatever else it wraps", &refusal{kind: ErrUnauthorized, cause: fmt.Errorf("%w, %w", notify.ErrUnavailable, notify.ErrNotFound)}, both(401, CodeInvalidRequest)},
		{"ErrUnauthorized", ErrUnauthorized, both(401, CodeInvalidRequest)},
		{"server fault (a panic)", refuse(errServerFault, "m"), both(500, CodeInternalError)},
		{"forbidden host or origin", refuse(errForbidden, "m"), both(403, CodeInvalidRequest)},
		{"rejected parse error", reject(rpc(CodeParseError).(*Error)), both(400, CodeParseError)},
		{"rejected invalid request", reject(rpc(CodeInvalidRequest).(*Error)), both(400, CodeInvalidRequest)},
		{"rejected invalid params", reject(rpc(CodeInvalidParams).(*Error)), both(400, CodeInvalidParams)},
		{"rejected without an error", refuse(errRejected, "m"), both(400, CodeInvalidRequest)},
		{"bad request", refuse(errBadRequest, "m"), both(400, CodeInvalidRequest)},
		{"unreadable body", refuse(errUnreadableBody, "m"), both(400, CodeParseError)},
		{"header mismatch", refuse(errHeaderMismatch, "m"), both(400, CodeHeaderMismatch)},
		{"invalid _meta", refuse(errInvalidMeta, "m"), both(400, CodeInvalidParams)},
		{"unsupported version", refuse(errUnsupportedVersion, "m"), both(400, CodeUnsupportedProtocolVersion)},
		{"session not found", refuse(ErrSessionNotFound, "m"), both(404, CodeInvalidRequest)},
		{"store not found", fmt.Errorf("get: %w", notify.ErrNotFound), both(404, CodeInvalidRequest)},
		{"store session gone", &refusal{kind: notify.ErrSessionGone}, both(404, CodeInvalidRequest)},
		{"no stream to resume", refuse(errNoStream, "m"), both(404, CodeInvalidRequest)},
		{"method not allowed", refuse(errMethodNotAllowed, "m"), both(405, CodeInvalidRequest)},
		{"not acceptable", refuse(errNotAcceptable, "m"), both(406, CodeInvalidRequest)},
		{"body timeout", refuse(errBodyTimeout, "m"), both(408, CodeInvalidRequest)},
		{"body too large", refuse(errBodyTooLarge, "m"), both(413, CodeInvalidRequest)},
		{"profile too large", refuse(errProfileTooLarge, "m"), both(413, CodeInvalidParams)},
		{"store item too large", fmt.Errorf("put: %w", notify.ErrTooLarge), both(413, CodeInvalidRequest)},
		{"unsupported media type", refuse(errUnsupportedMediaType, "m"), both(415, CodeInvalidRequest)},
		{"too many requests", tooMany("m"), both(429, CodeInvalidRequest)},
		{"rate limited", rateLimited(0, "m"), both(429, CodeInvalidRequest)},
		{"events limit", (&errListenQuota{limit: 1}).refusal(EventsErrorsSEP3415), both(429, CodeResourceExhausted)},
		{"events limit, ChatGPT's codes", (&errListenQuota{limit: 1}).refusal(EventsErrorsChatGPT), both(429, CodeChatGPTResourceExhausted)},
		// A failure of the server or its store that wraps none of the
		// above: retry.
		{"store conflict", fmt.Errorf("put: %w", notify.ErrConflict), both(503, CodeInternalError)},
		{"other error", errors.New("boom"), both(503, CodeInternalError)},
		{"refusal of another error", &refusal{kind: errors.New("boom"), cause: rpc(CodeInvalidParams)}, both(503, CodeInternalError)},
		// JSON-RPC errors that dispatch answers: 200 in the 2025 era; in
		// the 2026 era by code.
		{"parse error", rpc(CodeParseError), [2]want{{200, CodeParseError}, {200, CodeParseError}}},
		{"invalid request", rpc(CodeInvalidRequest), [2]want{{200, CodeInvalidRequest}, {200, CodeInvalidRequest}}},
		{"method not found", rpc(CodeMethodNotFound), [2]want{{200, CodeMethodNotFound}, {404, CodeMethodNotFound}}},
		{"invalid params", rpc(CodeInvalidParams), [2]want{{200, CodeInvalidParams}, {200, CodeInvalidParams}}},
		{"internal error", rpc(CodeInternalError), [2]want{{200, CodeInternalError}, {200, CodeInternalError}}},
		{"resource not found", rpc(CodeResourceNotFound), [2]want{{200, CodeResourceNotFound}, {200, CodeInvalidParams}}},
		{"header mismatch answered", rpc(CodeHeaderMismatch), [2]want{{200, CodeHeaderMismatch}, {400, CodeHeaderMismatch}}},
		{"missing capability", rpc(CodeMissingRequiredClientCapability), [2]want{{200, CodeMissingRequiredClientCapability}, {400, CodeMissingRequiredClientCapability}}},
		{"unsupported version answered", rpc(CodeUnsupportedProtocolVersion), [2]want{{200, CodeUnsupportedProtocolVersion}, {400, CodeUnsupportedProtocolVersion}}},
		{"tool's own code", rpc(-31999), [2]want{{200, -31999}, {200, -31999}}},
		{"wrapped answer", fmt.Errorf("tool: %w", rpc(CodeMethodNotFound)), [2]want{{200, CodeMethodNotFound}, {404, CodeMethodNotFound}}},
	}
	for _, tt := range tests {
		for i, era := range []Era{Era2025, Era2026} {
			status, code := errorStatus(era, tt.err)
			if got := (want{status, code}); got != tt.want[i] {
				t.Errorf("%s, era %v: errorStatus = %d, %d; want %d, %d", tt.name, era, status, code, tt.want[i].status, tt.want[i].code)
			}
		}
	}
	// Every kind of refusal is pinned above by a row of its own: one that
	// errorStatus answers by that kind's row, not one that merely wraps
	// the kind behind an earlier row (insufficient scope wraps
	// ErrUnauthorized too).
	errs := make([]error, len(tests))
	for i, tt := range tests {
		errs[i] = tt.err
	}
	pinned := pinnedKinds(errs)
	for _, k := range refusalKinds {
		if !pinned[k.err] {
			t.Errorf("refusal kind %q has no row of its own in this test", k.err)
		}
	}
	scope := &refusal{kind: ErrUnauthorized, cause: ErrInsufficientScope}
	if got := pinnedKinds([]error{scope}); got[ErrUnauthorized] || !got[ErrInsufficientScope] {
		t.Errorf("pinnedKinds(insufficient scope) = %v; want ErrInsufficientScope only", got)
	}
}

// pinnedKinds returns the errors of refusalKinds that errs pin: for each
// error, the first row of refusalKinds it wraps, the one errorStatus
// answers it by.
func pinnedKinds(errs []error) map[error]bool {
	pinned := map[error]bool{}
	for _, err := range errs {
		for _, k := range refusalKinds {
			if errors.Is(err, k.err) {
				pinned[k.err] = true
				break
			}
		}
	}
	return pinned
}

// TestWriteError checks the one writer of error responses: the status
// and code of errorStatus, the message and data of the refusal or
// *Error, a refusal's Retry-After. writeError takes nothing else (a
// failure); a plain error of the store reaches the client through
// storeFailure, which the last rows check: logged under an error id that
// the answer names, with Retry-After, never with the error's text (it
// may name tables or files).
func TestWriteError(t *testing.T) {
	tests := []struct {
		name       string
		era        Era
		id         string
		err        failure
		status     int
		retryAfter string
		body       string
	}{
		{"refusal", Era2025, "", &refusal{kind: errTooManyRequests, msg: "Too Many Requests: x", retryAfter: 7}, 429, "7",
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Too Many Requests: x"}}`},
		{"refusal with data and id", Era2026, "3", &refusal{kind: errUnsupportedVersion, msg: "v", data: []byte(`{"a":1}`)}, 400, "",
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32022,"message":"v","data":{"a":1}}}`},
		{"answer 2026", Era2026, `"a"`, &Error{Code: CodeResourceNotFound, Message: "Resource not found: x", Data: []byte(`{"uri":"x"}`)}, 200, "",
			`{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"Resource not found: x","data":{"uri":"x"}}}`},
		{"answer 2025", Era2025, `"a"`, &Error{Code: CodeResourceNotFound, Message: "Resource not found: x"}, 200, "",
			`{"jsonrpc":"2.0","id":"a","error":{"code":-32002,"message":"Resource not found: x"}}`},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		var id []byte
		if tt.id != "" {
			id = []byte(tt.id)
		}
		writeError(w, tt.era, id, tt.err)
		if w.Code != tt.status || w.Header().Get("Retry-After") != tt.retryAfter || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: status %d, Retry-After %q, Content-Type %q; want %d, %q, application/json", tt.name, w.Code, w.Header().Get("Retry-After"), w.Header().Get("Content-Type"), tt.status, tt.retryAfter)
		}
		if diff := cmp.Diff(tt.body, w.Body.String()); diff != "" {
			t.Errorf("%s: body (-want +got):\n%s", tt.name, diff)
		}
	}
	var logs bytes.Buffer
	h := NewStreamableHandler(NewServer(&Implementation{Name: "e", Version: "1"}, nil, &ServerOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}), nil)
	for _, tt := range []struct {
		name       string
		err        error
		message    string
		retryAfter string
	}{
		{"plain error", errors.New("table t1 is gone"), "internal error (id ", "1"},
		{"store unavailable", fmt.Errorf("table t1: %w", notify.ErrUnavailable), "Service Unavailable: the store is busy or unreachable; retry (id ", "1"},
	} {
		logs.Reset()
		w := httptest.NewRecorder()
		h.storeFailure(t.Context(), w, Era2026, []byte("7"), tt.err, "reading")
		var body struct {
			ID    int `json:"id"`
			Error struct {
				Code    int
				Message string
				Data    struct{ ErrorID string }
			}
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %v: %s", tt.name, err, w.Body)
		}
		id := body.Error.Data.ErrorID
		if w.Code != 503 || w.Header().Get("Retry-After") != tt.retryAfter || body.ID != 7 || body.Error.Code != CodeInternalError ||
			body.Error.Message != tt.message+id+")" || len(id) != 16 || strings.Contains(w.Body.String(), "t1") {
			t.Errorf("%s: %d, Retry-After %q, %s; want 503, Retry-After %s, id 7, -32603 naming an error id, not the error", tt.name, w.Code, w.Header().Get("Retry-After"), w.Body, tt.retryAfter)
		}
		if !strings.Contains(logs.String(), `"errorId":"`+id+`"`) || !strings.Contains(logs.String(), "table t1") {
			t.Errorf("%s: the log record does not carry the error and its id %s:\n%s", tt.name, id, logs.String())
		}
	}
}

// TestWriteInternalError: the answer to a request whose serving panicked
// outside the handlers (pkg/serve's recovery) is 500 without Retry-After
// (a bug, which the same request would hit again: no invitation to
// retry), an internal error naming the request id the failure was logged
// under, in either era.
func TestWriteInternalError(t *testing.T) {
	for _, version := range []string{"", "2026-07-28"} {
		r := httptest.NewRequest("POST", "/mcp", nil)
		if version != "" {
			r.Header.Set("Mcp-Protocol-Version", version)
		}
		w := httptest.NewRecorder()
		WriteInternalError(w, r, "req-1")
		want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error (request id req-1)","data":{"requestId":"req-1"}}}`
		if w.Code != 500 || w.Header().Get("Retry-After") != "" || w.Header().Get("Content-Type") != "application/json" || w.Body.String() != want {
			t.Errorf("version %q: %d, Retry-After %q, Content-Type %q, %s; want 500, none, application/json, %s", version, w.Code, w.Header().Get("Retry-After"), w.Header().Get("Content-Type"), w.Body, want)
		}
	}
}

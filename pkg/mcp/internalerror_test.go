package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// TestInternalErrorHidesText: a handler's internal error reaches the
// client as an error id, never as its text; the log has both.
func TestInternalErrorHidesText(t *testing.T) {
	store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var logs testutil.LockedBuffer
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, store, &mcp.ServerOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	const secret = "table arn:aws:dynamodb:eu-west-1:123456789012:table/secret is throttled"
	srv.AddResource(&mcp.Resource{URI: "test://broken", Name: "broken"}, func(context.Context, *mcp.ServerRequest[*mcp.ReadResourceParams]) (*mcp.ReadResourceResult, error) {
		return nil, errors.New(secret)
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "typed"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, mcp.InternalError(errors.New(secret))
	})
	srv.AddTool(&mcp.Tool{Name: "untyped", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, fmt.Errorf("wrapped: %w", mcp.InternalError(errors.New(secret)))
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "tool_error"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("bad input: try again")
	})
	h := mcp.NewStreamableHandler(srv, nil)
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()
	sid := initialize(t, ts.URL, "2025-11-25")

	for _, req := range []string{
		testutil.RPC(2, "resources/read", map[string]any{"uri": "test://broken"}),
		testutil.RPC(3, "tools/call", map[string]any{"name": "typed", "arguments": map[string]any{}}),
		testutil.RPC(4, "tools/call", map[string]any{"name": "untyped", "arguments": map[string]any{}}),
	} {
		checkInternalError(t, ts.URL, sid, req, secret, &logs)
	}

	// A plain tool error is the tool's result, text and all, for the model.
	_, body := testutil.PostRead(t, nil, ts.URL, sid, testutil.RPC(5, "tools/call", map[string]any{"name": "tool_error", "arguments": map[string]any{}}))
	if !strings.Contains(string(body), `"isError":true`) || !strings.Contains(string(body), "bad input: try again") {
		t.Errorf("tool error: %s", body)
	}
}

// checkInternalError posts req and checks that the answer is an internal
// error with an id and without secret, and that logs has both.
func checkInternalError(t *testing.T, url, sid, req, secret string, logs *testutil.LockedBuffer) {
	t.Helper()
	resp, body := testutil.PostRead(t, nil, url, sid, req)
	msgs := testutil.Messages(t, resp.Header.Get("Content-Type"), body)
	if len(msgs) != 1 || msgs[0].Error == nil {
		t.Fatalf("%s: %s", req, body)
	}
	e := msgs[0].Error
	if e.Code != mcp.CodeInternalError || strings.Contains(string(body), "secret") {
		t.Errorf("client sees %s, want a -32603 error without the internal text", body)
	}
	var data struct {
		ErrorID string `json:"errorId"`
	}
	var raw struct {
		Error struct{ Data json.RawMessage }
	}
	json.Unmarshal(body, &raw)
	if json.Unmarshal(raw.Error.Data, &data); data.ErrorID == "" || !strings.Contains(e.Message, data.ErrorID) {
		t.Fatalf("error %+v data %s: want the error id in both", e, raw.Error.Data)
	}
	var found bool
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"errorId":"`+data.ErrorID+`"`) && strings.Contains(line, secret) {
			found = true
		}
	}
	if !found {
		t.Errorf("no log record with errorId %s and the error text:\n%s", data.ErrorID, logs.String())
	}
}

package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
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
	h := mcp.NewStreamableHandler(srv, nil)
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()
	sid := initialize(t, ts.URL, "2025-11-25")

	resp, body := testutil.PostRead(t, nil, ts.URL, sid, testutil.RPC(2, "resources/read", map[string]any{"uri": "test://broken"}))
	msgs := testutil.Messages(t, resp.Header.Get("Content-Type"), body)
	if len(msgs) != 1 || msgs[0].Error == nil {
		t.Fatalf("resources/read: %s", body)
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

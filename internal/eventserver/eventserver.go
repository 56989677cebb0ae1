// Package eventserver starts, for tests, an mcpush server with the event
// tools on a fresh SQLite store, and publishes SNS events to it through
// the real ingest: the setup the client and CLI tests of event delivery
// share.
package eventserver

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// Server is a running test server.
type Server struct {
	URL   string
	Store notify.Store
	tb    testing.TB
	in    *ingest.Ingester
}

// Start serves MCP (local-only, 20 ms polls) with streamOpts on a fresh
// store; everything is closed when tb ends.
func Start(tb testing.TB, streamOpts *mcp.StreamableOptions) *Server {
	tb.Helper()
	store, err := sqlitestore.New(filepath.Join(tb.TempDir(), "mcpush.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "eventserver", Version: "1"}, store, &mcp.ServerOptions{PollInterval: 20 * time.Millisecond})
	eventtools.Add(srv, store, nil)
	opts := mcp.StreamableOptions{}
	if streamOpts != nil {
		opts = *streamOpts
	}
	opts.LocalhostOnly = true
	h := mcp.NewStreamableHandler(srv, &opts)
	ts := httptest.NewServer(h)
	tb.Cleanup(func() { ts.Close(); h.Close(); store.Close() })
	return &Server{URL: ts.URL, Store: store, tb: tb, in: ingest.New(store, nil)}
}

// Publish ingests event number n of topic, {"n": n}, with message id
// <topic>-<n>, as sns-ingest would.
func (s *Server) Publish(topic string, n int) {
	s.tb.Helper()
	ev := events.SNSEvent{Records: []events.SNSEventRecord{{EventSource: "aws:sns", SNS: events.SNSEntity{
		Type: "Notification", MessageID: fmt.Sprintf("%s-%d", topic, n), TopicArn: "arn:aws:sns:us-east-1:0:" + topic,
		Message: fmt.Sprintf(`{"type":"event","topic":%q,"data":{"n":%d}}`, topic, n), Timestamp: time.Now(),
	}}}}
	if sum, err := s.in.Handle(s.tb.Context(), ev); err != nil || sum.Accepted != 1 {
		s.tb.Fatalf("ingest: %+v %v", sum, err)
	}
}

package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// exampleServer is a server behind httptest on a SQLite file in a
// temporary directory (one process), which each 2026-era example below
// starts from; Close removes it all.
type exampleServer struct {
	dir   string
	store *sqlitestore.Store
	h     *mcp.StreamableHandler
	ts    *httptest.Server
}

func newExampleStore() (string, *sqlitestore.Store) {
	dir, err := os.MkdirTemp("", "mcpush-example")
	if err != nil {
		log.Fatal(err)
	}
	store, err := sqlitestore.New(filepath.Join(dir, "mcpush.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	return dir, store
}

func serveExample(dir string, store *sqlitestore.Store, srv *mcp.Server) *exampleServer {
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
	return &exampleServer{dir: dir, store: store, h: h, ts: httptest.NewServer(h)}
}

func (e *exampleServer) Close() {
	e.ts.Close()
	e.h.Close()
	e.store.Close()
	os.RemoveAll(e.dir)
}

// A tool that runs as a task (tasks extension, 2026 era): tools/call
// answers at once with a working task, and the work goes on outside the
// request. The client starts it with StartTool, as a "no wait" call, and
// follows it to its end with AwaitTask (CallTool does both).
func ExampleServer_AddTaskTool() {
	dir, store := newExampleStore()
	srv := mcp.NewServer(&mcp.Implementation{Name: "reports", Version: "1"}, store, nil)
	srv.AddTaskTool(&mcp.Tool{Name: "report", Description: "Builds a report.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mcp.SetTaskStatus(ctx, "counting") // the task's statusMessage while it works
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "42 orders"}}}, nil
		}, &mcp.TaskToolOptions{Support: mcp.TaskRequired})
	e := serveExample(dir, store, srv)
	defer e.Close()

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "example-client", Version: "1"}, &mcp.ClientOptions{Mode: mcp.ClientMode2026})
	cs, err := client.Connect(ctx, e.ts.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close(ctx)

	res, task, err := cs.StartTool(ctx, "report", nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("result at once:", res != nil)
	fmt.Println("task:", task.Status)

	res, err = cs.AwaitTask(ctx, task.TaskID, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("result:", res.Content[0].(*mcp.TextContent).Text)
	done, err := cs.GetTask(ctx, task.TaskID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("task:", done.Status)
	// Output:
	// result at once: false
	// task: working
	// result: 42 orders
	// task: completed
}

// A multi round-trip request (2026 era): a tool that needs the user's
// confirmation returns an *InputRequired; the client answers its input
// requests with its handlers (here ElicitationHandler) and sends the
// request again with inputResponses and the signed requestState, and the
// handler runs again with ServerRequest.InputResponses and State set.
// CallTool does the rounds; no process keeps anything in between.
func ExampleInputRequired() {
	dir, store := newExampleStore()
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1"}, store, nil)
	srv.AddTool(&mcp.Tool{Name: "buy", Description: "Buys an item.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			raw, ok := req.InputResponses["confirm"]
			if !ok {
				fmt.Println("server: asking")
				return nil, &mcp.InputRequired{
					Requests: map[string]*mcp.InputRequest{"confirm": {
						Method: "elicitation/create",
						Params: &mcp.ElicitParams{Message: "Buy 1 book for 12 EUR?", RequestedSchema: map[string]any{"type": "object"}},
					}},
					State: []byte("cart=7"), // comes back signed, in ServerRequest.State
				}
			}
			var answer mcp.ElicitResult
			if err := json.Unmarshal(raw, &answer); err != nil {
				return nil, err
			}
			fmt.Printf("server: %s, state %s\n", answer.Action, req.State)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "bought"}}}, nil
		})
	e := serveExample(dir, store, srv)
	defer e.Close()

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "example-client", Version: "1"}, &mcp.ClientOptions{
		Mode: mcp.ClientMode2026,
		ElicitationHandler: func(ctx context.Context, cs *mcp.ClientSession, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			fmt.Println("client:", p.Message)
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	cs, err := client.Connect(ctx, e.ts.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close(ctx)
	res, err := cs.CallTool(ctx, "buy", nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("result:", res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// server: asking
	// client: Buy 1 book for 12 EUR?
	// server: accept, state cart=7
	// result: bought
}

// A subscriptions/listen stream (2026 era): Subscribe opens the client's
// listen stream (or a new one with the URI added) and returns once the
// server acknowledged it; an event ingested from SNS on topic orders
// then reaches it as notifications/resources/updated of events://orders,
// through the store's change feed, whichever process ingests it.
func ExampleClientSession_Subscribe() {
	dir, store := newExampleStore()
	srv := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, store, &mcp.ServerOptions{PollInterval: 20 * time.Millisecond})
	// A server with resources offers subscriptions; events://<topic> is
	// where an SNS topic's events are read (docs/events.md).
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "events://{topic}", Name: "events"},
		func(context.Context, *mcp.ServerRequest[*mcp.ReadResourceParams]) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
	e := serveExample(dir, store, srv)
	defer e.Close()

	ctx := context.Background()
	updated := make(chan string, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "example-client", Version: "1"}, &mcp.ClientOptions{Mode: mcp.ClientMode2026})
	client.AddNotificationHandler("notifications/resources/updated", func(ctx context.Context, cs *mcp.ClientSession, method string, params json.RawMessage) {
		var p struct{ URI string }
		json.Unmarshal(params, &p)
		updated <- p.URI
	})
	cs, err := client.Connect(ctx, e.ts.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close(ctx)
	uri := ingest.EventURI("orders")
	if err := cs.Subscribe(ctx, uri); err != nil {
		log.Fatal(err)
	}
	fmt.Println("listening to", uri)

	// The SNS ingest (functions/sns-ingest) appends the event to the
	// topic's log and fans a resources/updated out to the subscribers.
	sum, err := ingest.New(store, nil).Handle(ctx, events.SNSEvent{Records: []events.SNSEventRecord{{
		EventSource: "aws:sns",
		SNS: events.SNSEntity{Type: "Notification", MessageID: "m-1", TopicArn: "arn:aws:sns:us-east-1:123456789012:orders",
			Timestamp: time.Now(), Message: `{"type":"event","topic":"orders","data":{"id":42}}`},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ingested:", sum.Accepted)
	select {
	case u := <-updated:
		fmt.Println("updated:", u)
	case <-time.After(10 * time.Second):
		fmt.Println("no notification")
	}
	// Output:
	// listening to events://orders
	// ingested: 1
	// updated: events://orders
}

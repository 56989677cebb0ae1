package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// GreetInput are the arguments of the greet tool: the input schema is
// inferred from this type.
type GreetInput struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// GreetOutput is the structured result of greet: the output schema is
// inferred from this type.
type GreetOutput struct {
	Greeting string `json:"greeting"`
}

func greet(ctx context.Context, req *mcp.CallToolRequest, in GreetInput) (*mcp.CallToolResult, GreetOutput, error) {
	return nil, GreetOutput{Greeting: "Hello, " + in.Name + "!"}, nil
}

// A server with one typed tool. AddTool infers the tool's schemas from
// the Go types of its arguments and result.
func ExampleAddTool() {
	dir, err := os.MkdirTemp("", "mcp-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.New(filepath.Join(dir, "mcpush.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	srv := mcp.NewServer(&mcp.Implementation{Name: "greeter", Version: "1.0.0"}, store, nil)
	tool := &mcp.Tool{Name: "greet", Description: "Greets someone."}
	mcp.AddTool(srv, tool, greet)

	schema, _ := json.Marshal(tool.InputSchema)
	fmt.Println(strings.Contains(string(schema), `"name"`))
	fmt.Println(tool.OutputSchema != nil)
	// Output:
	// true
	// true
}

// A client-less round trip: the server behind httptest, driven with plain
// JSON-RPC POSTs as any MCP client sends them (initialize, then a tool
// call in the session).
func ExampleNewStreamableHandler() {
	dir, err := os.MkdirTemp("", "mcp-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.New(filepath.Join(dir, "mcpush.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	srv := mcp.NewServer(&mcp.Implementation{Name: "greeter", Version: "1.0.0"}, store, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "greet", Description: "Greets someone."}, greet)
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true})
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer h.Close()

	// post sends one JSON-RPC message as an MCP client does and returns
	// the status, the session id and the JSON-RPC result, from a JSON body
	// or from the SSE stream the server may answer with.
	post := func(session, body string) (int, string, json.RawMessage) {
		req, _ := http.NewRequest("POST", ts.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var m struct{ Result json.RawMessage }
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			for _, line := range strings.Split(string(data), "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"result"`) {
					data = []byte(d)
				}
			}
		}
		json.Unmarshal(data, &m)
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), m.Result
	}

	code, session, result := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"example","version":"1"}}}`)
	var init struct {
		ProtocolVersion string
		ServerInfo      mcp.Implementation
	}
	json.Unmarshal(result, &init)
	fmt.Println(code, init.ProtocolVersion, init.ServerInfo.Name)

	code, _, _ = post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Println(code)

	_, _, result = post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}`)
	var res struct{ StructuredContent GreetOutput }
	json.Unmarshal(result, &res)
	fmt.Println(res.StructuredContent.Greeting)
	// Output:
	// 200 2025-11-25 greeter
	// 202
	// Hello, Ada!
}

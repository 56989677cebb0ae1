// Package mcp is an MCP (Model Context Protocol) server whose sessions live
// in a notify.Store, so that any number of processes (Lambda instances,
// local processes behind a load balancer) serve the same sessions, and a
// client's stream resumes on whichever process its next request reaches.
//
// A Server holds the features registered in code: tools (AddTool infers
// the input and output schemas of a typed tool from its Go types),
// resources, resource templates and prompts. A StreamableHandler serves it
// over Streamable HTTP as an http.Handler:
//
//	srv := mcp.NewServer(&mcp.Implementation{Name: "demo", Version: "1"}, store, nil)
//	mcp.AddTool(srv, &mcp.Tool{Name: "greet"}, greet)
//	http.Handle("/mcp", mcp.NewStreamableHandler(srv, nil))
//
// Handlers get the calling session (CallToolRequest.Session): they report
// progress with NotifyProgress, log to the client, and ask it for sampling
// or elicitation; whatever they send is written to the store first, so it
// survives the process and reaches the client on any of them.
//
// With ServerOptions.DynamicRegistries the server also serves the tools
// overlay, resources and prompts published through SNS (package
// notify/ingest), and tells each session of a change exactly once.
//
// Package serve runs a Server in AWS Lambda or as a local HTTP server;
// package eventtools adds mcpush's event tools. The package also has a
// Streamable HTTP client (NewClient).
package mcp

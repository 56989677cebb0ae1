// Package mcp is an MCP (Model Context Protocol) server whose sessions live
// in a [notify.Store], so that any number of processes (Lambda instances,
// local processes behind a load balancer) serve the same sessions, and a
// client's stream resumes on whichever process its next request reaches.
//
// A [Server] holds the features registered in code: tools ([AddTool]
// infers the input and output schemas of a typed tool from its Go types),
// resources, resource templates and prompts. A [StreamableHandler] serves
// it over Streamable HTTP as an [http.Handler]:
//
//	srv := mcp.NewServer(&mcp.Implementation{Name: "demo", Version: "1"}, store, nil)
//	mcp.AddTool(srv, &mcp.Tool{Name: "greet"}, greet)
//	http.Handle("/mcp", mcp.NewStreamableHandler(srv, nil))
//
// Handlers get the calling session ([CallToolRequest].Session): they
// report progress with [ServerSession.NotifyProgress], log to the client, and ask it for sampling
// or elicitation; whatever they send is written to the store first, so it
// survives the process and reaches the client on any of them.
//
// The handler serves two protocol eras on one endpoint, chosen per request
// (see [Era]). An initialize request starts a 2025-era session (2024-11-05
// to 2025-11-25), kept in the store and named by Mcp-Session-Id. A request
// whose MCP-Protocol-Version header and _meta name 2026-07-28 is served
// statelessly: the handler gets a [ServerSession] built from that request's
// _meta (capabilities, log level), server/discover answers what the server
// supports, push happens only on subscriptions/listen streams, and a
// handler that needs input from the client returns an [*InputRequired]
// (or calls Elicit, CreateMessage or ListRoots, which return one until the
// client has answered); the client retries with the answers
// ([ServerRequest.InputResponses]) and the signed state
// ([ServerRequest.State]), on any process sharing
// [ServerOptions.StateKeys].
// Both eras share one dispatcher, so tools, resources and prompts are
// written once. In the 2026 era a tool registered with
// [Server.AddTaskTool] runs as a task (the io.modelcontextprotocol/tasks
// extension) for clients that declare it: the call returns a task at once, whose record lives in the
// store ([notify.TaskStore]) so that tasks/get, tasks/update and
// tasks/cancel work on any process, and whose work a [TaskRunner] starts
// (a worker pool in the process; on Lambda, an invocation of its own).
// Tool parameters marked x-mcp-header are checked against their
// Mcp-Param-* headers.
//
// With [ServerOptions.DynamicRegistries] the server also serves the tools
// overlay, resources and prompts published through SNS (package
// notify/ingest), and tells each session, and each listen stream, of a
// change exactly once.
//
// Authorization per event type, topic and tool: an [Authenticator] that is
// a [ClaimsAuthenticator] gives each request its caller's claims, and
// [ServerOptions.Authorize] (default [RegistryAccess]: the "access" rules of
// the events and tools registry items) decides each use; what a caller
// may not use is refused as an unknown one is, so a refusal never tells
// whether it exists (access.go,
// docs/auth.md). [Server.GuardTool] adds a guard of its own to one tool.
//
// Everything a client controls is bounded before anything is stored
// ([ServerOptions.Limits], [DefaultLimits]): sizes of ids, names, progress
// tokens, prompt arguments and renderings, subscriptions per session,
// requests and streams in flight, and, counted in the store across
// processes, each principal's request rate, session creations and live
// sessions (429 with Retry-After).
//
// Errors: a handler's [*Error] ([Errorf], [ResourceNotFound]) reaches the
// client as is. A tool handler's other error becomes an isError result;
// any other handler's error, or a tool's marked with [InternalError],
// becomes a
// JSON-RPC internal error that carries only an error id, which the log
// record of the error carries too. The HTTP status and JSON-RPC code of
// every error response, the transport's own refusals (headers, bounds,
// authentication, a store that is busy: 503 with Retry-After, which the
// client retries) included, come from one map in errors.go, where the
// package's codes and sentinel errors are declared; a server that
// recovers a panic outside the handlers answers it with
// [WriteInternalError] (500), from the same map.
//
// Package serve runs a Server in AWS Lambda or as a local HTTP server;
// package eventtools adds mcpush's event tools.
//
// The package also has a Streamable HTTP client, for mcpush and any MCP
// server: [NewClient], then [Client.Connect] gives a [ClientSession] that
// lists, calls tools with a progress callback, reads and subscribes to
// resources, in the 2025 era (initialize, sessions, a GET stream resumed with
// Last-Event-ID), the 2026-07-28 era (server/discover, subscriptions/listen,
// input_required results, tasks followed to their end) or whichever the
// server speaks ([ClientModeAuto]).
// Notification handlers run one at a time in arrival order; a panic is
// recovered and logged; list_changed re-lists with at most one re-list in
// flight. See ExampleClient.
package mcp

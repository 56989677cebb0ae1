// Package rie runs the Lambda functions' bootstrap binaries under AWS's
// own Runtime Interface Emulator (aws-lambda-rie, the emulator inside
// every Lambda base image and behind `sam local invoke`) for tests.
//
// Binary installs the emulator from the Go module proxy at Version into
// the user cache directory, once per test process (a clean machine needs
// only Go and the network, as for staticcheck). Bootstrap builds a
// function as `make build` does (the Makefile's LAMBDA_GO: CGO off,
// lambda.norpc,nosqlite, stripped), but for the host's architecture.
// Start runs one emulator with one bootstrap, both bound to loopback
// ports, and Invoke posts an event to the emulator's invoke API (POST
// /2015-03-31/functions/function/invocations), as `sam local invoke`
// does.
//
// The emulator does not stream responses (the runtime's streaming
// response mode), so a function in MCPUSH_LAMBDA_MODE=stream is tested
// against internal/lambdatest's Runtime API instead.
//
// The package runs on Linux only: the bootstraps are linux binaries.
package rie

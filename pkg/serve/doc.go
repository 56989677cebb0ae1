// Package serve runs an *mcp.Server as a program: in AWS Lambda behind a
// Function URL (or an API Gateway HTTP API), or as a local HTTP server,
// with one call, Run.
//
// In Lambda (Options.RuntimeAPI set from AWS_LAMBDA_RUNTIME_API) a
// LambdaHandler serves invocations in one of two modes:
//
//   - ModeStream: a RESPONSE_STREAM Function URL through lambdaurl. SSE
//     events reach the client as they are written; a GET stream lasts
//     until shortly before the invocation deadline and ends with "retry:".
//   - ModeBuffered: a BUFFERED Function URL or an HTTP API through
//     httpadapter. A response is returned whole, so a GET stream is a
//     long poll that returns as soon as there are messages.
//
// Either way the handler recovers panics into JSON-RPC internal errors,
// gives pkg/mcp's SSE writer the Flush it needs under the Lambda
// adapters, logs one record per request with the Lambda request id
// (RequestIDHandler), and, with AuthIAM, makes the SigV4 signer's IAM ARN
// the session's principal (IAMAuthenticator). An invocation whose payload
// is a TaskEvent runs a task (the 2026-07-28 tasks extension) instead:
// with SelfInvokeRunner as the server's mcp.TaskRunner, every task runs in
// an asynchronous invocation of the function itself.
//
// On Lambda Managed Instances (LambdaOptions.MaxConcurrency, from
// AWS_LAMBDA_MAX_CONCURRENCY, above 1) aws-lambda-go hands one process
// many invocations at once; the handler keeps everything per invocation
// in its request, and idle streams are held to the deadline by default
// (StreamHoldDeadline), since a held stream no longer costs an execution
// environment of its own.
//
// Outside Lambda, ListenAndServe serves /mcp until its context is done
// (SIGTERM), then shuts down gracefully, ending open streams with
// "retry:". Its idle streams are held until the client leaves by default
// (DefaultLocalStreamHold), as on Managed Instances: an idle client makes
// no request after it opens its stream.
//
// With AuthOAuth, in Lambda and locally, the server is an OAuth 2.1
// resource server (package oauth): bearer tokens are validated, their
// issuer#subject is the principal, and the protected resource metadata is
// served at /.well-known/oauth-protected-resource and
// /.well-known/oauth-protected-resource/mcp. See docs/auth.md.
//
// The package never reads the environment itself: a main passes
// os.Getenv to OptionsFromEnv, which reads it with package envconfig
// (where the Mode and Auth types are declared). See docs/lambda.md for the deployment.
package serve

package envconfig

// Mode is how the MCP function answers in Lambda (MCPUSH_LAMBDA_MODE;
// serve.LambdaOptions.Mode): the response mode of its Function URL, or an
// API Gateway HTTP API.
type Mode string

// Modes.
const (
	// ModeStream serves a Function URL in RESPONSE_STREAM mode: SSE
	// events reach the client as they are written.
	ModeStream Mode = "stream"
	// ModeBuffered serves a BUFFERED Function URL or an API Gateway HTTP
	// API: a response is returned whole, so GET streams are short polls
	// that end with "retry:".
	ModeBuffered Mode = "buffered"
)

// ParseMode parses MCPUSH_LAMBDA_MODE: "stream", "buffered", or empty for
// the default, ModeStream. Anything else is an *Error.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return ModeStream, nil
	case ModeStream, ModeBuffered:
		return m, nil
	}
	return "", &Error{Name: "MCPUSH_LAMBDA_MODE", Value: s, Want: quoted(ModeStream, ModeBuffered)}
}

// Auth is who the MCP function takes its callers to be (MCPUSH_AUTH;
// serve.LambdaOptions.Auth, serve.LocalOptions.Auth), matching the
// Function URL's AuthType in Lambda.
type Auth string

// Auth modes.
const (
	// AuthIAM (AWS_IAM): the signer's IAM ARN is the principal. Only a
	// Lambda Function URL checks the signatures.
	AuthIAM Auth = "iam"
	// AuthNone (NONE): callers are anonymous; their quotas count per
	// source IP.
	AuthNone Auth = "none"
	// AuthOAuth: the Function URL's AuthType is NONE and the server is
	// an OAuth 2.1 resource server (package oauth): a bearer token's
	// issuer#subject is the principal.
	AuthOAuth Auth = "oauth"
)

// ParseAuth parses MCPUSH_AUTH for a process in Lambda (lambda true) or a
// local server: "iam", "none" or "oauth" in Lambda, "none" or "oauth"
// locally (a local server cannot check IAM signatures). Empty is empty:
// the default depends on where the process runs (serve.Options.Auth).
// Anything else is an *Error.
func ParseAuth(s string, lambda bool) (Auth, error) {
	a := Auth(s)
	switch a {
	case "", AuthNone, AuthOAuth:
		return a, nil
	case AuthIAM:
		if lambda {
			return a, nil
		}
	}
	if !lambda {
		return "", &Error{Name: "MCPUSH_AUTH", Value: s,
			Want: quoted(AuthNone, AuthOAuth) + ` locally (the local server cannot check IAM signatures: "iam" needs a Lambda Function URL with AuthType AWS_IAM)`}
	}
	return "", &Error{Name: "MCPUSH_AUTH", Value: s, Want: quoted(AuthIAM, AuthNone, AuthOAuth)}
}

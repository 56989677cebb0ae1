package envconfig

import (
	"strconv"
	"strings"
	"time"
)

// StreamHoldDeadline is the Serve.StreamHold of MCPUSH_STREAM_HOLD=deadline
// (serve.StreamHoldDeadline): a stream is held to the invocation deadline,
// or locally until the client leaves.
const StreamHoldDeadline time.Duration = -1

// Serve is the configuration of the MCP function's HTTP and Lambda layer,
// which serve.OptionsFromEnv turns into serve.Options.
type Serve struct {
	// RuntimeAPI is AWS_LAMBDA_RUNTIME_API, set by Lambda: serve
	// invocations.
	RuntimeAPI string
	// Addr is MCPUSH_ADDR, the local server's address; empty for its
	// default.
	Addr string
	// Mode is MCPUSH_LAMBDA_MODE; ModeStream when unset.
	Mode Mode
	// Auth is MCPUSH_AUTH as set, empty when unset: the default depends
	// on where the process runs (serve.Options.Auth).
	Auth Auth
	// OAuth configures the token validator of AuthOAuth.
	OAuth OAuth
	// AllowedHosts is MCPUSH_ALLOWED_HOSTS, comma-separated Host names.
	AllowedHosts []string
	// AllowedOrigins is MCPUSH_ALLOWED_ORIGINS, comma-separated browser
	// origins ("*": any).
	AllowedOrigins []string
	// MaxGETStream is MCPUSH_MAX_GET_STREAM, the bound of a GET stream in
	// Lambda; 0 when unset.
	MaxGETStream time.Duration
	// StreamHold is MCPUSH_STREAM_HOLD, how long an idle GET stream stays
	// open; StreamHoldDeadline for "deadline", 0 when unset.
	StreamHold time.Duration
	// MaxConcurrency is AWS_LAMBDA_MAX_CONCURRENCY, set by Lambda Managed
	// Instances: invocations served at once. Read as aws-lambda-go reads
	// it (lambdacontext.MaxConcurrency): a positive integer, else 1.
	MaxConcurrency int
}

// OAuth is the configuration of an OAuth resource server (oauth.Options;
// package oauth checks it).
type OAuth struct {
	Issuer    string   // MCPUSH_OAUTH_ISSUER
	Resource  string   // MCPUSH_RESOURCE_URL
	Scopes    []string // MCPUSH_OAUTH_SCOPES, separated by blanks or commas
	Audiences []string // MCPUSH_OAUTH_AUDIENCES, comma-separated
	ClientIDs []string // MCPUSH_OAUTH_CLIENT_IDS, comma-separated
}

// ReadServe reads the configuration of the HTTP and Lambda layer. A bad
// mode, an auth mode the runtime cannot enforce (a local "iam"), or a bad
// or negative duration is an *Error: a server is never served open by
// mistake.
func ReadServe(getenv func(string) string) (*Serve, error) {
	s := &Serve{
		RuntimeAPI: RuntimeAPI(getenv),
		Addr:       getenv("MCPUSH_ADDR"),
		OAuth: OAuth{
			Issuer:    getenv("MCPUSH_OAUTH_ISSUER"),
			Resource:  getenv("MCPUSH_RESOURCE_URL"),
			Scopes:    list(strings.ReplaceAll(getenv("MCPUSH_OAUTH_SCOPES"), " ", ",")),
			Audiences: list(getenv("MCPUSH_OAUTH_AUDIENCES")),
			ClientIDs: list(getenv("MCPUSH_OAUTH_CLIENT_IDS")),
		},
		AllowedHosts:   list(getenv("MCPUSH_ALLOWED_HOSTS")),
		AllowedOrigins: list(getenv("MCPUSH_ALLOWED_ORIGINS")),
		MaxConcurrency: maxConcurrency(getenv),
	}
	var err error
	if s.Mode, err = ParseMode(getenv("MCPUSH_LAMBDA_MODE")); err != nil {
		return nil, err
	}
	if s.Auth, err = ParseAuth(getenv("MCPUSH_AUTH"), s.RuntimeAPI != ""); err != nil {
		return nil, err
	}
	if s.MaxGETStream, err = duration(getenv, "MCPUSH_MAX_GET_STREAM"); err != nil {
		return nil, err
	}
	if v := getenv("MCPUSH_STREAM_HOLD"); v == "deadline" {
		s.StreamHold = StreamHoldDeadline
	} else if s.StreamHold, err = duration(getenv, "MCPUSH_STREAM_HOLD"); err != nil {
		err.(*Error).Want = wantDuration + `, or deadline`
		return nil, err
	}
	return s, nil
}

// maxConcurrency reads AWS_LAMBDA_MAX_CONCURRENCY the way aws-lambda-go
// does (lambdacontext.MaxConcurrency): a positive integer, else 1.
// Lambda Managed Instances set it from the function's
// PerExecutionEnvironmentMaxConcurrency; on-demand Lambda does not set it.
func maxConcurrency(getenv func(string) string) int {
	n, err := strconv.Atoi(getenv("AWS_LAMBDA_MAX_CONCURRENCY"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

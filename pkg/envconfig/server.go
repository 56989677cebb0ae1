package envconfig

import "time"

// Server is the configuration of the MCP server of functions/mcp
// (mcp.ServerOptions). A zero duration or limit is unset: the server's
// default.
type Server struct {
	// Fixtures is MCPUSH_FIXTURES, a set of test fixtures to serve
	// ("conformance"), which the main checks: only test builds have any.
	Fixtures string
	// PollInterval is MCPUSH_POLL_INTERVAL, the change feed watcher's
	// interval.
	PollInterval time.Duration
	// RegistryRefresh is MCPUSH_REGISTRY_REFRESH.
	RegistryRefresh time.Duration
	// SessionTTL is MCPUSH_SESSION_TTL, the idle session lifetime.
	SessionTTL time.Duration
	// Limits are the MCPUSH_MAX_* limits, MCPUSH_BODY_READ_TIMEOUT and
	// MCPUSH_TASK_TTL.
	Limits Limits
	// Tasks configure the task workers.
	Tasks Tasks
	// MaxWebhooksPerPrincipal is MCPUSH_MAX_WEBHOOKS_PER_PRINCIPAL.
	MaxWebhooksPerPrincipal int
	// WebhookSweep is MCPUSH_WEBHOOK_SWEEP: how often the local server
	// sweeps the webhook subscriptions.
	WebhookSweep time.Duration
	// EventsErrors is MCPUSH_EVENTS_ERRORS (ReadEventsErrors): the
	// numbering of the Events extension's error codes
	// (mcp.ServerOptions.EventsErrors), empty for the default.
	EventsErrors string
	// FunctionName and FunctionVersion are AWS_LAMBDA_FUNCTION_NAME and
	// AWS_LAMBDA_FUNCTION_VERSION, set by Lambda: the function a task's
	// invocation calls.
	FunctionName, FunctionVersion string
}

// Limits are mcp.Limits read from the environment: the same fields, of
// the same types, in the same order, so that a main converts one into the
// other (mcp.Limits(l)) and a limit added to mcp.Limits does not compile
// until it has its variable here (and a line in docs/limits.md).
type Limits struct {
	MaxClientInfoBytes       int           // MCPUSH_MAX_CLIENT_INFO_BYTES
	MaxPromptArgumentBytes   int           // MCPUSH_MAX_PROMPT_ARGUMENT_BYTES
	MaxPromptBytes           int           // MCPUSH_MAX_PROMPT_BYTES
	MaxSubscriptionURIBytes  int           // MCPUSH_MAX_SUBSCRIPTION_URI_BYTES
	MaxSubscriptions         int           // MCPUSH_MAX_SUBSCRIPTIONS
	MaxInFlightPerSession    int           // MCPUSH_MAX_INFLIGHT_PER_SESSION
	MaxInFlight              int           // MCPUSH_MAX_INFLIGHT
	MaxStreamsPerSession     int           // MCPUSH_MAX_STREAMS_PER_SESSION
	BodyReadTimeout          time.Duration // MCPUSH_BODY_READ_TIMEOUT
	MaxRequestsPerMinute     int           // MCPUSH_MAX_REQUESTS_PER_MINUTE
	MaxSessionsPerHour       int           // MCPUSH_MAX_SESSIONS_PER_HOUR
	MaxSessionsPerPrincipal  int           // MCPUSH_MAX_SESSIONS_PER_PRINCIPAL
	MaxListensPerPrincipal   int           // MCPUSH_MAX_LISTENS_PER_PRINCIPAL
	MaxTasksPerPrincipal     int           // MCPUSH_MAX_TASKS_PER_PRINCIPAL
	MaxTaskResultBytes       int           // MCPUSH_MAX_TASK_RESULT_BYTES
	MaxTaskBytesPerPrincipal int           // MCPUSH_MAX_TASK_BYTES_PER_PRINCIPAL
	MaxTaskInputRounds       int           // MCPUSH_MAX_TASK_INPUT_ROUNDS
	TaskTTL                  time.Duration // MCPUSH_TASK_TTL
}

// Tasks configure the task workers (mcp.TaskOptions).
type Tasks struct {
	Workers             int           // MCPUSH_TASK_WORKERS
	WorkersPerPrincipal int           // MCPUSH_TASK_WORKERS_PER_PRINCIPAL
	Lease               time.Duration // MCPUSH_TASK_LEASE
	Timeout             time.Duration // MCPUSH_TASK_TIMEOUT
}

// ReadServer reads the MCP server's options and limits. A duration is a
// Go duration ("5s"), not negative; a limit a positive integer. Anything
// else is an *Error.
func ReadServer(getenv func(string) string) (*Server, error) {
	s := &Server{
		Fixtures:        getenv("MCPUSH_FIXTURES"),
		FunctionName:    getenv("AWS_LAMBDA_FUNCTION_NAME"),
		FunctionVersion: getenv("AWS_LAMBDA_FUNCTION_VERSION"),
	}
	var err error
	if s.EventsErrors, err = ReadEventsErrors(getenv); err != nil {
		return nil, err
	}
	l := &s.Limits
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{
		{"MCPUSH_POLL_INTERVAL", &s.PollInterval},
		{"MCPUSH_REGISTRY_REFRESH", &s.RegistryRefresh},
		{"MCPUSH_SESSION_TTL", &s.SessionTTL},
		{"MCPUSH_TASK_TTL", &l.TaskTTL},
		{"MCPUSH_TASK_LEASE", &s.Tasks.Lease},
		{"MCPUSH_TASK_TIMEOUT", &s.Tasks.Timeout},
		{"MCPUSH_BODY_READ_TIMEOUT", &l.BodyReadTimeout},
		{"MCPUSH_WEBHOOK_SWEEP", &s.WebhookSweep},
	} {
		var err error
		if *d.dst, err = duration(getenv, d.name); err != nil {
			return nil, err
		}
	}
	for _, n := range []struct {
		name string
		dst  *int
	}{
		{"MCPUSH_MAX_CLIENT_INFO_BYTES", &l.MaxClientInfoBytes},
		{"MCPUSH_MAX_PROMPT_ARGUMENT_BYTES", &l.MaxPromptArgumentBytes},
		{"MCPUSH_MAX_PROMPT_BYTES", &l.MaxPromptBytes},
		{"MCPUSH_MAX_SUBSCRIPTION_URI_BYTES", &l.MaxSubscriptionURIBytes},
		{"MCPUSH_MAX_SUBSCRIPTIONS", &l.MaxSubscriptions},
		{"MCPUSH_MAX_INFLIGHT_PER_SESSION", &l.MaxInFlightPerSession},
		{"MCPUSH_MAX_INFLIGHT", &l.MaxInFlight},
		{"MCPUSH_MAX_STREAMS_PER_SESSION", &l.MaxStreamsPerSession},
		{"MCPUSH_MAX_REQUESTS_PER_MINUTE", &l.MaxRequestsPerMinute},
		{"MCPUSH_MAX_SESSIONS_PER_HOUR", &l.MaxSessionsPerHour},
		{"MCPUSH_MAX_SESSIONS_PER_PRINCIPAL", &l.MaxSessionsPerPrincipal},
		{"MCPUSH_MAX_LISTENS_PER_PRINCIPAL", &l.MaxListensPerPrincipal},
		{"MCPUSH_MAX_TASKS_PER_PRINCIPAL", &l.MaxTasksPerPrincipal},
		{"MCPUSH_MAX_TASK_RESULT_BYTES", &l.MaxTaskResultBytes},
		{"MCPUSH_MAX_TASK_BYTES_PER_PRINCIPAL", &l.MaxTaskBytesPerPrincipal},
		{"MCPUSH_MAX_TASK_INPUT_ROUNDS", &l.MaxTaskInputRounds},
		{"MCPUSH_TASK_WORKERS", &s.Tasks.Workers},
		{"MCPUSH_TASK_WORKERS_PER_PRINCIPAL", &s.Tasks.WorkersPerPrincipal},
		{"MCPUSH_MAX_WEBHOOKS_PER_PRINCIPAL", &s.MaxWebhooksPerPrincipal},
	} {
		var err error
		if *n.dst, err = positive(getenv, n.name); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// The values of MCPUSH_EVENTS_ERRORS (mcp.EventsErrorsSEP3415 and
// mcp.EventsErrorsChatGPT, spelled here so that the ingest reads them
// without linking pkg/mcp).
const (
	EventsErrorsSEP3415 = "sep-3415"
	EventsErrorsChatGPT = "chatgpt"
)

// ReadEventsErrors reads MCPUSH_EVENTS_ERRORS, the numbering of the Events
// extension's error codes: "sep-3415" (-32023 to -32027), "chatgpt"
// (-32011 to -32015), or empty for the default, "sep-3415". Anything
// else is an *Error. Both mains read it: the MCP server answers requests
// in it, and the ingest's terminated webhook envelope is to carry its
// NotFound code.
func ReadEventsErrors(getenv func(string) string) (string, error) {
	switch v := getenv("MCPUSH_EVENTS_ERRORS"); v {
	case "", EventsErrorsSEP3415, EventsErrorsChatGPT:
		return v, nil
	default:
		return "", &Error{Name: "MCPUSH_EVENTS_ERRORS", Value: v, Want: quoted(EventsErrorsSEP3415, EventsErrorsChatGPT)}
	}
}

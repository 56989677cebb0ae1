// Package envconfig reads mcpush's configuration from the environment: the
// one place where the variables of both Lambda mains (functions/mcp and
// functions/sns-ingest) are named, given their defaults and checked, so
// that a variable both mains read means the same in each. The package
// never reads the environment itself: a main passes os.Getenv, a test a
// map's lookup.
//
// The readers follow what a main builds from them:
//
//	ReadStore          the store (MCPUSH_STORE, ...): both mains
//	ReadStateKeys      the requestState and webhook keys: both mains
//	ReadWebhookAllow   MCPUSH_WEBHOOK_ALLOW: both mains
//	ReadServe          the HTTP and Lambda layer (serve.OptionsFromEnv)
//	ReadServer         the MCP server's options and limits: functions/mcp
//	ReadRegistryTools  MCPUSH_REGISTRY_TOOLS: functions/sns-ingest
//	ReadMetrics        the metrics exporter (MCPUSH_METRICS, ...): both mains
//	ReadAdmin          who may use the admin tools: functions/mcp
//
// A bad value is an *Error that names the variable, its value (never the
// value of a secret) and what the variable accepts. docs/configuration.md
// and docs/limits.md list the variables (TestDocumented checks that every
// one read here is in one of them).
//
// The package imports neither pkg/mcp nor pkg/serve nor pkg/oauth, so the
// SNS ingest reads its configuration without linking the MCP server; the
// modes of pkg/serve (Mode, Auth) are declared here for that reason, and
// serve names them with aliases.
package envconfig

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Error is a bad value of an environment variable.
type Error struct {
	Name string // the variable, e.g. MCPUSH_AUTH
	// Value is its value: empty for a required variable that is unset,
	// or for a secret, which is never echoed.
	Value string
	// Want says what the variable accepts, e.g. `"iam", "none" or "oauth"`.
	Want string
	// Secret is set for a variable whose value is a secret: the error
	// omits the value.
	Secret bool
	// Err, if set, is the cause (e.g. the webhook package's error for a
	// bad origin), for errors.Is and errors.As; the message says it in
	// Want, without repeating the name and value.
	Err error
}

// Error returns NAME="VALUE": want WANT; NAME: want WANT for a secret;
// NAME is not set: want WANT for a required variable that is unset.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Secret:
		b.WriteString(e.Name)
	case e.Value == "":
		b.WriteString(e.Name + " is not set")
	default:
		fmt.Fprintf(&b, "%s=%q", e.Name, e.Value)
	}
	if e.Want != "" {
		b.WriteString(": want " + e.Want)
	}
	return b.String()
}

// Unwrap returns the cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// RuntimeAPI is the Lambda Runtime API's address, AWS_LAMBDA_RUNTIME_API:
// set by Lambda, empty outside it. Both mains serve Lambda invocations
// when it is set.
func RuntimeAPI(getenv func(string) string) string {
	return getenv("AWS_LAMBDA_RUNTIME_API")
}

// wantDuration is what a duration variable accepts.
const wantDuration = "a duration such as 5s or 10m"

// duration reads the Go duration ("5s") named name; unset is 0. A bad or
// negative value is an *Error.
func duration(getenv func(string) string, name string) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, &Error{Name: name, Value: v, Want: wantDuration}
	}
	return d, nil
}

// positive reads a positive integer named name; unset is 0 (the default).
func positive(getenv func(string) string, name string) (int, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, &Error{Name: name, Value: v, Want: "a positive integer"}
	}
	return n, nil
}

// list splits a comma-separated list, dropping blanks; nil when empty.
func list(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// quoted is the accepted values as an Error's Want: `"a", "b" or "c"`.
func quoted[T ~string](vals ...T) string {
	var b strings.Builder
	for i, v := range vals {
		switch {
		case i == 0:
		case i == len(vals)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", string(v))
	}
	return b.String()
}

package envconfig_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// env returns a getenv over m.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// readAll reads every group of variables, as the two mains do between
// them, and returns the first error.
func readAll(getenv func(string) string) error {
	if _, err := envconfig.ReadStore(getenv); err != nil {
		return err
	}
	if _, err := envconfig.ReadStateKeys(getenv); err != nil {
		return err
	}
	if _, err := envconfig.ReadWebhookAllow(getenv); err != nil {
		return err
	}
	if _, err := envconfig.ReadDelivery(getenv); err != nil {
		return err
	}
	if _, err := envconfig.ReadServe(getenv); err != nil {
		return err
	}
	_, err := envconfig.ReadServer(getenv)
	return err
}

const lambda = "AWS_LAMBDA_RUNTIME_API"

// TestBadValues: a bad value of each variable that has bad values is an
// *envconfig.Error that names the variable, the value (never a secret's)
// and what the variable accepts, in these words.
func TestBadValues(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		// The typed modes.
		{map[string]string{"MCPUSH_EVENTS_ERRORS": "openai"}, `MCPUSH_EVENTS_ERRORS="openai": want "sep-3415" or "chatgpt"`},
		{map[string]string{"MCPUSH_EVENTS_ERRORS": "SEP-3415"}, `MCPUSH_EVENTS_ERRORS="SEP-3415": want "sep-3415" or "chatgpt"`},
		{map[string]string{"MCPUSH_LAMBDA_MODE": "websocket"}, `MCPUSH_LAMBDA_MODE="websocket": want "stream" or "buffered"`},
		{map[string]string{"MCPUSH_LAMBDA_MODE": "Stream"}, `MCPUSH_LAMBDA_MODE="Stream": want "stream" or "buffered"`},
		{map[string]string{lambda: "127.0.0.1:9001", "MCPUSH_STORE": "dynamodb:t", "MCPUSH_AUTH": "jwt"}, `MCPUSH_AUTH="jwt": want "iam", "none" or "oauth"`},
		{map[string]string{"MCPUSH_AUTH": "jwt"}, `MCPUSH_AUTH="jwt": want "none" or "oauth" locally (the local server cannot check IAM signatures: "iam" needs a Lambda Function URL with AuthType AWS_IAM)`},
		{map[string]string{"MCPUSH_AUTH": "iam"}, `MCPUSH_AUTH="iam": want "none" or "oauth" locally (the local server cannot check IAM signatures: "iam" needs a Lambda Function URL with AuthType AWS_IAM)`},
		// The store.
		{map[string]string{lambda: "127.0.0.1:9001"}, `MCPUSH_STORE is not set: want dynamodb:TABLE in Lambda (template.yaml sets it)`},
		{map[string]string{"MCPUSH_CREATE_TABLE": "true"}, `MCPUSH_CREATE_TABLE="true": want 1 (create a missing DynamoDB table) or 0`},
		{map[string]string{"MCPUSH_FEED_SHARDS": "0"}, `MCPUSH_FEED_SHARDS="0": want an integer from 1 to 512 (every process on one table must use the same)`},
		{map[string]string{"MCPUSH_FEED_SHARDS": "513"}, `MCPUSH_FEED_SHARDS="513": want an integer from 1 to 512 (every process on one table must use the same)`},
		// Keys: the value is never echoed.
		{map[string]string{"MCPUSH_STATE_KEYS": "short-secret"}, `MCPUSH_STATE_KEYS: want comma-separated keys of at least 32 characters each (a requestState key must be at least 32 characters)`},
		{map[string]string{"MCPUSH_STATE_KEYS": strings.Repeat("k", 32), "MCPUSH_STATE_KEYS_SECRET": "mcpush-keys"}, `MCPUSH_STATE_KEYS: want unset when MCPUSH_STATE_KEYS_SECRET is set (set one of them, not both)`},
		{map[string]string{"MCPUSH_WEBHOOK_ALLOW": "ftp://x"}, `MCPUSH_WEBHOOK_ALLOW="ftp://x": want comma-separated origins such as http://127.0.0.1:9000 (scheme "ftp" is not http or https)`},
		{map[string]string{"MCPUSH_WEBHOOK_ALLOW": "http://127.0.0.1:9000, ftp://x"}, `MCPUSH_WEBHOOK_ALLOW="http://127.0.0.1:9000, ftp://x": want comma-separated origins such as http://127.0.0.1:9000 ("ftp://x": scheme "ftp" is not http or https)`},
		// Durations.
		{map[string]string{"MCPUSH_MAX_GET_STREAM": "soon"}, `MCPUSH_MAX_GET_STREAM="soon": want a duration such as 5s or 10m`},
		{map[string]string{"MCPUSH_STREAM_HOLD": "-1s"}, `MCPUSH_STREAM_HOLD="-1s": want a duration such as 5s or 10m, or deadline`},
		{map[string]string{"MCPUSH_POLL_INTERVAL": "100"}, `MCPUSH_POLL_INTERVAL="100": want a duration such as 5s or 10m`},
		{map[string]string{"MCPUSH_REGISTRY_REFRESH": "-1ms"}, `MCPUSH_REGISTRY_REFRESH="-1ms": want a duration such as 5s or 10m`},
		{map[string]string{"MCPUSH_SESSION_TTL": "1 hour"}, `MCPUSH_SESSION_TTL="1 hour": want a duration such as 5s or 10m`},
		{map[string]string{"MCPUSH_TASK_TTL": "x"}, `MCPUSH_TASK_TTL="x": want a duration such as 5s or 10m`},
		{map[string]string{"MCPUSH_TASK_LEASE": "x"}, `MCPUSH_TASK_LEASE="x": want a duration such as 5s or 10m`},
		{map[string]string{"MCPUSH_TASK_TIMEOUT": "x"}, `MCPUSH_TASK_TIMEOUT="x": want a duration such as 5s or 10m`},
		{map[string]string{"MCPUSH_BODY_READ_TIMEOUT": "x"}, `MCPUSH_BODY_READ_TIMEOUT="x": want a duration such as 5s or 10m`},
		{map[string]string{"MCPUSH_WEBHOOK_SWEEP": "x"}, `MCPUSH_WEBHOOK_SWEEP="x": want a duration such as 5s or 10m`},
		{map[string]string{"MCPUSH_DELIVERY_QUEUE_URL": "mcpush-delivery"}, `MCPUSH_DELIVERY_QUEUE_URL="mcpush-delivery": want an SQS queue URL such as https://sqs.us-east-1.amazonaws.com/123456789012/mcpush-delivery`},
		{map[string]string{"MCPUSH_WEBHOOK_WORKERS": "0"}, `MCPUSH_WEBHOOK_WORKERS="0": want a positive integer`},
		{map[string]string{"MCPUSH_WEBHOOK_PER_ORIGIN": "-2"}, `MCPUSH_WEBHOOK_PER_ORIGIN="-2": want a positive integer`},
		// Limits.
		{map[string]string{"MCPUSH_MAX_INFLIGHT": "0"}, `MCPUSH_MAX_INFLIGHT="0": want a positive integer`},
		{map[string]string{"MCPUSH_MAX_SUBSCRIPTIONS": "-3"}, `MCPUSH_MAX_SUBSCRIPTIONS="-3": want a positive integer`},
		{map[string]string{"MCPUSH_TASK_WORKERS": "many"}, `MCPUSH_TASK_WORKERS="many": want a positive integer`},
		{map[string]string{"MCPUSH_MAX_WEBHOOKS_PER_PRINCIPAL": "1e3"}, `MCPUSH_MAX_WEBHOOKS_PER_PRINCIPAL="1e3": want a positive integer`},
	} {
		err := readAll(env(tc.env))
		var e *envconfig.Error
		if !errors.As(err, &e) || err.Error() != tc.want {
			t.Errorf("%v: err = %v\nwant *envconfig.Error %s", tc.env, err, tc.want)
			continue
		}
		if e.Name == "MCPUSH_WEBHOOK_ALLOW" && !errors.Is(err, webhook.ErrInvalidAllow) {
			t.Errorf("%v: err = %v, not webhook.ErrInvalidAllow", tc.env, err)
		}
		if _, ok := tc.env[e.Name]; !ok && e.Name != "MCPUSH_STORE" {
			t.Errorf("%v: the error names %s, which is not set", tc.env, e.Name)
		}
		for k, v := range tc.env {
			if strings.HasPrefix(k, "MCPUSH_STATE_KEYS") && strings.Contains(err.Error(), v) {
				t.Errorf("%v: the error %q shows the secret value of %s", tc.env, err, k)
			}
		}
	}
	// Every limit, not only the ones above.
	for _, l := range readNames(nil) {
		if !strings.HasPrefix(l, "MCPUSH_MAX_") || l == "MCPUSH_MAX_GET_STREAM" {
			continue
		}
		if err := readAll(env(map[string]string{l: "0"})); err == nil || err.Error() != l+`="0": want a positive integer` {
			t.Errorf("%s=0: err = %v", l, err)
		}
	}
}

// readNames returns the variables the readers look up in m, sorted.
func readNames(m map[string]string) []string {
	seen := map[string]bool{}
	getenv := func(k string) string { seen[k] = true; return m[k] }
	readAll(getenv)
	envconfig.ReadRegistryTools(getenv)
	envconfig.ReadMetrics(getenv)
	envconfig.ReadAdmin(getenv)
	envconfig.RuntimeAPI(getenv)
	var names []string
	for k := range seen {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// TestDefaults: an empty environment reads as the defaults (a local
// process: the default SQLite store, no auth mode, stream mode).
func TestDefaults(t *testing.T) {
	st, err := envconfig.ReadStore(env(nil))
	if err != nil || st != (envconfig.Store{Spec: envconfig.DefaultStore}) {
		t.Errorf("ReadStore = %+v, %v", st, err)
	}
	sv, err := envconfig.ReadServe(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&envconfig.Serve{Mode: envconfig.ModeStream, MaxConcurrency: 1}, sv); diff != "" {
		t.Errorf("ReadServe (-want +got):\n%s", diff)
	}
	srv, err := envconfig.ReadServer(env(nil))
	if err != nil || !cmp.Equal(srv, &envconfig.Server{}) {
		t.Errorf("ReadServer = %+v, %v", srv, err)
	}
	k, err := envconfig.ReadStateKeys(env(nil))
	if err != nil || k.Keys != nil || k.Secret != "" {
		t.Errorf("ReadStateKeys = %+v, %v", k, err)
	}
	if a, err := envconfig.ReadWebhookAllow(env(nil)); a != nil || err != nil {
		t.Errorf("ReadWebhookAllow = %v, %v", a, err)
	}
	if tools := envconfig.ReadRegistryTools(env(nil)); tools != nil {
		t.Errorf("ReadRegistryTools = %q", tools)
	}
}

// TestValues: good values read as they mean.
func TestValues(t *testing.T) {
	key := strings.Repeat("k", 32)
	m := map[string]string{
		lambda: "127.0.0.1:9001", "MCPUSH_STORE": "dynamodb:t", "MCPUSH_CREATE_TABLE": "1", "MCPUSH_FEED_SHARDS": "8",
		"MCPUSH_STORE_STATS": "/tmp/stats", "MCPUSH_STATE_KEYS": key + ", " + key + "2",
		"MCPUSH_WEBHOOK_ALLOW": "http://127.0.0.1:9000", "MCPUSH_REGISTRY_TOOLS": "count, events_wait,x",
		"MCPUSH_LAMBDA_MODE": "buffered", "MCPUSH_AUTH": "oauth", "MCPUSH_OAUTH_SCOPES": "a b,c", "MCPUSH_STREAM_HOLD": "deadline",
		"AWS_LAMBDA_MAX_CONCURRENCY": "64", "MCPUSH_TASK_TTL": "2h", "MCPUSH_MAX_INFLIGHT": "7", "MCPUSH_TASK_WORKERS": "3",
		"AWS_LAMBDA_FUNCTION_NAME": "mcp", "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST", "MCPUSH_EVENTS_ERRORS": "chatgpt",
	}
	st, err := envconfig.ReadStore(env(m))
	if want := (envconfig.Store{Spec: "dynamodb:t", CreateTable: true, FeedShards: 8, StatsDir: "/tmp/stats"}); err != nil || st != want {
		t.Errorf("ReadStore = %+v, %v; want %+v", st, err, want)
	}
	k, err := envconfig.ReadStateKeys(env(m))
	if err != nil || len(k.Keys) != 2 || string(k.Keys[1]) != key+"2" {
		t.Errorf("ReadStateKeys = %q, %v", k.Keys, err)
	}
	if a, err := envconfig.ReadWebhookAllow(env(m)); err != nil || len(a) != 1 || a[0] != (webhook.Origin{Scheme: "http", Host: "127.0.0.1", Port: "9000"}) {
		t.Errorf("ReadWebhookAllow = %v, %v", a, err)
	}
	if tools := envconfig.ReadRegistryTools(env(m)); !slices.Equal(tools, []string{"count", "events_wait", "x"}) {
		t.Errorf("ReadRegistryTools = %q", tools)
	}
	sv, err := envconfig.ReadServe(env(m))
	if err != nil {
		t.Fatal(err)
	}
	want := &envconfig.Serve{RuntimeAPI: "127.0.0.1:9001", Mode: envconfig.ModeBuffered, Auth: envconfig.AuthOAuth,
		OAuth: envconfig.OAuth{Scopes: []string{"a", "b", "c"}}, StreamHold: envconfig.StreamHoldDeadline, MaxConcurrency: 64}
	if diff := cmp.Diff(want, sv); diff != "" {
		t.Errorf("ReadServe (-want +got):\n%s", diff)
	}
	srv, err := envconfig.ReadServer(env(m))
	if err != nil {
		t.Fatal(err)
	}
	wantSrv := &envconfig.Server{Limits: envconfig.Limits{TaskTTL: 2 * time.Hour, MaxInFlight: 7}, Tasks: envconfig.Tasks{Workers: 3},
		FunctionName: "mcp", FunctionVersion: "$LATEST", EventsErrors: envconfig.EventsErrorsChatGPT}
	if diff := cmp.Diff(wantSrv, srv); diff != "" {
		t.Errorf("ReadServer (-want +got):\n%s", diff)
	}
}

// TestParseModes: the typed modes parse their spellings, and nothing else.
func TestParseModes(t *testing.T) {
	for s, want := range map[string]envconfig.Mode{"": envconfig.ModeStream, "stream": envconfig.ModeStream, "buffered": envconfig.ModeBuffered} {
		if got, err := envconfig.ParseMode(s); got != want || err != nil {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", s, got, err, want)
		}
	}
	for _, s := range []string{"STREAM", " stream", "sse"} {
		if got, err := envconfig.ParseMode(s); got != "" || err == nil {
			t.Errorf("ParseMode(%q) = %q, %v; want an error", s, got, err)
		}
	}
	for _, tc := range []struct {
		s      string
		lambda bool
		want   envconfig.Auth
		ok     bool
	}{
		{"", true, "", true}, {"", false, "", true},
		{"iam", true, envconfig.AuthIAM, true}, {"iam", false, "", false},
		{"none", true, envconfig.AuthNone, true}, {"none", false, envconfig.AuthNone, true},
		{"oauth", true, envconfig.AuthOAuth, true}, {"oauth", false, envconfig.AuthOAuth, true},
		{"IAM", true, "", false}, {"open", false, "", false},
	} {
		got, err := envconfig.ParseAuth(tc.s, tc.lambda)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseAuth(%q, lambda %v) = %q, %v; want %q, ok %v", tc.s, tc.lambda, got, err, tc.want, tc.ok)
		}
	}
}

// TestConstants: the copies of constants that envconfig keeps so as not
// to link the stores are the stores' own.
func TestConstants(t *testing.T) {
	if envconfig.MaxFeedShards != dynamostore.MaxFeedShards {
		t.Errorf("MaxFeedShards %d, dynamostore.MaxFeedShards %d", envconfig.MaxFeedShards, dynamostore.MaxFeedShards)
	}
}

// TestDocumented: every variable the readers look up is in
// docs/configuration.md (the limits in docs/limits.md), save those that
// Lambda sets.
func TestDocumented(t *testing.T) {
	root := testenv.RepoRoot(t)
	var docs strings.Builder
	for _, f := range []string{"configuration.md", "limits.md"} {
		b, err := os.ReadFile(filepath.Join(root, "docs", f))
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	names := readNames(map[string]string{lambda: "127.0.0.1:9001", "MCPUSH_STORE": "dynamodb:t"})
	if len(names) < 45 {
		t.Fatalf("only %d variables read: %q", len(names), names)
	}
	for _, name := range names {
		switch name {
		case lambda, "AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_VERSION":
			continue // set by Lambda
		}
		if !strings.Contains(docs.String(), "`"+name+"`") {
			t.Errorf("%s is not in docs/configuration.md or docs/limits.md", name)
		}
	}
}

// TestReadMetrics: the exporter's default depends on where the process
// runs; prometheus is refused in Lambda, and so are unknown exporters and
// namespaces CloudWatch refuses, each error naming its variable.
func TestReadMetrics(t *testing.T) {
	const lambda = "AWS_LAMBDA_RUNTIME_API"
	for _, tc := range []struct {
		env  map[string]string
		want envconfig.Metrics
		bad  string // the variable an error names
	}{
		{nil, envconfig.Metrics{Exporter: envconfig.MetricsPrometheus, Namespace: "mcpush"}, ""},
		{map[string]string{lambda: "127.0.0.1:9001", "AWS_LAMBDA_FUNCTION_NAME": "f"}, envconfig.Metrics{Exporter: envconfig.MetricsEMF, Namespace: "mcpush", Function: "f"}, ""},
		{map[string]string{"MCPUSH_METRICS": "off", "MCPUSH_METRICS_NAMESPACE": "Team/mcpush"}, envconfig.Metrics{Exporter: envconfig.MetricsOff, Namespace: "Team/mcpush"}, ""},
		{map[string]string{"MCPUSH_METRICS": "emf"}, envconfig.Metrics{Exporter: envconfig.MetricsEMF, Namespace: "mcpush"}, ""},
		{map[string]string{lambda: "127.0.0.1:9001", "MCPUSH_METRICS": "prometheus"}, envconfig.Metrics{}, "MCPUSH_METRICS"},
		{map[string]string{"MCPUSH_METRICS": "statsd"}, envconfig.Metrics{}, "MCPUSH_METRICS"},
		{map[string]string{"MCPUSH_METRICS_NAMESPACE": "AWS/Lambda"}, envconfig.Metrics{}, "MCPUSH_METRICS_NAMESPACE"},
		{map[string]string{"MCPUSH_METRICS_NAMESPACE": strings.Repeat("n", 256)}, envconfig.Metrics{}, "MCPUSH_METRICS_NAMESPACE"},
		{map[string]string{"MCPUSH_METRICS_NAMESPACE": "a\x00b"}, envconfig.Metrics{}, "MCPUSH_METRICS_NAMESPACE"},
	} {
		got, err := envconfig.ReadMetrics(env(tc.env))
		var e *envconfig.Error
		switch {
		case tc.bad == "" && (err != nil || got != tc.want):
			t.Errorf("ReadMetrics(%v) = %+v, %v; want %+v", tc.env, got, err, tc.want)
		case tc.bad != "" && (!errors.As(err, &e) || e.Name != tc.bad || got != envconfig.Metrics{}):
			t.Errorf("ReadMetrics(%v) = %+v, %v; want an error naming %s", tc.env, got, err, tc.bad)
		}
	}
}

// TestReadAdmin: the admin scope's default and "off", the ARNs, and bad
// values refused naming their variable.
func TestReadAdmin(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want envconfig.Admin
		bad  string
	}{
		{nil, envconfig.Admin{Scope: "mcpush:admin"}, ""},
		{map[string]string{"MCPUSH_ADMIN_SCOPE": "off"}, envconfig.Admin{}, ""},
		{map[string]string{"MCPUSH_ADMIN_SCOPE": "ops", "MCPUSH_ADMIN_ARNS": " arn:aws:iam::123456789012:user/ops , arn:aws:sts::123456789012:assumed-role/Ops/alice"},
			envconfig.Admin{Scope: "ops", ARNs: []string{"arn:aws:iam::123456789012:user/ops", "arn:aws:sts::123456789012:assumed-role/Ops/alice"}}, ""},
		{map[string]string{"MCPUSH_ADMIN_SCOPE": "a b"}, envconfig.Admin{}, "MCPUSH_ADMIN_SCOPE"},
		{map[string]string{"MCPUSH_ADMIN_ARNS": "ops"}, envconfig.Admin{}, "MCPUSH_ADMIN_ARNS"},
		{map[string]string{"MCPUSH_ADMIN_ARNS": "arn:aws:iam::123456789012:user/*"}, envconfig.Admin{}, "MCPUSH_ADMIN_ARNS"},
		{map[string]string{"MCPUSH_ADMIN_ARNS": strings.Repeat("arn:aws:iam::1:user/x,", 101)}, envconfig.Admin{}, "MCPUSH_ADMIN_ARNS"},
	} {
		got, err := envconfig.ReadAdmin(env(tc.env))
		var e *envconfig.Error
		switch {
		case tc.bad == "" && (err != nil || !slices.Equal(got.ARNs, tc.want.ARNs) || got.Scope != tc.want.Scope):
			t.Errorf("ReadAdmin(%v) = %+v, %v; want %+v", tc.env, got, err, tc.want)
		case tc.bad != "" && (!errors.As(err, &e) || e.Name != tc.bad):
			t.Errorf("ReadAdmin(%v) = %+v, %v; want an error naming %s", tc.env, got, err, tc.bad)
		}
	}
}

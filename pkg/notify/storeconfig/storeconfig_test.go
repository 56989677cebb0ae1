package storeconfig_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
)

func TestOpenBadSpec(t *testing.T) {
	for _, spec := range []string{"", "sqlite", "sqlite:", "postgres:db", "dynamodb:"} {
		if st, err := storeconfig.Open(context.Background(), spec, nil); err == nil || !strings.Contains(err.Error(), "want") {
			if st != nil {
				st.Close()
			}
			t.Errorf("Open(%q) = %v, want an error saying what to write", spec, err)
		}
	}
}

// TestOpen opens both kinds and round-trips a topic event through each.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	specs := []string{"sqlite:" + filepath.Join(t.TempDir(), "mcpush.db")}
	if !testing.Short() {
		endpoint := moto.Start(t)
		t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
		t.Setenv("AWS_REGION", "us-east-1")
		t.Setenv("AWS_ACCESS_KEY_ID", "test")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
		specs = append(specs, fmt.Sprintf("dynamodb:storeconfig-%d", time.Now().UnixNano()))
	}
	for _, spec := range specs {
		st, err := storeconfig.Open(ctx, spec, &storeconfig.Options{CreateTable: true})
		if err != nil {
			t.Fatalf("Open(%q): %v", spec, err)
		}
		if _, _, err := st.AppendTopicEvent(ctx, "t", "m-1", time.Now(), []byte(`{"n":1}`)); err != nil {
			t.Errorf("%s: AppendTopicEvent: %v", spec, err)
		}
		evs, err := st.ReadTopicEvents(ctx, "t", 0, 10)
		if err != nil || len(evs) != 1 || string(evs[0].Data) != `{"n":1}` {
			t.Errorf("%s: ReadTopicEvents = %+v, %v", spec, evs, err)
		}
		st.Close()
	}
}

// dynamoEnv points the AWS SDK at endpoint with test credentials.
func dynamoEnv(t *testing.T, endpoint string) {
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_REGION", "eu-west-3")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
}

// openCheck opens spec with the start-up check, bounding the whole call
// by a context far longer than the check's own timeout: an Open that
// hangs fails the test with "context deadline exceeded" in its error and
// not the check's message.
func openCheck(t *testing.T, spec string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := storeconfig.Open(ctx, spec, &storeconfig.Options{CheckTimeout: 2 * time.Second})
	if st != nil {
		st.Close()
	}
	if ctx.Err() != nil {
		t.Fatalf("Open(%q) did not return within 30 s: %v", spec, err)
	}
	return err
}

// TestOpenChecksDynamoDB: a missing table and an unreachable endpoint are
// start-up errors, within the check's timeout, that name the table, the
// region and the endpoint; a missing table names MCPUSH_CREATE_TABLE=1
// and is a configuration error, an unreachable endpoint is
// notify.ErrUnavailable (it may come back).
func TestOpenChecksDynamoDB(t *testing.T) {
	endpoint := moto.Start(t)
	dynamoEnv(t, endpoint)
	table := fmt.Sprintf("missing-%d", time.Now().UnixNano())
	err := openCheck(t, "dynamodb:"+table)
	t.Logf("missing table: %v", err)
	for _, want := range []string{`table "` + table + `"`, "region eu-west-3", "endpoint " + endpoint, "does not exist", "MCPUSH_CREATE_TABLE=1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing table: Open = %v, want an error with %q", err, want)
		}
	}
	if errors.Is(err, notify.ErrUnavailable) {
		t.Errorf("missing table: %v is ErrUnavailable, want a configuration error", err)
	}

	// Nothing listens on a closed port: connection refused, retried by
	// the SDK, then given up.
	closed := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
	// A listener that accepts and never answers: only the timeout ends it.
	silent := testenv.SilentEndpoint(t)
	for _, ep := range []string{closed, silent} {
		dynamoEnv(t, ep)
		err := openCheck(t, "dynamodb:mcpush")
		t.Logf("endpoint %s: %v", ep, err)
		for _, want := range []string{`table "mcpush"`, "region eu-west-3", "endpoint " + ep} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("endpoint %s: Open = %v, want an error with %q", ep, err, want)
			}
		}
		if !errors.Is(err, notify.ErrUnavailable) {
			t.Errorf("endpoint %s: %v is not ErrUnavailable", ep, err)
		}
	}

	// No endpoint and no credentials, as a newcomer starts locally: the
	// SDK would look for instance credentials and AWS's own endpoint. An
	// error within the check's timeout that says how to set the endpoint
	// (on a machine with AWS access, whatever AWS answers: still an error
	// naming the table).
	dynamoEnv(t, "")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	err = openCheck(t, "dynamodb:mcpush-newcomer")
	t.Logf("no endpoint: %v", err)
	for _, want := range []string{`table "mcpush-newcomer"`, "region eu-west-3", "endpoint https://dynamodb.eu-west-3.amazonaws.com", "AWS_ENDPOINT_URL_DYNAMODB"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("no endpoint: Open = %v, want an error with %q", err, want)
		}
	}

	// The table that exists passes the check.
	dynamoEnv(t, endpoint)
	st, err := storeconfig.Open(context.Background(), "dynamodb:"+table, &storeconfig.Options{CreateTable: true})
	if err != nil {
		t.Fatalf("with MCPUSH_CREATE_TABLE: %v", err)
	}
	st.Close()
	if err := openCheck(t, "dynamodb:"+table); err != nil {
		t.Errorf("an existing table: %v", err)
	}
}

// TestOpenChecksSQLite: an SQLite path that cannot be created or written
// is a start-up error naming the path.
func TestOpenChecksSQLite(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(file, "mcpush.db"), dir} {
		err := openCheck(t, "sqlite:"+path)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("Open(sqlite:%s) = %v, want an error naming the path", path, err)
		}
	}
}

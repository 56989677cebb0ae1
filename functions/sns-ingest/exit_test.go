package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
)

// dynamoEnv points the AWS SDK at endpoint with test credentials, and
// the CLI at table.
func dynamoEnv(t *testing.T, te *testEnv, endpoint, table string) {
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	te.getenv = func(k string) string {
		if k == "MCPUSH_STORE" {
			return "dynamodb:" + table
		}
		return ""
	}
}

// TestRunStoreExitCodes: the CLI tells a store failure (exit 3, "failed"
// in the summary: run it again) from a rejected message (exit 1) and from
// a store configuration error (exit 2), against real moto.
func TestRunStoreExitCodes(t *testing.T) {
	endpoint := moto.Start(t)
	te := newTestEnv(t)

	// A missing table is configuration: exit 2, naming the fix.
	table := fmt.Sprintf("sns-ingest-%d", time.Now().UnixNano())
	dynamoEnv(t, te, endpoint, table)
	if code, out := te.run(t, "-topic", "t", "-message", "m"); code != exitUsage || out != "" ||
		!strings.Contains(te.stderr.String(), "MCPUSH_CREATE_TABLE=1") || !strings.Contains(te.stderr.String(), table) {
		t.Errorf("missing table: exit %d, stdout %q, stderr %s; want %d naming the table and MCPUSH_CREATE_TABLE=1", code, out, te.stderr.String(), exitUsage)
	}

	// An endpoint that accepts connections and never answers: "opening
	// the store: context deadline exceeded" is retryable, exit 3.
	for _, ep := range []string{testenv.SilentEndpoint(t), fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))} {
		dynamoEnv(t, te, ep, table)
		if code, out := te.run(t, "-topic", "t", "-message", "m"); code != exitRetry || out != "" || !strings.Contains(te.stderr.String(), ep) {
			t.Errorf("endpoint %s: exit %d, stdout %q, stderr %s; want %d naming the endpoint", ep, code, out, te.stderr.String(), exitRetry)
		}
	}

	// The table exists, and the store fails after the start-up check:
	// every write is a 500 (an outage). The record failed, not rejected.
	dynamoEnv(t, te, endpoint, table)
	st, err := storeconfig.Open(t.Context(), "dynamodb:"+table, &storeconfig.Options{CreateTable: true})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	target, _ := url.Parse(endpoint)
	proxy := httputil.NewSingleHostReverseProxy(target)
	outage := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".DescribeTable") {
			proxy.ServeHTTP(w, r)
			return
		}
		body := []byte(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected outage"}`)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
		w.WriteHeader(http.StatusInternalServerError)
		w.Write(body)
	})}
	oln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go outage.Serve(oln)
	defer outage.Close()
	dynamoEnv(t, te, "http://"+oln.Addr().String(), table)
	code, out := te.run(t, "-topic", "t", "-message", "m", "-message-id", "m-1")
	var sum ingest.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != exitRetry || sum.Failed != 1 || sum.Rejected != 0 || sum.Accepted != 0 {
		t.Errorf("store outage: exit %d, summary %q (%v); want %d with failed 1, rejected 0", code, out, err, exitRetry)
	}
	if !strings.Contains(te.stderr.String(), "SNS record failed in the store") || strings.Contains(te.stderr.String(), "SNS record rejected") {
		t.Errorf("store outage logged as:\n%s", te.stderr.String())
	}

	// The store is back: the same command goes through.
	dynamoEnv(t, te, endpoint, table)
	if code, out := te.run(t, "-topic", "t", "-message", "m", "-message-id", "m-1"); code != exitOK || out != `{"accepted":1,"duplicates":0,"rejected":0,"failed":0}`+"\n" {
		t.Errorf("after the outage: exit %d, %q", code, out)
	}
}

// TestRunStoreLocked: another process holds the SQLite file's write lock
// the whole time (as a process frozen mid-transaction does): opening the
// store times out, which is retryable, exit 3, not 2 (usage); once the
// lock is released the same command goes through.
func TestRunStoreLocked(t *testing.T) {
	t.Parallel()
	te := newTestEnv(t)
	te.store(t).Close() // create the file and its schema
	db, err := sql.Open("sqlite", "file:"+te.db+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`DELETE FROM sessions WHERE id = 'none'`); err != nil {
		t.Fatal(err)
	}
	if code, out := te.run(t, "-topic", "t", "-message", "m", "-message-id", "m-1"); code != exitRetry || out != "" || !strings.Contains(te.stderr.String(), "store unavailable") {
		t.Errorf("with the write lock held: exit %d, stdout %q, stderr %s; want %d", code, out, te.stderr.String(), exitRetry)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if code, out := te.run(t, "-topic", "t", "-message", "m", "-message-id", "m-1"); code != exitOK || out != `{"accepted":1,"duplicates":0,"rejected":0,"failed":0}`+"\n" {
		t.Errorf("after the lock was released: exit %d, %q", code, out)
	}
}

// TestRunConfigErrors: a bad value of a variable the CLI reads is a
// configuration error, exit 2, as it is an init error in Lambda and in
// functions/mcp, and it is read before the store is opened: with the
// store's DynamoDB endpoint a closed port, the error still names the
// variable, at once, and not the store (which failed the run with exit 3
// after up to 5 s, or after a warning with exit 0 when the store was
// reachable).
func TestRunConfigErrors(t *testing.T) {
	key := strings.Repeat("k", 32)
	closed := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"short key", map[string]string{"MCPUSH_STATE_KEYS": "short-secret"}, `MCPUSH_STATE_KEYS: want comma-separated keys`},
		{"keys and secret", map[string]string{"MCPUSH_STATE_KEYS": key, "MCPUSH_STATE_KEYS_SECRET": "mcpush-keys"}, `MCPUSH_STATE_KEYS: want unset when MCPUSH_STATE_KEYS_SECRET is set`},
		{"webhook allow", map[string]string{"MCPUSH_WEBHOOK_ALLOW": "ftp://x"}, `MCPUSH_WEBHOOK_ALLOW=\"ftp://x\"`},
		{"create table", map[string]string{"MCPUSH_CREATE_TABLE": "true"}, `MCPUSH_CREATE_TABLE=\"true\"`},
	} {
		for _, store := range []string{"sqlite", "unreachable dynamodb"} {
			t.Run(tc.name+"/"+store, func(t *testing.T) {
				te := newTestEnv(t)
				env := map[string]string{"MCPUSH_STORE": "sqlite:" + te.db}
				if store != "sqlite" {
					dynamoEnv(t, te, closed, "mcpush")
					env["MCPUSH_STORE"] = "dynamodb:mcpush"
				}
				for k, v := range tc.env {
					env[k] = v
				}
				te.getenv = func(k string) string { return env[k] }
				start := time.Now()
				code, out := te.run(t, "-topic", "t", "-message", "m")
				if code != exitUsage || out != "" || !strings.Contains(te.stderr.String(), tc.want) || !strings.Contains(te.stderr.String(), `"msg":"sns-ingest: configuration"`) {
					t.Errorf("exit %d, stdout %q, stderr %s; want %d, no summary, a configuration error with %s", code, out, te.stderr.String(), exitUsage, tc.want)
				}
				if strings.Contains(te.stderr.String(), "opening the store") || strings.Contains(te.stderr.String(), "short-secret") {
					t.Errorf("stderr %s: the store was opened, or a key shown", te.stderr.String())
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Errorf("the run took %v: it waited for the store", d)
				}
				if store == "sqlite" {
					if _, err := os.Stat(te.db); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("the store %s was created (%v): nothing may change on refused configuration", te.db, err)
					}
				}
			})
		}
	}
}

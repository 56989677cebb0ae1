// Package moto runs a local DynamoDB API (Python moto's moto_server) for
// tests and local tools.
//
// Start launches one moto_server per process, on a free loopback port, the
// first time any test asks for it; later calls share it. Stop ends it and
// belongs in TestMain after m.Run:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		moto.Stop()
//		os.Exit(code)
//	}
//
// A process that exits without calling Stop (a panic, a test timeout) does
// not leak the server on Linux: it is started with a parent-death signal.
//
// moto_server executes requests on several threads without locking its
// in-memory tables, so two concurrent conditional writes or transactions can
// both pass their conditions, and a cancelled transaction restores a copy of
// the whole table taken before it began, erasing writes that other requests
// made meanwhile. Real DynamoDB has neither problem. The endpoint Start
// returns is therefore a small proxy in this process that forwards one
// request at a time per table to moto_server, which makes every request
// atomic, as DynamoDB's are. Concurrency tests against it are meaningful;
// throughput figures are not.
//
// moto also copies every table a transaction names before running it, so
// that transactions slow down as tables grow. Start makes moto_server load
// python/sitecustomize.py, which narrows that copy to the items the
// transaction names (equivalent under the proxy's one-request-per-table
// rule). Tests should still use small tables, one per test.
package moto

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// sitecustomize makes moto's transactions cost what they touch rather than
// what their tables hold; see the file.
//
//go:embed python/sitecustomize.py
var sitecustomize []byte

// Command is the program Start runs.
const Command = "moto_server"

// Region is the region NewClient uses.
const Region = "us-east-1"

// startTimeout bounds how long Start waits for moto_server to answer.
const startTimeout = 60 * time.Second

// server is the process-wide moto_server and its serializing proxy.
var server struct {
	mu       sync.Mutex // guards the fields below; held while starting
	started  bool       // a start was attempted
	endpoint string     // proxy URL once running
	backend  string     // moto_server's own URL
	err      error      // why the start failed
	missing  bool       // moto_server is not on PATH
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has exited
	pyDir    string        // holds sitecustomize.py
	proxy    *http.Server
}

// Start returns the endpoint URL ("http://127.0.0.1:PORT") of the
// process-wide moto server, starting it on first use and waiting until it
// answers. It is safe for concurrent use; all callers share one server, whose
// state (tables, items) persists until Stop, so tests should use their own
// table names.
//
// When moto_server is not on PATH, Start fails the test if the environment
// has CI=true and skips it otherwise. Any other failure to start fails the
// test.
func Start(t testing.TB) string {
	t.Helper()
	endpoint, err := start()
	if err != nil {
		server.mu.Lock()
		missing := server.missing
		server.mu.Unlock()
		fail(t, err, missing, os.Getenv("CI") == "true")
	}
	return endpoint
}

// fail ends a test that cannot have a moto server: it skips when
// moto_server is missing outside CI, and fails otherwise.
func fail(t testing.TB, err error, missing, ci bool) {
	t.Helper()
	if missing && !ci {
		t.Skipf("skipping: %v (install it with pip install 'moto[server]'; under CI=true this is a failure)", err)
		return
	}
	if missing {
		t.Fatalf("moto: %v; CI=true requires it (pip install 'moto[server]')", err)
	}
	t.Fatalf("moto: %v", err)
}

// Endpoint starts the shared server like Start, for callers without a
// testing.TB (a TestMain, a benchmark harness, a local tool). It reports
// exec.ErrNotFound (wrapped) when moto_server is not on PATH.
func Endpoint() (string, error) {
	return start()
}

func start() (string, error) {
	server.mu.Lock()
	defer server.mu.Unlock()
	if server.started {
		return server.endpoint, server.err
	}
	server.started = true
	server.endpoint, server.err = launch()
	return server.endpoint, server.err
}

// launch starts moto_server and the proxy; server.mu is held.
func launch() (string, error) {
	path, err := exec.LookPath(Command)
	if err != nil {
		server.missing = true
		return "", fmt.Errorf("%s not found on PATH: %w", Command, err)
	}
	// A free port can be taken by someone else between our probe and
	// moto_server's bind; try a few ports before giving up.
	// moto copies every table a transaction names, to undo the
	// transaction if it is cancelled, which makes transactions slow down
	// as tables grow; sitecustomize.py makes the copy cover only the items
	// the transaction names.
	dir, err := os.MkdirTemp("", "moto-python-")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "sitecustomize.py"), sitecustomize, 0o644); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	server.pyDir = dir
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			return "", err
		}
		backend, err := runMoto(path, port)
		if err == nil {
			server.backend = backend
			return serveProxy(backend)
		}
		lastErr = err
	}
	return "", lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// runMoto starts moto_server on port and waits until it answers HTTP.
func runMoto(path string, port int) (string, error) {
	var logs bytes.Buffer
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+strings.Join(slices.DeleteFunc(
		[]string{server.pyDir, os.Getenv("PYTHONPATH")}, func(s string) bool { return s == "" }), string(os.PathListSeparator)))
	out := &lockedWriter{w: &logs}
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group, so Stop can end anything moto_server spawns, and a
	// parent-death signal so a crashed test process does not leak it. The
	// pyenv shim execs, so the signal reaches the Python process itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting %s: %w", path, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := client.Get(url + "/moto-api/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			server.cmd, server.exited = cmd, exited
			return url, nil
		}
		select {
		case <-exited:
			return "", fmt.Errorf("%s -p %d exited before answering: %s", Command, port, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			kill(cmd, exited)
			return "", fmt.Errorf("%s -p %d did not answer within %v: %v; output: %s", Command, port, startTimeout, err, out.String())
		}
	}
}

// serveProxy starts the serializing proxy in front of backend.
func serveProxy(backend string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		kill(server.cmd, server.exited)
		return "", fmt.Errorf("proxy listener: %w", err)
	}
	p := &serialProxy{
		backend: backend,
		client: &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     30 * time.Second,
		}},
	}
	server.proxy = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go server.proxy.Serve(l)
	return "http://" + l.Addr().String(), nil
}

// Stop ends the shared server if Start launched one. It is safe to call
// more than once and concurrently with nothing else; after Stop, Start
// fails.
func Stop() {
	server.mu.Lock()
	defer server.mu.Unlock()
	if server.proxy != nil {
		server.proxy.Close()
		server.proxy = nil
	}
	if server.cmd != nil {
		kill(server.cmd, server.exited)
		server.cmd = nil
	}
	if server.pyDir != "" {
		os.RemoveAll(server.pyDir)
		server.pyDir = ""
	}
	server.started = true
	server.endpoint = ""
	if server.err == nil {
		server.err = errors.New("moto server stopped")
	}
}

// kill ends cmd's process group and waits for it to exit.
func kill(cmd *exec.Cmd, exited <-chan struct{}) {
	pid := cmd.Process.Pid
	syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
}

// serialProxy forwards requests to moto_server, one at a time per table
// (see the package comment): a request naming tables waits for every one
// of them; a request naming none (ListTables, ...) waits for all requests
// to finish. Request bodies are read in full before forwarding.
type serialProxy struct {
	backend string
	client  *http.Client

	all    sync.RWMutex // held for reading by table requests, for writing by others
	mu     sync.Mutex
	tables map[string]*sync.Mutex
}

func (p *serialProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading request: "+err.Error(), http.StatusBadRequest)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.backend+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host

	unlock := p.lock(tableNames(body))
	status, header, respBody, err := p.roundTrip(out)
	unlock()
	if err != nil {
		http.Error(w, "moto proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(respBody)))
	w.WriteHeader(status)
	w.Write(respBody)
}

// lock locks the named tables (in sorted order, so that two requests on
// the same tables cannot deadlock), or everything when names is empty.
func (p *serialProxy) lock(names []string) (unlock func()) {
	if len(names) == 0 {
		p.all.Lock()
		return p.all.Unlock
	}
	p.all.RLock()
	slices.Sort(names)
	names = slices.Compact(names)
	locks := make([]*sync.Mutex, len(names))
	p.mu.Lock()
	if p.tables == nil {
		p.tables = make(map[string]*sync.Mutex)
	}
	for i, n := range names {
		if p.tables[n] == nil {
			p.tables[n] = new(sync.Mutex)
		}
		locks[i] = p.tables[n]
	}
	p.mu.Unlock()
	for _, l := range locks {
		l.Lock()
	}
	return func() {
		for _, l := range locks {
			l.Unlock()
		}
		p.all.RUnlock()
	}
}

// tableNames returns the tables a DynamoDB JSON request names: TableName,
// the keys of RequestItems (batch operations) and the TableName of each of
// TransactItems. It returns nil for a body it cannot parse.
func tableNames(body []byte) []string {
	var req struct {
		TableName     string
		RequestItems  map[string]json.RawMessage
		TransactItems []map[string]struct{ TableName string }
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var names []string
	if req.TableName != "" {
		names = append(names, req.TableName)
	}
	for n := range req.RequestItems {
		names = append(names, n)
	}
	for _, it := range req.TransactItems {
		for _, op := range it {
			if op.TableName != "" {
				names = append(names, op.TableName)
			}
		}
	}
	return names
}

func (p *serialProxy) roundTrip(req *http.Request) (int, http.Header, []byte, error) {
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	resp.Header.Del("Content-Length")
	resp.Header.Del("Transfer-Encoding")
	resp.Header.Del("Connection")
	return resp.StatusCode, resp.Header, body, nil
}

// NewClient returns a DynamoDB client for endpoint with static dummy
// credentials and region us-east-1, independent of the environment and of
// ~/.aws. Like every *dynamodb.Client it is safe for concurrent use.
func NewClient(ctx context.Context, endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	_ = ctx // reserved: loading configuration does not need it today
	opts := dynamodb.Options{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
	}
	return dynamodb.New(opts, optFns...)
}

// lockedWriter keeps the first 64 KiB of moto_server's output (enough to
// say why it failed to start; it logs every request afterwards).
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := 64<<10 - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// NewSQSClient returns an SQS client for endpoint (moto_server serves SQS
// beside DynamoDB), with the same static credentials and region as
// NewClient.
func NewSQSClient(endpoint string) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
	})
}

// NewQueue creates a standard SQS queue named name (a visibility timeout
// of visibility seconds) and returns its URL.
func NewQueue(ctx context.Context, client *sqs.Client, name string, visibility int) (string, error) {
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name),
		Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(visibility)}})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.QueueUrl), nil
}

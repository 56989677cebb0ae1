//go:build linux

package rie

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/lambdatest"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/internal/testutil"
)

// Module is the emulator's Go module, and Package its main package.
const (
	Module  = "github.com/aws/aws-lambda-runtime-interface-emulator"
	Package = Module + "/cmd/aws-lambda-rie"
)

// Version pins the emulator. The repository's release tags (v1.x) are
// not semantic versions the module proxy lists, so the pin is the
// pseudo-version of a commit: bef5c4ba774d of 2026-10-30, the newest on
// the proxy when it was chosen (`go list -m -json Module@latest`).
const Version = "v0.0.0-20261030222936-bef5c4ba774d"

// InvokePath is the emulator's invoke API: the one function it runs is
// named "function".
const InvokePath = "/2015-03-31/functions/function/invocations"

// LambdaTags are the build tags of the Lambda binaries (the Makefile's
// LAMBDA_GO): no RPC mode in aws-lambda-go, no SQLite store.
const LambdaTags = "lambda.norpc,nosqlite"

var installRIE = sync.OnceValues(func() (string, error) {
	return install()
})

// Binary returns the path of aws-lambda-rie at Version, installing it with
// `go install Package@Version` on first use (about 20 s from an empty
// module cache; a later test process finds it in the cache directory).
// A failure to install it (no network, no module proxy) goes through
// testenv.RequireComponent, with the go command's output: the test fails
// under CI=true and is skipped elsewhere.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := installRIE()
	if err != nil {
		err = fmt.Errorf("installing %s@%s: %w", Package, Version, err)
	}
	testenv.RequireComponent(t, "aws-lambda-rie", err)
	return bin
}

func install() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	dir, err := cacheDir("rie-" + Version)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "aws-lambda-rie")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	// Into a directory of its own, renamed into place: concurrent test
	// processes each install, and one rename wins.
	tmp, err := os.MkdirTemp(dir, ".install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(goBin, "install", Package+"@"+Version)
	// Its own module: neither this module's workspace nor flags that
	// `go install pkg@version` refuses (-mod) apply.
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install: %v\n%s", err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "aws-lambda-rie"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// cacheDir returns (creating it) the directory name under the user cache
// directory's mcpush-test, where testenv.BuildBinary keeps the servers.
func cacheDir(name string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "mcpush-test", name)
	return dir, os.MkdirAll(dir, 0o755)
}

var bootstraps sync.Map // package path -> func() (string, error)

// Bootstrap builds the main package pkg ("./functions/mcp") as a Lambda
// bootstrap for linux and the host's architecture, with the flags of the
// Makefile's LAMBDA_GO (CGO_ENABLED=0, -tags LambdaTags, -trimpath,
// -ldflags=-s -w), once per test process, and returns its path. No -race:
// the production build has no cgo.
func Bootstrap(t testing.TB, pkg string) string {
	t.Helper()
	root := testenv.RepoRoot(t)
	build, _ := bootstraps.LoadOrStore(pkg, sync.OnceValues(func() (string, error) {
		return buildBootstrap(root, pkg)
	}))
	bin, err := build.(func() (string, error))()
	if err != nil {
		t.Fatalf("rie.Bootstrap(%q): %v", pkg, err)
	}
	return bin
}

func buildBootstrap(root, pkg string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root + "\x00" + pkg + "\x00" + LambdaTags))
	dir, err := cacheDir("lambda-" + hex.EncodeToString(sum[:8]))
	if err != nil {
		return "", err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".bootstrap.%d", os.Getpid()))
	cmd := exec.Command(goBin, "build", "-tags", LambdaTags, "-trimpath", "-ldflags=-s -w", "-o", tmp, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
	}
	// The emulator runs the file it is given; name it as Lambda does.
	bin := filepath.Join(dir, path.Base(pkg), "bootstrap")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	return bin, os.Rename(tmp, bin)
}

// Emulator is one aws-lambda-rie process running one bootstrap. Its
// sandbox starts (init) on the first invocation and then serves one
// invocation at a time, as one Lambda execution environment does; a
// failed init is retried at the next invocation, as Lambda does.
type Emulator struct {
	// URL is the invoke API's base ("http://127.0.0.1:PORT").
	URL string
	// Out holds the emulator's and the function's stdout and stderr:
	// the emulator's START/END/REPORT lines and the function's logs.
	Out *testutil.LockedBuffer
	cmd *exec.Cmd
}

// Start runs bootstrap under the emulator with env added to the test's
// environment less its MCPUSH_* and AWS_* variables (the emulator passes
// its whole environment to the function). Both of the emulator's
// listeners are on loopback ports of their own: the invoke API
// (--runtime-interface-emulator-address, 0.0.0.0:8080 by default) and the
// Runtime API the function polls (--runtime-api-address, 127.0.0.1:9001
// by default), so that emulators can run side by side. The function's
// timeout is 60 s (AWS_LAMBDA_FUNCTION_TIMEOUT; the emulator's default is
// 300 s) unless env sets it, and the AWS SDK looks for no instance
// metadata service (AWS_EC2_METADATA_DISABLED=true). The
// emulator is stopped when the test ends (SIGTERM, which stops the
// function; then SIGKILL to its process group), and its output is logged
// if the test failed.
func Start(t testing.TB, bootstrap string, env ...string) *Emulator {
	t.Helper()
	rie := Binary(t)
	invokeAddr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	runtimeAddr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	e := &Emulator{URL: "http://" + invokeAddr, Out: &testutil.LockedBuffer{}}
	e.cmd = exec.Command(rie, "--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", runtimeAddr, "--log-level", "info", bootstrap)
	e.cmd.Dir = t.TempDir()
	e.cmd.Env = lambdatest.Environ("mcpush-rie", append([]string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT=60",
		// No instance metadata service on loopback: never look for one.
		"AWS_EC2_METADATA_DISABLED=true",
	}, env...)...)
	e.cmd.Stdout, e.cmd.Stderr = e.Out, e.Out
	// Its own process group, killed as one (the function is its
	// child), and dead with the test process.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { e.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
		syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("aws-lambda-rie %s output:\n%s", filepath.Base(filepath.Dir(bootstrap)), e.Out.String())
		}
	})
	// The invoke API answers once the emulator listens (it starts the
	// function only at the first invocation).
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", invokeAddr, time.Second)
		if err == nil {
			c.Close()
			return e
		}
		select {
		case <-exited:
			t.Fatalf("aws-lambda-rie exited at start-up: %v\n%s", e.cmd.ProcessState, e.Out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("aws-lambda-rie does not listen on %s after 20 s: %v\n%s", invokeAddr, err, e.Out.String())
		}
	}
}

// Result is the invoke API's answer to one invocation.
type Result struct {
	// Status is 200 for a result or a function error (then Body is the
	// error document, {"errorMessage","errorType"}; the emulator sets no
	// X-Amz-Function-Error), 502 for an init failure (an InitError
	// document) or a function that exited.
	Status int
	Body   []byte
}

// Err returns nil when r is the function's result, and otherwise an error
// carrying the answer: a status other than 200 (an init failure, a
// function that exited), or a 200 whose body is an error document (a
// function error: a JSON object with a non-empty errorType or
// errorMessage, which Lambda would mark with X-Amz-Function-Error).
func (r Result) Err() error {
	if r.Status != http.StatusOK {
		return fmt.Errorf("rie: invoke API answered %d: %s", r.Status, r.Body)
	}
	var doc struct{ ErrorMessage, ErrorType string }
	if json.Unmarshal(r.Body, &doc) == nil && (doc.ErrorMessage != "" || doc.ErrorType != "") {
		return fmt.Errorf("rie: function error: %s", r.Body)
	}
	return nil
}

// Invoke posts event to the emulator's invoke API and returns its answer
// (at most 90 s: past the function's 60 s timeout).
func (e *Emulator) Invoke(t testing.TB, event []byte) Result {
	t.Helper()
	client := &http.Client{Timeout: 90 * time.Second}
	resp, err := client.Post(e.URL+InvokePath, "application/json", bytes.NewReader(event))
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("invoke: reading the answer: %v", err)
	}
	return Result{Status: resp.StatusCode, Body: body}
}

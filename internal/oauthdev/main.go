// Command oauthdev runs mcpush with OAuth on one machine (`make
// run-oauth`): it starts the authorization server the tests use
// (internal/oauthtest: panva's oidc-provider from test/node, on a free
// loopback port), registers a confidential client for the
// client-credentials grant and accepts dynamic registration for the
// browser flow, prints how to sign in with `mcpush login`, and runs the
// MCP server command it is given with MCPUSH_AUTH=oauth,
// MCPUSH_OAUTH_ISSUER and MCPUSH_OAUTH_SCOPES set, until that command
// exits or Ctrl-C.
//
//	go run ./internal/oauthdev [-addr 127.0.0.1:8080] -- COMMAND [ARG...]
//
// It is a development tool: the authorization server signs in anyone who
// types a name into its login form.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/mcpush/mcpush/internal/oauthtest"
)

// Scope is the scope the server requires and the clients get.
const Scope = "mcp:tools"

// ClientID is the confidential client for `mcpush login --client-secret`.
const ClientID = "mcpush-dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "oauthdev: %v\n", err)
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			os.Exit(ee.ExitCode())
		}
		os.Exit(1)
	}
}

// run starts the authorization server, prints the sign-in commands to
// stdout and runs the command in args until it exits or ctx ends (then
// the command gets SIGTERM).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("oauthdev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "the MCP server's address (default: $MCPUSH_ADDR, else 127.0.0.1:8080)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("usage: oauthdev [-addr HOST:PORT] -- COMMAND [ARG...] (the MCP server to run)")
	}
	if *addr == "" {
		*addr = os.Getenv("MCPUSH_ADDR")
	}
	if *addr == "" {
		*addr = "127.0.0.1:8080"
	}
	dir, err := os.MkdirTemp("", "mcpush-oauthdev-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	secret := rand.Text()
	as, err := oauthtest.Launch(dir, &oauthtest.Options{
		Scopes:  []string{Scope},
		Clients: []oauthtest.Client{{ID: ClientID, Secret: secret, Scope: Scope}},
	})
	if err != nil {
		return err
	}
	defer as.Close()
	url := "http://" + *addr + "/mcp"
	fmt.Fprintf(stdout, `authorization server: %s (development only: its login form signs in any name)
MCP server: %s with MCPUSH_AUTH=oauth MCPUSH_OAUTH_ISSUER=%s MCPUSH_OAUTH_SCOPES=%s
sign in, in another terminal:
  mcpush login --url %s                       # in the browser: type any name
  mcpush login --url %s --client-id %s --client-secret %s   # no browser
then: mcpush tools --url %s
`, as.Issuer, url, as.Issuer, Scope, url, url, ClientID, secret, url)

	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Env = append(os.Environ(), "MCPUSH_ADDR="+*addr, "MCPUSH_AUTH=oauth",
		"MCPUSH_OAUTH_ISSUER="+as.Issuer, "MCPUSH_OAUTH_SCOPES="+Scope)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		cmd.Process.Signal(syscall.SIGTERM)
		if err := <-done; err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) && !ee.Exited() {
				return nil // ended by the signal
			}
			return err
		}
		return nil
	}
}

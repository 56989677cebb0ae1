// Command mcpush is a command-line MCP client for mcpush (and any MCP
// server over Streamable HTTP), and an SNS publisher:
//
//	mcpush tools
//	mcpush call NAME key=value ...
//	mcpush watch [--topic T ...] [--json]
//	mcpush publish --topic-arn ARN --message M [--endpoint-url URL]
//	mcpush login [--client-id ID [--client-secret S]]
//	mcpush events list|poll|stream|subscribe|unsubscribe|receive|secret ...
//
// The server URL comes from --url or MCPUSH_URL, else it is the local
// server, http://127.0.0.1:8080/mcp. Flags go anywhere after mcpush; --
// ends them. Run mcpush -h for the commands and flags, mcpush help COMMAND
// (or COMMAND --help) for one command's (help.go). This main only reads
// the environment and wires; cli.go does the work.
package main

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"golang.org/x/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &env{
		stdout:        os.Stdout,
		stderr:        os.Stderr,
		url:           os.Getenv("MCPUSH_URL"),
		webhookSecret: os.Getenv("MCPUSH_WEBHOOK_SECRET"),
		tty:           term.IsTerminal(int(os.Stderr.Fd())),
		width: func() int {
			w, _, err := term.GetSize(int(os.Stderr.Fd()))
			if err != nil {
				return 0
			}
			return w
		},
		loginsPath:  loginsPath(),
		openBrowser: openBrowser,
		awsConfig: func(ctx context.Context, region string) (aws.Config, error) {
			var opts []func(*config.LoadOptions) error
			if region != "" {
				opts = append(opts, config.WithRegion(region))
			}
			return config.LoadDefaultConfig(ctx, opts...)
		},
	}
	os.Exit(run(ctx, os.Args[1:], env))
}

// loginsPath is $MCPUSH_LOGINS, else mcpush/logins.json in the user's
// config directory; "" if there is none.
func loginsPath() string {
	if p := os.Getenv("MCPUSH_LOGINS"); p != "" {
		return p
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "mcpush", "logins.json")
}

// openBrowser opens url in the user's browser (xdg-open, open); the URL
// is printed too, so a failure here is not fatal.
func openBrowser(url string) error {
	for _, name := range []string{"xdg-open", "open"} {
		if p, err := exec.LookPath(name); err == nil {
			return exec.Command(p, url).Start()
		}
	}
	return nil
}

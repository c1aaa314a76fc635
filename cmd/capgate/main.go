// Command capgate is the capgate sidecar: A2A gateway, Envoy ext_authz server
// and the tools around its capability registry. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin})
	stop()
	os.Exit(code)
}

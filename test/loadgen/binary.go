package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// buildCapgate builds cmd/capgate into dir: the memory test measures the
// binary operators run, not this generator with the server linked in.
func buildCapgate(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "capgate")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/capgate/capgate/cmd/capgate")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build capgate: %w", err)
	}
	return bin, nil
}

// startCapgateBinary runs `capgate serve --config config --only extauthz`
// pinned to the server CPU with GOMAXPROCS=1, and waits until its log says
// it is serving; the listener addresses come from its "listening" lines.
func startCapgateBinary(ctx context.Context, bin, config string) (*child, error) {
	return startCapgateOnly(ctx, bin, config, "extauthz", os.Stderr)
}

// startCapgateOnly is startCapgateBinary with `--only only` ("extauthz" or
// "gateway") and the child's stderr to stderr; the child's addr is that
// server's.
func startCapgateOnly(ctx context.Context, bin, config, only string, stderr io.Writer) (*child, error) {
	args := []string{"serve", "--config", config, "--only", only, "--log-level", "info"}
	cmd := serverCommand(bin, args)
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{name: "capgate", cmd: cmd, exited: make(chan struct{}), signal: syscall.SIGTERM}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct{ Msg, Server, Addr, Limit, Source string }
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch {
			case line.Msg == "listening" && line.Server == only:
				c.addr = line.Addr
			case line.Msg == "listening" && line.Server == "admin":
				c.admin = line.Addr
			case line.Msg == "memory limit":
				c.memLimit = line.Limit + " (" + line.Source + ")"
			case line.Msg == "capgate serving":
				close(ready)
			}
		}
	}()
	if err := c.awaitReady(ctx, ready); err != nil {
		return nil, err
	}
	if c.addr == "" {
		c.stop()
		return nil, fmt.Errorf("capgate serving without its %s listener in its log", only)
	}
	return c, nil
}

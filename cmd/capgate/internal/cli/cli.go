// Package cli implements capgate's subcommands.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
)

// Exit codes.
const (
	ExitOK    = 0 // success
	ExitCheck = 1 // a check failed: validation problems, findings, failing tests
	ExitUsage = 2 // usage or input error
)

// Env is the process environment a command runs in.
type Env struct {
	Stdout, Stderr io.Writer
	Stdin          io.Reader
}

// exitError carries an exit code with the error to print.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr is an input or usage error (exit 2).
func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// checkFailed is a failed check (exit 1); the command has already printed
// what failed, err is the one-line summary.
func checkFailed(format string, args ...any) error {
	return &exitError{code: ExitCheck, err: fmt.Errorf(format, args...)}
}

type command struct {
	summary string
	run     func(ctx context.Context, env Env, args []string) error
}

func commands() map[string]command {
	return map[string]command{
		"serve":    {"run the A2A gateway, ext_authz server and admin listener", runServe},
		"validate": {"validate config, manifests and policy modules", runValidate},
		"card":     {"print a card; `card lock` / `card check` for CI", runCard},
		"explain":  {"show why each capability is visible or entitled for a caller", runExplain},
		"access":   {"access review: `access matrix` (who can do what), `access diff` (what a change does to it), `access replay` (what it does to recorded traffic)", runAccess},
		"compile":  {"write an OPA bundle of the deployment", runCompile},
		"policy":   {"policy tooling: test, check, fmt", runPolicy},
		"token":    {"mint a token: with the example's DEMO keys, or --key from `keys generate`", runToken},
		"keys":     {"`keys generate`: a signing key and its JWKS for a deployment's own tokens", runKeys},
		"route":    {"show how a message would be routed; `route eval` measures the router", runRoute},
		"version":  {"print the version", runVersion},

		"lifecycle": {"list capabilities with usage; which deprecated ones are safe to remove", runLifecycle},
	}
}

// Run executes the command line args and returns the process exit code.
func Run(ctx context.Context, args []string, env Env) int {
	cmds := commands()
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args = []string{"version"}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stderr, cmds)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		_, _ = fmt.Fprintf(env.Stderr, "capgate: unknown command %q\n\n", args[0])
		usage(env.Stderr, cmds)
		return ExitUsage
	}
	err := cmd.run(ctx, env, args[1:])
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		_, _ = fmt.Fprintf(env.Stderr, "capgate %s: %v\n", args[0], ee.err)
		return ee.code
	}
	_, _ = fmt.Fprintf(env.Stderr, "capgate %s: %v\n", args[0], err)
	return ExitUsage
}

func usage(w io.Writer, cmds map[string]command) {
	_, _ = fmt.Fprintln(w, "usage: capgate <command> [flags]")
	_, _ = fmt.Fprintln(w)
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		_, _ = fmt.Fprintf(w, "  %-9s %s\n", n, cmds[n].summary)
	}
	_, _ = fmt.Fprintln(w, "\nRun `capgate <command> -h` for a command's flags. Without --config the embedded")
	_, _ = fmt.Fprintln(w, "finance example is used.")
}

// newFlags makes a flag set that reports errors instead of exiting.
func newFlags(env Env, name, usageLine string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(env.Stderr, "usage: capgate %s\n", usageLine)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags and refuses stray positional arguments unless allowed.
func parse(fs *flag.FlagSet, args []string, maxArgs int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: ExitUsage, err: err}
	}
	if fs.NArg() > maxArgs {
		return usageErr("unexpected arguments: %s", strings.Join(fs.Args()[maxArgs:], " "))
	}
	return nil
}

// Version is set at build time with -ldflags "-X .../cli.Version=v1.2.3";
// without it the module version of the build is used (`go install
// ...@v1.2.3`), else "dev".
var Version = ""

func runVersion(_ context.Context, env Env, args []string) error {
	fs := newFlags(env, "version", "version  (also: capgate --version)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	_, err := fmt.Fprintln(env.Stdout, versionLine())
	return err
}

// versionLine is "capgate VERSION (commit C[, modified]) goX.Y.Z": the
// module version, the VCS commit the binary was built from (when the build
// recorded it) and the Go toolchain.
func versionLine() string {
	version, commit, modified := buildVersion()
	line := "capgate " + version
	switch {
	case commit != "" && modified:
		line += " (commit " + commit + ", modified)"
	case commit != "":
		line += " (commit " + commit + ")"
	default:
		line += " (commit unknown)"
	}
	return line + " " + runtime.Version()
}

// buildVersion is the version (Version, else the module version, else
// "dev") and the VCS commit the build recorded.
func buildVersion() (version, commit string, modified bool) {
	version = Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if version == "" {
		version = "dev"
	}
	return version, commit, modified
}

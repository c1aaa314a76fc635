// Package cli implements capgate's subcommands.
package cli

import (
	"bytes"
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

// groups are the subcommands of the commands that are only groups
// ("name  summary" lines): `capgate <group> --help` prints them on
// standard output.
var groups = map[string][]string{
	"access": {
		"matrix  who can see and run each capability (--callers, --markdown, --json, --html)",
		"diff    what a change does to the matrix (--base, --head; fails when a caller gains access)",
		"check   the guarantees an expectations file states (--expect; fails when one breaks)",
	},
	"policy": {
		"test   run the Rego unit tests (--coverage, --threshold N)",
		"check  type-check the policy against the input schema (--strict)",
		"fmt    check or rewrite Rego formatting (--fail, --write)",
	},
	"keys": {
		"generate  a signing key and its JWKS (--alg, --kid, --out)",
	},
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// groupUsage prints a command group's subcommands.
func groupUsage(w io.Writer, name string, sub []string) {
	_, _ = fmt.Fprintf(w, "usage: capgate %s <command> [flags]\n\n", name)
	for _, l := range sub {
		_, _ = fmt.Fprintf(w, "  %s\n", l)
	}
	_, _ = fmt.Fprintf(w, "\nRun `capgate %s <command> -h` for a command's flags.\n", name)
}

func commands() map[string]command {
	return map[string]command{
		"serve":    {"run the A2A gateway, ext_authz server and admin listener", runServe},
		"validate": {"validate config, manifests and policy modules", runValidate},
		"card":     {"print a card; `card lock` / `card check` for CI", runCard},
		"explain":  {"show why each capability is visible or entitled for a caller", runExplain},
		"access":   {"access review: `access matrix` (who can do what), `access diff` (what a change does to it), `access check` (what must hold), `access replay` (what it does to recorded traffic)", runAccess},
		"compile":  {"write an OPA bundle of the deployment", runCompile},

		"ratelimit-config": {"write the config of Envoy's global rate-limit service for the deployment's quotas", runRateLimitConfig},
		"policy":           {"policy tooling: test, check, fmt", runPolicy},
		"token":            {"mint a token: with the example's DEMO keys, or --key from `keys generate`", runToken},
		"keys":             {"`keys generate`: a signing key and its JWKS for a deployment's own tokens", runKeys},
		"route":            {"show how a message would be routed; `route eval` measures the router", runRoute},
		"version":          {"print the version", runVersion},

		"lifecycle": {"list capabilities with usage; which deprecated ones are safe to remove", runLifecycle},
	}
}

// Run executes the command line args and returns the process exit code.
func Run(ctx context.Context, args []string, env Env) int {
	cmds := commands()
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args = []string{"version"}
	}
	if len(args) == 0 {
		usage(env.Stderr, cmds)
		return ExitUsage
	}
	if isHelp(args[0]) {
		// Asked for: on standard output, success (`capgate --help | less`).
		usage(env.Stdout, cmds)
		return ExitOK
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		_, _ = fmt.Fprintf(env.Stderr, "capgate: unknown command %q\n\n", args[0])
		usage(env.Stderr, cmds)
		return ExitUsage
	}
	if sub, ok := groups[args[0]]; ok && len(args) > 1 && isHelp(args[1]) {
		groupUsage(env.Stdout, args[0], sub)
		return ExitOK
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

// newFlags makes a flag set that reports errors instead of exiting. Its
// usage goes to standard output when asked for (-h, --help), to standard
// error after a flag error (see parse).
func newFlags(env Env, name, usageLine string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(&usageOut{stdout: env.Stdout, stderr: env.Stderr})
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "usage: capgate %s\n", usageLine)
		fs.PrintDefaults()
	}
	return fs
}

// usageOut holds what the flag package writes while parsing (the error,
// the usage) until parse knows whether help was asked for.
type usageOut struct {
	buf            bytes.Buffer
	stdout, stderr io.Writer
}

func (u *usageOut) Write(p []byte) (int, error) { return u.buf.Write(p) }

// flush writes what was held to w.
func (u *usageOut) flush(w io.Writer) {
	_, _ = w.Write(u.buf.Bytes())
	u.buf.Reset()
}

// parse parses flags and refuses stray positional arguments unless allowed.
func parse(fs *flag.FlagSet, args []string, maxArgs int) error {
	err := fs.Parse(args)
	if u, ok := fs.Output().(*usageOut); ok {
		if errors.Is(err, flag.ErrHelp) {
			u.flush(u.stdout)
		} else {
			u.flush(u.stderr)
		}
	}
	if err != nil {
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

// Commit is the VCS commit, set at build time with -ldflags "-X
// .../cli.Commit=<sha>" (`make build`, `make image`, `make dist` do), for
// builds that record no VCS information (-buildvcs=false, or a source tree
// without .git, as in a container build). "-modified" at its end marks a
// tree with uncommitted changes. The commit the build recorded wins over it.
var Commit = ""

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
	if commit == "" && Commit != "" {
		commit, modified = strings.CutSuffix(Commit, "-modified")
	}
	if version == "" {
		version = "dev"
	}
	return version, commit, modified
}

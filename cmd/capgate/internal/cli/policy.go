package cli

import (
	"context"
	"fmt"
	"os"
	"sort"

	"github.com/capgate/capgate/policy/regocheck"
	"github.com/capgate/capgate/rego"
)

func runPolicy(ctx context.Context, env Env, args []string) error {
	if len(args) == 0 {
		policyUsage(env)
		return usageErr("give a policy command: test, check or fmt")
	}
	switch args[0] {
	case "-h", "--help", "help":
		policyUsage(env)
		return nil
	case "test":
		return runPolicyTest(ctx, env, args[1:])
	case "check":
		return runPolicyCheck(ctx, env, args[1:])
	case "fmt":
		return runPolicyFmt(ctx, env, args[1:])
	}
	return usageErr("unknown policy command %q (want test, check or fmt)", args[0])
}

func policyUsage(env Env) {
	_, _ = fmt.Fprint(env.Stderr, `usage: capgate policy <command> [flags]

  test   run the Rego unit tests (--coverage, --threshold N)
  check  type-check the policy against the input schema (--strict)
  fmt    check or rewrite Rego formatting (--fail, --write)

Run `+"`capgate policy <command> -h`"+` for a command's flags.
`)
}

func runPolicyTest(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "policy test", "policy test [--coverage] [--threshold 95]")
	cov := fs.Bool("coverage", false, "report coverage of the policy")
	threshold := fs.Float64("threshold", 0, "fail when coverage is below this percentage (implies --coverage)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	res, err := regocheck.RunTests(ctx, env.Stdout, *cov || *threshold > 0, *threshold)
	if err != nil {
		return usageErr("%v", err)
	}
	if !res.Pass() {
		msg := fmt.Sprintf("%d passed, %d failed, %d errored", res.Passed, res.Failed, res.Errored)
		if res.CoverageEnabled && res.Coverage < res.Threshold {
			msg += fmt.Sprintf("; coverage %.1f%% is below %.1f%%", res.Coverage, res.Threshold)
		}
		return checkFailed("%s", msg)
	}
	return nil
}

func runPolicyCheck(_ context.Context, env Env, args []string) error {
	fs := newFlags(env, "policy check", "policy check [--strict] [dir ...]  (default: the embedded policy)")
	strict := fs.Bool("strict", false, "strict mode (unused variables, imports, deprecated built-ins are errors)")
	if err := parse(fs, args, 64); err != nil {
		return err
	}
	mods, err := policyModules(fs.Args(), true)
	if err != nil {
		return err
	}
	if _, err := regocheck.Compile(mods, *strict); err != nil {
		if _, werr := fmt.Fprintln(env.Stdout, err); werr != nil {
			return werr
		}
		return checkFailed("policy check failed")
	}
	_, err = fmt.Fprintf(env.Stdout, "ok: %d modules\n", len(mods))
	return err
}

func runPolicyFmt(_ context.Context, env Env, args []string) error {
	fs := newFlags(env, "policy fmt", "policy fmt [--fail | --write] [dir ...]  (default: the embedded policy)")
	fail := fs.Bool("fail", false, "exit 1 when a module is not formatted")
	write := fs.Bool("write", false, "rewrite files in place (only for directories given on the command line or ./rego)")
	if err := parse(fs, args, 64); err != nil {
		return err
	}
	dirs := fs.Args()
	if *write && len(dirs) == 0 {
		dirs = []string{"rego"}
	}
	mods, err := policyModules(dirs, true)
	if err != nil {
		return err
	}
	changed, err := regocheck.Format(mods)
	if err != nil {
		return checkFailed("%v", err)
	}
	sort.Strings(changed)
	for _, p := range changed {
		if _, err := fmt.Fprintln(env.Stdout, p); err != nil {
			return err
		}
	}
	if *write {
		for _, p := range changed {
			formatted, err := regocheck.FormatSource(p, mods[p])
			if err != nil {
				return checkFailed("%v", err)
			}
			if err := os.WriteFile(p, formatted, 0o644); err != nil {
				return usageErr("write %s: %v", p, err)
			}
		}
		return nil
	}
	if *fail && len(changed) > 0 {
		return checkFailed("%d module(s) need formatting", len(changed))
	}
	return nil
}

// policyModules reads .rego files from dirs, or the embedded policy and its
// tests when no dir is given.
func policyModules(dirs []string, withTests bool) (map[string]string, error) {
	if len(dirs) == 0 {
		mods, err := rego.Modules()
		if err != nil {
			return nil, err
		}
		if withTests {
			tests, err := rego.Tests()
			if err != nil {
				return nil, err
			}
			for k, v := range tests {
				mods[k] = v
			}
		}
		return mods, nil
	}
	mods := map[string]string{}
	for _, d := range dirs {
		m, err := regocheck.ReadDir(d)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		for k, v := range m {
			mods[k] = v
		}
	}
	return mods, nil
}

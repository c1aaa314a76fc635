package cli

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/delegation"
	"github.com/capgate/capgate/sidecar/settings"
)

func runValidate(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "validate", "validate [--config capgate.yaml] [--strict]")
	cfgPath := fs.String("config", "", "deployment config (default: the embedded finance example)")
	strict := fs.Bool("strict", false, "fail (exit 1) on warnings too (deprecated spellings, scopes nothing grants): for CI")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	d, err := deployment.Load(*cfgPath, settings.Checks()...)
	if err != nil {
		var set *diag.Set
		if errors.As(err, &set) {
			if _, werr := fmt.Fprintln(env.Stdout, set.Error()); werr != nil {
				return werr
			}
			return checkFailed("%d problem(s) found", len(set.Problems))
		}
		return &exitError{code: ExitUsage, err: err}
	}
	// Preparing the engine compiles the policy with the data: part of validation.
	if _, err := newEngine(ctx, d); err != nil {
		return checkFailed("%v", err)
	}
	// The keys serve reads, through the constructors serve uses, so the
	// messages are the same: the handler-token signing key and the token
	// exchange client secret (the JWKS files are checked with the config).
	if _, _, err := delegation.FromConfig(ctx, d.Config, zap.NewNop()); err != nil {
		_, _ = fmt.Fprintln(env.Stdout, err)
		return checkFailed("1 problem(s) found")
	}
	if err := decisionlog.Check(d.Config.Services, d.Config.DecisionLogs); err != nil {
		_, _ = fmt.Fprintln(env.Stdout, err)
		return checkFailed("1 problem(s) found")
	}
	for _, w := range d.Warnings {
		_, _ = fmt.Fprintln(env.Stderr, "warning:", w)
	}
	if *strict && len(d.Warnings) > 0 {
		return checkFailed("%d warning(s), failing as --strict asks", len(d.Warnings))
	}
	_, err = fmt.Fprintf(env.Stdout, "ok: %d capabilities, policy revision %s\n", d.Registry().Len(), d.Snapshot.Revision)
	return err
}

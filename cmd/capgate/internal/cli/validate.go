package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/policy/diag"
)

func runValidate(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "validate", "validate [--config capgate.yaml]")
	cfgPath := fs.String("config", "", "deployment config (default: the embedded finance example)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	d, err := deployment.Load(*cfgPath)
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
	for _, w := range d.Warnings {
		_, _ = fmt.Fprintln(env.Stderr, "warning:", w)
	}
	_, err = fmt.Fprintf(env.Stdout, "ok: %d capabilities, policy revision %s\n", d.Registry().Len(), d.Snapshot.Revision)
	return err
}

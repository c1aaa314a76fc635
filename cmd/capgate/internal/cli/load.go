package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/go-json-experiment/json"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/settings"
)

// loadDeployment loads the config at path (embedded default when empty).
// Validation problems are an input error here (exit 2); `validate` maps them
// to a failed check instead.
func loadDeployment(path string) (*deployment.Deployment, error) {
	d, err := deployment.Load(path, settings.Checks()...)
	if err != nil {
		var set *diag.Set
		if errors.As(err, &set) {
			return nil, &exitError{code: ExitUsage, err: fmt.Errorf("invalid deployment:\n%w", err)}
		}
		return nil, &exitError{code: ExitUsage, err: err}
	}
	return d, nil
}

// newEngine prepares the policy engine for a loaded deployment.
func newEngine(ctx context.Context, d *deployment.Deployment) (*engine.Engine, error) {
	e, err := engine.New(ctx, d.Snapshot)
	if err != nil {
		return nil, fmt.Errorf("prepare policy: %w", err)
	}
	return e, nil
}

// readClaims reads a JWT claims object from a file ("-" for stdin).
func readClaims(env Env, path string) (map[string]any, error) {
	var (
		b   []byte
		err error
	)
	if path == "-" {
		b, err = readAllLimited(env.Stdin, 1<<20)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usageErr("read claims: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(b, &claims); err != nil || claims == nil {
		return nil, usageErr("claims %s: not a JSON object of JWT claims (duplicate keys are refused)", path)
	}
	return claims, nil
}

// callerFor turns claims into the policy's caller. No claims: anonymous.
// The claim names are the deployment's (auth.scopes_claim, tenant_claim).
func callerFor(auth config.Auth, claims map[string]any) engine.Caller {
	if claims == nil {
		return engine.Caller{}
	}
	return identity.PrincipalFromClaims(auth, claims).Caller()
}

// loadForCaller loads the deployment, prepares its engine and reads the
// caller from an optional claims file (anonymous without one).
func loadForCaller(ctx context.Context, env Env, cfgPath, claimsPath string) (*deployment.Deployment, *engine.Engine, engine.Caller, error) {
	d, err := loadDeployment(cfgPath)
	if err != nil {
		return nil, nil, engine.Caller{}, err
	}
	var claims map[string]any
	if claimsPath != "" {
		if claims, err = readClaims(env, claimsPath); err != nil {
			return nil, nil, engine.Caller{}, err
		}
	}
	e, err := newEngine(ctx, d)
	if err != nil {
		return nil, nil, engine.Caller{}, err
	}
	return d, e, callerFor(d.Config.Auth, claims), nil
}

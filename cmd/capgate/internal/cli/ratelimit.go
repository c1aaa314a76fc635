package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/capgate/capgate/policy/ratelimit"
)

// runRateLimitConfig writes the configuration of Envoy's global rate-limit
// service (envoyproxy/ratelimit) for the deployment's quotas: its plans and
// its capabilities' own rates.
func runRateLimitConfig(_ context.Context, env Env, args []string) error {
	fs := newFlags(env, "ratelimit-config", "ratelimit-config [--config capgate.yaml] [--out capgate.yaml]")
	cfgPath := fs.String("config", "", "deployment config (default: the embedded finance example)")
	out := fs.String("out", "", "file to write (default: standard output)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	d, err := loadDeployment(*cfgPath)
	if err != nil {
		return err
	}
	var caps []ratelimit.Capability
	for _, c := range d.Registry().All() {
		caps = append(caps, ratelimit.Capability{ID: c.ID, Rate: c.Quota.Rate})
	}
	limits, err := ratelimit.Limits(quotaPlans(d.Snapshot), caps)
	if err != nil {
		return checkFailed("%v", err)
	}
	if len(limits) == 0 {
		return checkFailed("the deployment declares no quotas (quotas.plans, a capability's quota.rate): nothing for the rate-limit service to count")
	}
	cfg, err := ratelimit.Config(limits)
	if err != nil {
		return checkFailed("%v", err)
	}
	data, err := ratelimit.Render(cfg)
	if err != nil {
		return checkFailed("%v", err)
	}
	// What is written is what the service would load.
	if _, err := ratelimit.Parse(data); err != nil {
		return checkFailed("the generated rate-limit config does not load: %v", err)
	}
	if *out == "" {
		_, err := env.Stdout.Write(data)
		return err
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		return usageErr("write %s: %v", *out, err)
	}
	_, _ = fmt.Fprintf(env.Stdout, "wrote %s: domain %s, %d quotas\n", *out, cfg.GetDomain(), len(cfg.GetDescriptors()))
	return nil
}

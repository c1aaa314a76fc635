package cli

import (
	"context"
	"os"
	"path/filepath"

	"github.com/capgate/capgate/policy/access"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/engine"
)

// runAccessCheck evaluates an access expectations file against a
// deployment's compiled policy: exit 0 when every expectation holds, 1
// when one fails (each failure names the expectation, the cell and the
// rule that broke it), 2 on a usage or input error.
func runAccessCheck(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "access check", "access check --expect expectations.yaml [--config SOURCE] [--callers callers.yaml] [--json]\n"+
		"SOURCE: a deployment config (default: the embedded finance example), an OPA bundle built by `capgate compile`, or git:REV[:path/to/capgate.yaml] of the repository in the working directory")
	expectPath := fs.String("expect", "", "the expectations file (YAML; see docs/policy.md, \"Access expectations\")")
	source := fs.String("config", "", "the deployment to check")
	callersPath := fs.String("callers", "", "caller classes: a callers file (default: the expectations file's callers, else derived from the registry)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *expectPath == "" {
		return usageErr("--expect is required")
	}
	b, err := os.ReadFile(*expectPath)
	if err != nil {
		return usageErr("read expectations: %v", err)
	}
	x, err := access.ParseExpectations(*expectPath, b)
	if err != nil {
		return usageErr("%v", err)
	}
	var s side
	if *source == "" {
		d, err := loadDeployment("")
		if err != nil {
			return err
		}
		s = side{snap: d.Snapshot, auth: d.Config.Auth}
	} else if s, err = loadSide(ctx, *source, func() (config.Auth, error) {
		d, err := loadDeployment("")
		if err != nil {
			return config.Auth{}, err
		}
		return d.Config.Auth, nil
	}); err != nil {
		return err
	}
	toCaller := func(claims map[string]any) engine.Caller { return callerFor(s.auth, claims) }
	var classes []access.Class
	switch {
	case *callersPath != "":
		if classes, err = reviewClasses(*callersPath, s); err != nil {
			return err
		}
	case x.CallersFile != "":
		path := x.CallersFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(*expectPath), path)
		}
		if classes, err = reviewClasses(path, s); err != nil {
			return err
		}
	case len(x.Callers) > 0:
		classes = access.Classes(x.Callers, toCaller)
	default:
		classes = access.Derive(s.snap)
	}
	classes = append(classes, x.ClaimsClasses(toCaller)...)
	m, err := s.matrix(ctx, classes)
	if err != nil {
		return err
	}
	r, err := access.Check(x, m, s.snap.Registry)
	if err != nil {
		return usageErr("%s: %v", *expectPath, err)
	}
	r.File = *expectPath
	r.Provenance = provenance(*source)
	write := access.WriteCheckText
	if *asJSON {
		write = access.WriteCheckJSON
	}
	if err := write(env.Stdout, r); err != nil {
		return err
	}
	if n := r.Failed(); n > 0 {
		return checkFailed("%d of %d expectation(s) failed", n, len(r.Outcomes))
	}
	return nil
}

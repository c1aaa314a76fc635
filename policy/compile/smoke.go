package compile

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"

	"github.com/capgate/capgate/policy/manifest"
)

// smoke evaluates the policy over the store the engine will use before
// anything is published:
// both sets for an anonymous caller (every capability's visibility and
// entitlement rules run) and the decision for one capability. It catches
// runtime conflicts the compiler cannot see. It deliberately avoids the
// explain rule, whose cost grows quadratically with the registry.
func smoke(reg *manifest.Registry, c *ast.Compiler, store storage.Store) error {
	ctx := context.Background()
	rs, err := rego.New(rego.Query("visible := data.capgate.authz.visible; entitled := data.capgate.authz.entitled"),
		rego.Compiler(c), rego.Store(store), rego.Input(map[string]any{})).Eval(ctx)
	if err != nil {
		return fmt.Errorf("evaluate policy over data: %w", err)
	}
	if len(rs) != 1 {
		return errors.New("evaluate policy over data: visible or entitled is undefined")
	}
	var errs []error
	for _, name := range []string{"visible", "entitled"} {
		ids, ok := rs[0].Bindings[name].([]any)
		if !ok {
			errs = append(errs, fmt.Errorf("evaluate policy over data: %s is not a set", name))
			continue
		}
		for _, x := range ids {
			if id, _ := x.(string); reg.Index(id) < 0 {
				errs = append(errs, fmt.Errorf("evaluate policy over data: %s holds unknown capability %v", name, x))
			}
		}
	}
	if reg.Len() == 0 {
		return errors.Join(errs...)
	}
	id := reg.All()[0].ID
	rs, err = rego.New(rego.Query("data.capgate.authz.decision"), rego.Compiler(c), rego.Store(store),
		rego.Input(map[string]any{"capability": id})).Eval(ctx)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("evaluate policy over data: %w", err))
	case len(rs) != 1 || len(rs[0].Expressions) != 1:
		errs = append(errs, fmt.Errorf("evaluate policy over data: no decision for %s", id))
	default:
		d, _ := rs[0].Expressions[0].Value.(map[string]any)
		if exists, _ := d["exists"].(bool); !exists {
			errs = append(errs, fmt.Errorf("evaluate policy over data: the policy does not see capability %s", id))
		}
	}
	return errors.Join(errs...)
}

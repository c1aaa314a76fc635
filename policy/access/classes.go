package access

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/engine"
)

// OtherTenant is the tenant of the derived "other-tenant" class, unless a
// manifest lists it (then a suffix is added).
const OtherTenant = "other-tenant"

// Derive enumerates caller classes from the snapshots' registries and
// settings (all of them together, so that both sides of a diff are asked
// about the same callers):
//
//   - anonymous: no token;
//   - authenticated: a token without scopes or tenant;
//   - scopes:S, one per distinct non-empty requires_scopes set S of some
//     manifest, with no tenant; for a manifest with requires_any_of, one per
//     alternative A instead, S = requires_scopes ∪ A (each set that grants
//     it);
//   - all-scopes: the union of every required scope, no tenant (when it
//     differs from every single set);
//   - tenant:T, one per tenant T that a manifest lists or that is a preview
//     tenant, with all scopes;
//   - other-tenant: all scopes and a tenant nothing lists;
//   - preview: all scopes and the preview scope (auth.preview_scope), no
//     tenant: opted in to previews (only when a preview scope is set; a
//     preview tenant opts in its tenant:T class);
//   - plan:P, one per quota plan P whose grant names scopes, tenants or
//     issuers: every scope, the plan's scopes, and its first tenant and
//     issuer, so the reports show that plan's quotas for its callers.
//
// Subjects are not enumerated: deny modules that read the subject need a
// callers file naming it.
func Derive(snaps ...*compile.Snapshot) []Class {
	scopeSets := map[string][]string{}
	all := map[string]bool{}
	tenants := map[string]bool{}
	previewScopes := map[string]bool{}
	for _, s := range snaps {
		if s.Settings.PreviewScope != "" {
			previewScopes[s.Settings.PreviewScope] = true
		}
		for _, t := range s.Settings.PreviewTenants {
			tenants[t] = true
		}
		for _, c := range s.Registry.All() {
			for _, set := range c.ScopeSets() {
				if len(set) > 0 {
					scopeSets[strings.Join(set, " ")] = set
				}
				for _, sc := range set {
					all[sc] = true
				}
			}
			for _, t := range c.Tenants.List {
				tenants[t] = true
			}
		}
	}
	union := slices.Sorted(func(yield func(string) bool) {
		for s := range all {
			if !yield(s) {
				return
			}
		}
	})
	classes := []Class{
		{Name: "anonymous", Description: "no token"},
		{Name: "authenticated", Description: "a token without scopes or tenant", Caller: engine.Caller{Authenticated: true}},
	}
	for _, key := range sortedKeys(scopeSets) {
		classes = append(classes, Class{
			Name:        "scopes:" + strings.ReplaceAll(key, " ", "+"),
			Description: "holds the scopes a manifest requires, no tenant",
			Caller:      engine.Caller{Authenticated: true, Scopes: scopeSets[key]},
		})
	}
	if _, single := scopeSets[strings.Join(union, " ")]; len(union) > 0 && !single {
		classes = append(classes, Class{Name: "all-scopes", Description: "holds every scope any manifest requires, no tenant",
			Caller: engine.Caller{Authenticated: true, Scopes: union}})
	}
	for _, t := range sortedKeys(tenants) {
		classes = append(classes, Class{Name: "tenant:" + t, Description: "a listed tenant, with every scope",
			Caller: engine.Caller{Authenticated: true, Tenant: t, Scopes: union}})
	}
	other := OtherTenant
	for i := 1; tenants[other]; i++ {
		other = fmt.Sprintf("%s-%d", OtherTenant, i)
	}
	classes = append(classes,
		Class{Name: "other-tenant", Description: "a tenant no manifest lists, with every scope",
			Caller: engine.Caller{Authenticated: true, Tenant: other, Scopes: union}},
	)
	if len(previewScopes) > 0 {
		opted := slices.Clone(union)
		for sc := range previewScopes {
			if !slices.Contains(opted, sc) {
				opted = append(opted, sc)
			}
		}
		slices.Sort(opted)
		classes = append(classes, Class{Name: "preview", Description: "opted in to previews by the preview scope, with every scope, no tenant",
			Caller: engine.Caller{Authenticated: true, Scopes: opted}})
	}
	seen := map[string]bool{}
	for _, s := range snaps {
		if s.Settings.Quotas == nil {
			continue
		}
		for _, p := range s.Settings.Quotas.Plans {
			g := p.Grant
			if seen[p.ID] || len(g.Scopes)+len(g.Tenants)+len(g.Issuers) == 0 {
				continue
			}
			seen[p.ID] = true
			c := engine.Caller{Authenticated: true, Scopes: slices.Sorted(slices.Values(slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(union), g.Scopes...))))))}
			if len(g.Tenants) > 0 {
				c.Tenant = g.Tenants[0]
			}
			if len(g.Issuers) > 0 {
				c.Issuer = g.Issuers[0]
			}
			classes = append(classes, Class{Name: "plan:" + p.ID, Description: "granted quota plan " + p.ID + " (its scopes, first tenant and issuer), with every scope", Caller: c})
		}
	}
	return classes
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// CallerSpec is one named claim set of a callers file.
type CallerSpec struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Claims are the caller's JWT claims; none for an anonymous caller.
	Claims map[string]any `yaml:"claims"`
}

// ParseCallers reads a callers file:
//
//	callers:
//	  - name: partner-acme
//	    description: partner in acme with recon.run
//	    claims: {sub: partner-1, tenant: acme, scope: recon.run}
//
// Unknown keys, a missing or repeated name and an empty list are errors.
func ParseCallers(b []byte) ([]CallerSpec, error) {
	var doc struct {
		Callers []CallerSpec `yaml:"callers"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("callers: %w", err)
	}
	var errs []error
	if len(doc.Callers) == 0 {
		errs = append(errs, errors.New("callers: the list is empty"))
	}
	seen := map[string]bool{}
	for i, c := range doc.Callers {
		switch {
		case c.Name == "":
			errs = append(errs, fmt.Errorf("callers[%d]: name is required", i))
		case seen[c.Name]:
			errs = append(errs, fmt.Errorf("callers[%d]: name %q is used twice", i, c.Name))
		}
		seen[c.Name] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return doc.Callers, nil
}

// Classes turns callers into classes, reading each claim set as the
// deployment reads a token's (toCaller); a spec without claims is anonymous.
func Classes(specs []CallerSpec, toCaller func(claims map[string]any) engine.Caller) []Class {
	out := make([]Class, len(specs))
	for i, s := range specs {
		out[i] = Class{Name: s.Name, Description: s.Description}
		if len(s.Claims) > 0 {
			out[i].Caller = toCaller(s.Claims)
		}
	}
	return out
}

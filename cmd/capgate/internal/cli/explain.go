package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/policy/access"
	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/manifest"
)

// quotaPlans are the snapshot's plans (to say why a quota applies).
func quotaPlans(s *compile.Snapshot) []compile.Plan {
	if s.Settings.Quotas == nil {
		return nil
	}
	return s.Settings.Quotas.Plans
}

func runExplain(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "explain", "explain [--config capgate.yaml] [--claims claims.json | --token JWT [--verify]] [--capability ID] [--json]\n"+
		"       explain --decision-id ID --decisions FILE [--json]")
	cfgPath := fs.String("config", "", "deployment config (default: the embedded finance example)")
	claimsPath := fs.String("claims", "", "JWT claims of the caller (JSON object; - for stdin); omit for an anonymous caller")
	token := fs.String("token", "", "the caller's JWT (compact form; - for stdin): its claims are read without checking the signature, unless --verify")
	verify := fs.Bool("verify", false, "with --token: verify the token against the config's issuers (signature, issuer, audience, expiry) first")
	capID := fs.String("capability", "", "explain only this capability")
	decisionID := fs.String("decision-id", "", "explain this logged decision (with --decisions)")
	logPath := fs.String("decisions", "", "a decision log: capgate's console log (JSON lines) or OPA decision-log uploads (gzip'd JSON arrays)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *decisionID != "" || *logPath != "" {
		if *decisionID == "" || *logPath == "" {
			return usageErr("--decision-id and --decisions go together")
		}
		return explainLogged(env, *decisionID, *logPath, *asJSON)
	}
	if *claimsPath != "" && *token != "" {
		return usageErr("--claims and --token exclude each other")
	}
	if *verify && *token == "" {
		return usageErr("--verify needs --token")
	}
	d, e, caller, err := loadForCaller(ctx, env, *cfgPath, *claimsPath)
	if err != nil {
		return err
	}
	if *token != "" {
		if caller, err = tokenCaller(ctx, env, d, *token, *verify); err != nil {
			return err
		}
	}
	var decisions []engine.Decision
	if *capID != "" {
		if _, ok := d.Registry().Get(*capID); !ok {
			return usageErr("unknown capability %q", *capID)
		}
		dec, err := e.Decide(ctx, caller, *capID)
		if err != nil {
			return err
		}
		decisions = []engine.Decision{dec}
	} else if decisions, err = e.Explain(ctx, caller); err != nil {
		return err
	}
	if *asJSON {
		return writeExplainJSON(env.Stdout, caller, e.Revision(), decisions, d.Registry(), quotaPlans(d.Snapshot))
	}
	return writeExplainText(env.Stdout, caller, e.Revision(), decisions, d.Registry(), quotaPlans(d.Snapshot))
}

type explainReason struct {
	Rule   string `json:"rule"`
	Effect string `json:"effect"`
	Detail string `json:"detail,omitempty"`
}

type explainEntry struct {
	Capability string         `json:"capability"`
	State      string         `json:"state"`
	Visibility string         `json:"visibility"`
	Visible    bool           `json:"visible"`
	Entitled   bool           `json:"entitled"`
	Reasons    explainReasons `json:"reasons"`
	Limits     map[string]any `json:"limits,omitempty"`
	// Quotas are the quotas a call would be counted against, and why each
	// applies.
	Quotas []access.QuotaJSON `json:"quotas,omitempty"`
	// Routing is the manifest's routing policy, when it has one.
	Routing manifest.Routing `json:"routing,omitzero"`
}

type explainReasons struct {
	Visible  []explainReason `json:"visible"`
	Entitled []explainReason `json:"entitled"`
}

func toExplainReasons(rs []engine.Reason) []explainReason {
	out := make([]explainReason, 0, len(rs))
	for _, r := range rs {
		out = append(out, explainReason{Rule: r.Rule, Effect: r.Effect, Detail: r.Detail})
	}
	return out
}

// routingOf is the routing policy of a capability of reg (none when unknown).
func routingOf(reg *manifest.Registry, id string) manifest.Routing {
	if m, ok := reg.Get(id); ok {
		return m.Routing
	}
	return manifest.Routing{}
}

// routingLine describes a routing policy: its mode, and its own threshold.
func routingLine(r manifest.Routing) string {
	s := string(r.EffectiveMode())
	if r.MinConfidence > 0 {
		s += fmt.Sprintf(" (min_confidence %g)", r.MinConfidence)
	}
	return s
}

func writeExplainJSON(w io.Writer, c engine.Caller, rev string, ds []engine.Decision, reg *manifest.Registry, plans []compile.Plan) error {
	type callerJSON struct {
		Authenticated bool     `json:"authenticated"`
		Subject       string   `json:"subject"`
		Tenant        string   `json:"tenant"`
		Scopes        []string `json:"scopes"`
	}
	out := struct {
		Revision     string         `json:"revision"`
		Caller       callerJSON     `json:"caller"`
		Capabilities []explainEntry `json:"capabilities"`
	}{Revision: rev, Caller: callerJSON{Authenticated: c.Authenticated, Subject: c.Subject, Tenant: c.Tenant, Scopes: append([]string{}, c.Scopes...)}}
	for _, d := range ds {
		out.Capabilities = append(out.Capabilities, explainEntry{
			Capability: d.Capability, State: d.State, Visibility: d.Visibility,
			Visible: d.Visible, Entitled: d.Entitled,
			Reasons: explainReasons{Visible: toExplainReasons(d.VisibleReasons), Entitled: toExplainReasons(d.EntitledReasons)},
			Limits:  d.Limits,
			Quotas:  access.QuotasJSON(d.Quotas, plans),
			Routing: routingOf(reg, d.Capability),
		})
	}
	return json.MarshalWrite(w, out, jsontext.WithIndent("  "), json.Deterministic(true))
}

func writeExplainText(w io.Writer, c engine.Caller, rev string, ds []engine.Decision, reg *manifest.Registry, plans []compile.Plan) error {
	who := "anonymous caller"
	if c.Authenticated {
		who = fmt.Sprintf("subject %q, tenant %q, scopes [%s]", c.Subject, c.Tenant, strings.Join(c.Scopes, " "))
	}
	if _, err := fmt.Fprintf(w, "caller: %s\npolicy revision: %s\n", who, rev); err != nil {
		return err
	}
	for _, d := range ds {
		if _, err := fmt.Fprintf(w, "\n%s (%s, %s)\n", d.Capability, d.Visibility, d.State); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "  visible:  %-3s %s\n", yesNo(d.Visible), reasonLine(d.VisibleReasons)); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "  entitled: %-3s %s\n", yesNo(d.Entitled), reasonLine(d.EntitledReasons)); err != nil {
			return err
		}
		if len(d.Limits) > 0 {
			if _, err := fmt.Fprintf(w, "  limits:   %s\n", limitsLine(d.Limits)); err != nil {
				return err
			}
		}
		for _, q := range d.Quotas {
			if _, err := fmt.Fprintf(w, "  quota:    %s\n            (%s)\n", access.QuotaLine(q), access.QuotaWhy(q, plans)); err != nil {
				return err
			}
		}
		if r := routingOf(reg, d.Capability); r != (manifest.Routing{}) {
			if _, err := fmt.Fprintf(w, "  routing:  %s\n", routingLine(r)); err != nil {
				return err
			}
		}
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// reasonLine says why: for a yes, the grants; for a no, the refusals
// that decided it, then the grants that a refusal overrides (so a grant
// is never read as the answer): "because scope.missing(recon.run)
// refused it (a refusal overrides the grants state.ga,
// visibility.extended)".
func reasonLine(rs []engine.Reason) string {
	var refused, granted []string
	for _, r := range rs {
		s := r.String()
		if r.Effect == "refuse" {
			refused = append(refused, s)
		} else {
			granted = append(granted, s)
		}
	}
	switch {
	case len(refused) == 0 && len(granted) == 0:
		return "because nothing granted it"
	case len(refused) == 0:
		return "because " + strings.Join(granted, ", ") + " granted it"
	case len(granted) == 0:
		return "because " + strings.Join(refused, ", ") + " refused it"
	}
	return "because " + strings.Join(refused, ", ") + " refused it (a refusal overrides the grants " + strings.Join(granted, ", ") + ")"
}

// limitsLine writes limits as name=value pairs in name order, values as
// JSON.
func limitsLine(l map[string]any) string {
	parts := make([]string, 0, len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		v, err := json.Marshal(l[k], json.Deterministic(true))
		if err != nil {
			v = []byte("?")
		}
		parts = append(parts, k+"="+string(v))
	}
	return strings.Join(parts, " ")
}

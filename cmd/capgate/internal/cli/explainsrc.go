package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/sidecar/identity"
)

// tokenCaller reads the caller from a compact JWT: its claims as they
// are (the signature unchecked), or, with verify, as the gateway would
// after verifying it against the config's issuers. Neither the token nor
// its text is ever printed.
func tokenCaller(ctx context.Context, env Env, d *deployment.Deployment, tok string, verify bool) (engine.Caller, error) {
	if tok == "-" {
		b, err := readAllLimited(env.Stdin, 1<<20)
		if err != nil {
			return engine.Caller{}, usageErr("read token: %v", err)
		}
		tok = string(b)
	}
	tok = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(tok), "Bearer "))
	if !verify {
		claims := jwt.MapClaims{}
		if _, _, err := jwt.NewParser().ParseUnverified(tok, claims); err != nil {
			return engine.Caller{}, usageErr("--token: not a compact JWT (header.payload.signature, base64url): its claims cannot be read")
		}
		return callerFor(d.Config.Auth, claims), nil
	}
	v, err := identity.NewVerifier(ctx, d.Config.Auth, d.Config.ReadFile)
	if err != nil {
		return engine.Caller{}, fmt.Errorf("prepare the config's issuers: %w", err)
	}
	p, err := v.Verify(ctx, "Bearer "+tok)
	if err != nil {
		return engine.Caller{}, checkFailed("--token does not verify against the config's issuers: %v", err)
	}
	return p.Caller(), nil
}

// explainLogged finds decision id in the log at path and explains it:
// who asked for what, the outcome, and each reason with the Rego rule
// behind it.
func explainLogged(env Env, id, path string, asJSON bool) error {
	f, err := os.Open(path)
	if err != nil {
		return usageErr("read decisions: %v", err)
	}
	defer func() { _ = f.Close() }()
	e, err := findDecision(f, id)
	if err != nil {
		return logErr(path, err)
	}
	if e == nil {
		return checkFailed("decision %s is not in %s (console JSON lines or OPA's gzip'd JSON arrays)", id, path)
	}
	if asJSON {
		return errors.Join(json.MarshalWrite(env.Stdout, e, jsontext.WithIndent("  "), json.Deterministic(true)), func() error {
			_, err := io.WriteString(env.Stdout, "\n")
			return err
		}())
	}
	return writeLoggedText(env.Stdout, e)
}

// writeLoggedText explains a decision event: every field it holds, the
// outcome first, then why (the policy's rules, a check outside it, an
// authentication failure), the skill the caller asked for by hint, and
// where the event came from.
func writeLoggedText(out io.Writer, e *loggedDecision) error {
	str := func(k string) string {
		if v, ok := e.Input[k].(string); ok && v != "" {
			return v
		}
		return "-"
	}
	has := func(k string) bool { _, ok := e.Input[k]; return ok }
	w := bufio.NewWriter(out)
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	p("decision %s at %s\n", e.DecisionID, e.Timestamp)
	if b, ok := e.Bundles["capgate"]; ok {
		p("policy revision: %s\n", b.Revision)
	}
	var facts []string
	if auth, _ := e.Input["authenticated"].(bool); auth {
		facts = append(facts, "authenticated")
	} else if !has("principal") {
		facts = append(facts, "anonymous")
	}
	if has("issuer") {
		facts = append(facts, "issuer "+str("issuer"))
	}
	if has("scopes") {
		scopes := "scopes [" + strings.Join(stringList(e.Input["scopes"]), " ") + "]"
		if t, _ := e.Input["scopes_truncated"].(bool); t {
			scopes += " and more"
		}
		facts = append(facts, scopes)
	}
	p("caller: principal %s, tenant %s", str("principal"), str("tenant"))
	if len(facts) > 0 {
		p(" (%s)", strings.Join(facts, ", "))
	}
	p("\n")
	p("asked: %s %s via %s (%s)\n", str("operation"), str("capability"), str("component"), e.Path)
	if has("binding") || has("a2a_version") {
		p("binding: %s, A2A %s\n", str("binding"), str("a2a_version"))
	}
	if has("layer") {
		p("routed by: %s", str("layer"))
		if c, ok := e.Input["confidence"].(float64); ok {
			p(" (confidence %.2f)", c)
		}
		p("\n")
	}
	outcome := "refused"
	if e.Result.Allow {
		outcome = "allowed"
	}
	if e.Result.Code != "" {
		outcome += " (" + e.Result.Code + ")"
	}
	p("outcome: %s\n", outcome)
	if e.Result.Rule != "" {
		p("refused by: %s (a check outside the policy", e.Result.Rule)
		if has("capability") {
			p(", on %s", str("capability"))
		}
		p(")\n")
	}
	if e.Result.AuthReason != "" {
		p("authentication failed: %s\n", e.Result.AuthReason)
	}
	if len(e.Result.Reasons) > 0 {
		p("reasons: %s\n", strings.Join(e.Result.Reasons, ", "))
	}
	if e.Result.Entitled != nil {
		p("entitled to %s: %s\n", str("capability"), yesNo(*e.Result.Entitled))
	}
	if len(e.Result.Rules) > 0 {
		p("because:\n")
		writeLoggedRules(p, e.Result.Rules)
	}
	if has("requested") {
		p("requested by skill hint: %s", str("requested"))
		if e.Result.RequestedEntitled != nil {
			p(", entitled: %s", yesNo(*e.Result.RequestedEntitled))
			if !*e.Result.RequestedEntitled {
				p(" (the hint was not honoured)")
			}
		}
		p("\n")
		writeLoggedRules(p, e.Result.RequestedRules)
		if missing := missingScopes(e.Result.RequestedRules); missing != "" {
			p("  missing scopes: %s\n", missing)
		}
	}
	if missing := missingScopes(e.Result.Rules); missing != "" {
		p("missing scopes: %s\n", missing)
	}
	if len(e.Result.Limits) > 0 {
		p("limits: %s\n", limitsLine(e.Result.Limits))
	}
	if e.Result.CardVersion != "" {
		p("card version: %s\n", e.Result.CardVersion)
	}
	var labels map[string]string
	if len(e.Labels) > 0 && json.Unmarshal(e.Labels, &labels) == nil && len(labels) > 0 {
		parts := make([]string, 0, len(labels))
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			parts = append(parts, k+"="+labels[k])
		}
		p("labels: %s\n", strings.Join(parts, " "))
	}
	var metrics map[string]float64
	if len(e.Metrics) > 0 && json.Unmarshal(e.Metrics, &metrics) == nil {
		if ns, ok := metrics["timer_capgate_decision_ns"]; ok {
			p("latency: %s\n", time.Duration(ns))
		}
	}
	if e.RequestedBy != "" {
		p("requested by: %s\n", e.RequestedBy)
	}
	if e.TraceID != "" {
		p("trace: %s span %s\n", e.TraceID, e.SpanID)
	}
	return w.Flush()
}

// writeLoggedRules writes an event's rules, one a line.
func writeLoggedRules(p func(string, ...any), rules []loggedRule) {
	for _, r := range rules {
		p("  %-7s %s  (rule %s)\n", r.Effect, r.Reason, r.Rule)
	}
}

// missingScopes is the scopes a scope.missing rule names, when the event
// records them.
func missingScopes(rules []loggedRule) string {
	for _, r := range rules {
		if r.Reason == "scope.missing" && r.Detail != "" {
			return r.Detail
		}
	}
	return ""
}

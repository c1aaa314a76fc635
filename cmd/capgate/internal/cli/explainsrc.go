package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

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
	in := func(k string) string {
		if v, ok := e.Input[k].(string); ok && v != "" {
			return v
		}
		return "-"
	}
	outcome := "refused"
	if e.Result.Allow {
		outcome = "allowed"
	}
	if e.Result.Code != "" {
		outcome += " (" + e.Result.Code + ")"
	}
	w := bufio.NewWriter(env.Stdout)
	_, _ = fmt.Fprintf(w, "decision %s at %s\n", e.DecisionID, e.Timestamp)
	if b, ok := e.Bundles["capgate"]; ok {
		_, _ = fmt.Fprintf(w, "policy revision: %s\n", b.Revision)
	}
	_, _ = fmt.Fprintf(w, "caller: principal %s, tenant %s\n", in("principal"), in("tenant"))
	_, _ = fmt.Fprintf(w, "asked: %s %s via %s (%s)\n", in("operation"), in("capability"), in("component"), e.Path)
	_, _ = fmt.Fprintf(w, "outcome: %s\n", outcome)
	if len(e.Result.Rules) > 0 {
		_, _ = fmt.Fprintln(w, "because:")
		for _, r := range e.Result.Rules {
			_, _ = fmt.Fprintf(w, "  %-7s %s  (rule %s)\n", r.Effect, r.Reason, r.Rule)
		}
	} else if len(e.Result.Reasons) > 0 {
		_, _ = fmt.Fprintf(w, "because: %s\n", strings.Join(e.Result.Reasons, ", "))
	}
	return w.Flush()
}

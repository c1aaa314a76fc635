package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/cardsig"
	"github.com/capgate/capgate/sidecar/jwks"
)

func runCard(ctx context.Context, env Env, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "lock":
			return runCardLock(ctx, env, args[1:])
		case "check":
			return runCardCheck(ctx, env, args[1:])
		case "verify":
			return runCardVerify(ctx, env, args[1:])
		}
	}
	fs := newFlags(env, "card", "card [--config capgate.yaml] [--claims claims.json]  |  card lock ...  |  card check ...  |  card verify ...")
	cfgPath := fs.String("config", "", "deployment config (default: the embedded finance example)")
	claimsPath := fs.String("claims", "", "print the extended card of the caller with these JWT claims (JSON object; - for stdin)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	d, e, caller, err := loadForCaller(ctx, env, *cfgPath, *claimsPath)
	if err != nil {
		return err
	}
	c, err := card.ForCaller(ctx, d.Config, e, caller)
	if err != nil {
		return err
	}
	b, err := card.MarshalIndentAs(c, d.Config.Cards.SecurityRequirements)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(env.Stdout, "%s\n", b)
	return err
}

func runCardLock(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "card lock", "card lock [--config capgate.yaml] --out public-card.lock.json")
	cfgPath := fs.String("config", "", "deployment config (default: the embedded finance example)")
	out := fs.String("out", "", "lock file to write")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *out == "" {
		return usageErr("--out is required")
	}
	d, pub, err := publicCard(ctx, *cfgPath)
	if err != nil {
		return err
	}
	b, err := card.Lock(pub, d.Config, card.Hidden(d.Registry().All()))
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return usageErr("write lock: %v", err)
	}
	_, _ = fmt.Fprintf(env.Stdout, "locked public card (version %s) to %s\n", pub.Version, *out)
	return nil
}

func runCardCheck(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "card check", "card check [--config capgate.yaml] --lock public-card.lock.json")
	cfgPath := fs.String("config", "", "deployment config (default: the embedded finance example)")
	lockPath := fs.String("lock", "", "lock file written by \"capgate card lock\" at the last release")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *lockPath == "" {
		return usageErr("--lock is required")
	}
	lock, err := os.ReadFile(*lockPath)
	if err != nil {
		return usageErr("read lock: %v", err)
	}
	d, pub, err := publicCard(ctx, *cfgPath)
	if err != nil {
		return err
	}
	findings, err := card.Check(lock, pub, d.Config, card.Hidden(d.Registry().All()))
	if err != nil {
		return usageErr("%v", err)
	}
	if len(findings) == 0 {
		_, err = fmt.Fprintf(env.Stdout, "public card unchanged (version %s)\n", pub.Version)
		return err
	}
	// FormatFindings cannot report a write error: format into a buffer and
	// write that, so that findings lost on the way out are an error.
	var buf bytes.Buffer
	card.FormatFindings(&buf, findings)
	if _, err := env.Stdout.Write(buf.Bytes()); err != nil {
		return err
	}
	return checkFailed("%d finding(s): review the change, bump agent.version when the skill list changed, and re-lock", len(findings))
}

// publicCard loads a deployment and builds its public card.
func publicCard(ctx context.Context, cfgPath string) (*deployment.Deployment, *a2a.AgentCard, error) {
	d, e, _, err := loadForCaller(ctx, Env{}, cfgPath, "")
	if err != nil {
		return nil, nil, err
	}
	pub, err := card.Public(ctx, d.Config, e)
	if err != nil {
		return nil, nil, err
	}
	return d, pub, nil
}

// maxCardBytes bounds a card read by `card verify`.
const maxCardBytes = jwks.MaxBytes

func runCardVerify(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "card verify", "card verify --card card.json|URL|- --jwks jwks.json|URL")
	cardArg := fs.String("card", "", "the agent card: a file, an http(s) URL, or - for stdin")
	jwksArg := fs.String("jwks", "", "the signer's key set (JWKS): a file or an http(s) URL; a jku in the signature is never followed")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *cardArg == "" || *jwksArg == "" {
		return usageErr("--card and --jwks are required")
	}
	cardBytes, err := readSource(ctx, env, *cardArg)
	if err != nil {
		return usageErr("read card: %v", err)
	}
	keyBytes, err := readSource(ctx, env, *jwksArg)
	if err != nil {
		return usageErr("read JWKS: %v", err)
	}
	keys, _, err := jwks.Parse(keyBytes)
	if err != nil {
		return usageErr("JWKS: %v", err)
	}
	results, err := cardsig.Verify(cardBytes, keys)
	for _, r := range results {
		if r.Err == nil {
			_, _ = fmt.Fprintf(env.Stdout, "signature %d: ok (kid %q, %s)\n", r.Index, r.KeyID, r.Alg)
			continue
		}
		_, _ = fmt.Fprintf(env.Stdout, "signature %d: FAIL (kid %q, %s): %v\n", r.Index, r.KeyID, r.Alg, r.Err)
	}
	if err != nil {
		return checkFailed("card verify: %v", err)
	}
	_, _ = fmt.Fprintln(env.Stdout, "card signature verified")
	return nil
}

// readSource reads a file, stdin ("-") or an http(s) URL, at most
// maxCardBytes.
func readSource(ctx context.Context, env Env, src string) ([]byte, error) {
	switch {
	case src == "-":
		return readAllLimited(env.Stdin, maxCardBytes)
	case strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://"):
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return jwks.Fetch(ctx, http.DefaultClient, src)
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return readAllLimited(f, maxCardBytes)
}

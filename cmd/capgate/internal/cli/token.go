package cli

import (
	"context"
	"crypto"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/jwks"
)

// Demo keys of the embedded finance example. They are public in the
// repository: tokens signed with them prove nothing outside a demo.
var demoKeys = map[string]struct{ file, kid string }{
	"RS256": {"finance/keys/demo-rs256.key.pem", "demo-rs256"},
	"ES256": {"finance/keys/demo-es256.key.pem", "demo-es256"},
}

func runToken(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "token", "token [--config capgate.yaml] [--sub S] [--scope \"a b\"|a,b] [--tenant T] [--ttl 1h] [--issuer I] [--aud A] [--alg RS256|ES256 | --key key.pem [--kid ID]]")
	cfgPath := fs.String("config", "", "deployment config whose issuer and audience the token is for (default: the embedded finance example)")
	sub := fs.String("sub", "demo-user", "subject")
	scope := fs.String("scope", "", "scopes, separated by spaces or commas")
	tenant := fs.String("tenant", "", "tenant")
	ttl := fs.Duration("ttl", time.Hour, "lifetime")
	alg := fs.String("alg", "RS256", "algorithm of the demo key: RS256 or ES256")
	keyPath := fs.String("key", "", "PEM private key instead of the demo key, e.g. from \"capgate keys generate\"")
	kid := fs.String("kid", "", "key id for --key (the kid of its JWKS entry; default: the key's RFC 7638 thumbprint, as keys generate uses)")
	issuer := fs.String("issuer", "", "iss of the token (default: the config's first issuer)")
	aud := fs.String("aud", "", "aud of the token (default: the issuer's first audience in the config)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *ttl <= 0 || *ttl > 24*time.Hour {
		return usageErr("--ttl must be between 1s and 24h")
	}
	d, err := loadDeployment(*cfgPath)
	if err != nil {
		return err
	}
	auth := d.Config.Auth
	// Which config the warnings are about: without --config, the embedded
	// example, which the caller may not know it is checked against.
	which := "the config's"
	if *cfgPath == "" {
		which = "the embedded finance example's (no --config given)"
	}
	iss, audience, configured, err := tokenIssuer(auth, *issuer, *aud)
	if err != nil {
		if *cfgPath == "" {
			return usageErr("%v (checked against the embedded finance example: no --config given)", err)
		}
		return err
	}
	if !configured {
		_, _ = fmt.Fprintf(env.Stderr, "capgate token: issuer %q is not in %s auth.issuers: that deployment will refuse the token\n", iss, which)
	}
	var pemBytes []byte
	keyID := *kid
	demo := *keyPath == ""
	if !demo {
		if pemBytes, err = os.ReadFile(*keyPath); err != nil {
			return usageErr("read key: %v", err)
		}
	} else {
		dk, ok := demoKeys[*alg]
		if !ok {
			return usageErr("--alg must be RS256 or ES256")
		}
		if pemBytes, err = manifests.FS.ReadFile(dk.file); err != nil {
			return fmt.Errorf("read demo key: %w", err)
		}
		keyID = dk.kid
		_, _ = fmt.Fprintln(env.Stderr, "capgate token: signed with a DEMO key that is public in the repository — never trust it in production")
	}
	key, keyAlg, err := identity.LoadSigningKey(pemBytes)
	if err != nil {
		return usageErr("signing key: %v", err)
	}
	if keyID == "" {
		// The default of keys generate, so its key and JWKS work as written.
		if keyID, err = identity.Thumbprint(key.Public()); err != nil {
			return usageErr("signing key: %v", err)
		}
	}
	if demo && configured {
		if why := untrusted(d.Config, iss, keyID, keyAlg, key.Public()); why != "" {
			_, _ = fmt.Fprintf(env.Stderr, "capgate token: %s issuers do not trust the demo key: %s; use --key and --kid with a key its JWKS holds (see `capgate keys generate`)\n", which, why)
		}
	}
	now := time.Now()
	claims := map[string]any{
		"iss": iss,
		"aud": audience,
		"sub": *sub,
		"iat": now.Unix(),
		"nbf": now.Unix(),
		"exp": now.Add(*ttl).Unix(),
	}
	if s := strings.Join(splitScopes(*scope), " "); s != "" {
		claims[auth.ScopesClaim] = s
	}
	if *tenant != "" {
		claims[auth.TenantClaim] = *tenant
	}
	tok, err := identity.SignDemoToken(key, keyAlg, keyID, claims)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(env.Stdout, tok)
	return err
}

// splitScopes reads "a b", "a,b" and "a, b" alike.
func splitScopes(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}

// tokenIssuer picks the iss and aud of a token: the flags, else the
// config's first issuer and its first audience. configured says whether the
// config trusts the issuer.
func tokenIssuer(auth config.Auth, issuer, aud string) (iss, audience string, configured bool, err error) {
	i := 0
	if issuer != "" {
		i = slices.IndexFunc(auth.Issuers, func(is config.Issuer) bool { return is.Issuer == issuer })
	}
	if i < 0 || len(auth.Issuers) == 0 {
		if issuer == "" {
			return "", "", false, usageErr("the config has no issuer: give --issuer and --aud")
		}
		if aud == "" {
			return "", "", false, usageErr("--aud is required for an issuer the config does not name")
		}
		return issuer, aud, false, nil
	}
	is := auth.Issuers[i]
	if aud == "" {
		if len(is.Audiences) == 0 {
			return "", "", false, usageErr("issuer %q has no audience in the config: give --aud", is.Issuer)
		}
		aud = is.Audiences[0]
	}
	return is.Issuer, aud, true, nil
}

// untrusted says why the config's issuer iss would not verify a token
// signed by pub under kid ("" when it would, or cannot be told offline:
// a jwks_url is not fetched).
func untrusted(cfg *config.Config, iss, kid, alg string, pub crypto.PublicKey) string {
	i := slices.IndexFunc(cfg.Auth.Issuers, func(is config.Issuer) bool { return is.Issuer == iss })
	if i < 0 {
		return ""
	}
	is := cfg.Auth.Issuers[i]
	if len(is.Algorithms) > 0 && !slices.Contains(is.Algorithms, alg) {
		return fmt.Sprintf("issuer %q does not accept %s", iss, alg)
	}
	if is.JWKSFile == "" {
		return ""
	}
	b, err := cfg.ReadFile(is.JWKSFile)
	if err != nil {
		return err.Error()
	}
	set, _, err := jwks.Parse(b)
	if err != nil {
		return fmt.Sprintf("%s: %v", is.JWKSFile, err)
	}
	k, ok := set[kid]
	if !ok {
		return fmt.Sprintf("%s has no key %q", is.JWKSFile, kid)
	}
	mine, err := identity.MarshalJWKS(identity.PublicJWK{Key: pub, Alg: alg, Kid: kid})
	if err != nil {
		return ""
	}
	own, _, err := jwks.Parse(mine)
	if err != nil || !k.Same(own[kid]) {
		return fmt.Sprintf("key %q of %s is another key", kid, is.JWKSFile)
	}
	return ""
}

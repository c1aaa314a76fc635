package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/sidecar/identity"
)

// Demo keys of the embedded finance example. They are public in the
// repository: tokens signed with them prove nothing outside a demo.
var demoKeys = map[string]struct{ file, kid string }{
	"RS256": {"finance/keys/demo-rs256.key.pem", "demo-rs256"},
	"ES256": {"finance/keys/demo-es256.key.pem", "demo-es256"},
}

func runToken(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "token", "token [--config capgate.yaml] [--sub S] [--scope \"a b\"] [--tenant T] [--ttl 1h] [--alg RS256|ES256] [--key key.pem --kid ID]")
	cfgPath := fs.String("config", "", "deployment config whose first issuer and audience the token is for (default: the embedded finance example)")
	sub := fs.String("sub", "demo-user", "subject")
	scope := fs.String("scope", "", "space-separated scopes")
	tenant := fs.String("tenant", "", "tenant")
	ttl := fs.Duration("ttl", time.Hour, "lifetime")
	alg := fs.String("alg", "RS256", "algorithm of the demo key: RS256 or ES256")
	keyPath := fs.String("key", "", "PEM private key instead of the demo key (with --kid)")
	kid := fs.String("kid", "", "key id for --key")
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
	if len(auth.Issuers) == 0 || len(auth.Issuers[0].Audiences) == 0 {
		return usageErr("the config has no issuer with an audience to mint a token for")
	}
	var pemBytes []byte
	keyID := *kid
	if *keyPath != "" {
		if keyID == "" {
			return usageErr("--kid is required with --key")
		}
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
	now := time.Now()
	claims := map[string]any{
		"iss": auth.Issuers[0].Issuer,
		"aud": auth.Issuers[0].Audiences[0],
		"sub": *sub,
		"iat": now.Unix(),
		"nbf": now.Unix(),
		"exp": now.Add(*ttl).Unix(),
	}
	if s := strings.Join(strings.Fields(*scope), " "); s != "" {
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

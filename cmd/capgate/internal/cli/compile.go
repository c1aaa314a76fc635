package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/capgate/capgate/policy/compile"
)

func runCompile(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "compile", "compile [--config capgate.yaml] --out bundle.tar.gz [--signing-key key.pem [--signing-alg RS256] [--key-id ID]]")
	cfgPath := fs.String("config", "", "deployment config (default: the embedded finance example)")
	out := fs.String("out", "", "bundle file to write")
	keyPath := fs.String("signing-key", "", "PEM private key to sign the bundle with (OPA bundle signing)")
	alg := fs.String("signing-alg", "", "signing algorithm (default: RS256 for RSA keys, ES256 for EC keys)")
	keyID := fs.String("key-id", "", "key id recorded in the signature (the verifier's keys map name)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *out == "" {
		return usageErr("--out is required")
	}
	d, err := loadDeployment(*cfgPath)
	if err != nil {
		return err
	}
	if _, err := newEngine(ctx, d); err != nil {
		return checkFailed("%v", err)
	}
	opts := compile.BundleOptions{SigningAlg: *alg, KeyID: *keyID}
	if *keyPath != "" {
		if opts.SigningKey, err = os.ReadFile(*keyPath); err != nil {
			return usageErr("read signing key: %v", err)
		}
	}
	f, err := os.Create(*out)
	if err != nil {
		return usageErr("create bundle: %v", err)
	}
	if err := compile.WriteBundle(f, d.Snapshot, opts); err != nil {
		_ = f.Close()
		_ = os.Remove(*out)
		return usageErr("write bundle: %v", err)
	}
	if err := f.Close(); err != nil {
		return usageErr("write bundle: %v", err)
	}
	signed := "unsigned"
	if *keyPath != "" {
		signed = "signed"
	}
	_, _ = fmt.Fprintf(env.Stdout, "wrote %s bundle %s (revision %s, %d capabilities)\n", signed, *out, d.Snapshot.Revision, d.Registry().Len())
	return nil
}

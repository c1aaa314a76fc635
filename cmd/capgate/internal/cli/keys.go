package cli

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/capgate/capgate/sidecar/identity"
)

// Key file names `keys generate` writes.
const (
	keyFile  = "signing.key.pem"
	jwksFile = "jwks.json"
)

func runKeys(ctx context.Context, env Env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		_, _ = fmt.Fprintln(env.Stderr, "usage: capgate keys generate [--alg ES256|RS256] [--kid ID] --out DIR")
		if len(args) == 0 {
			return usageErr("give a keys command: generate")
		}
		return nil
	}
	if args[0] != "generate" {
		return usageErr("unknown keys command %q (want generate)", args[0])
	}
	return runKeysGenerate(ctx, env, args[1:])
}

// runKeysGenerate writes a new private signing key (PKCS#8 PEM, mode 0600)
// and the JWKS of its public half into a folder: the pair a deployment's own
// token issuer (auth.issuers[].jwks_file) or capgate's handler tokens
// (identity.signing_key_file) use.
func runKeysGenerate(_ context.Context, env Env, args []string) error {
	flags := newFlags(env, "keys generate", "keys generate [--alg ES256|RS256] [--kid ID] --out DIR")
	alg := flags.String("alg", "ES256", "algorithm of the key: ES256 (P-256) or RS256 (RSA 2048)")
	kid := flags.String("kid", "", "key id (default: the key's RFC 7638 thumbprint)")
	out := flags.String("out", "", "folder to write "+keyFile+" and "+jwksFile+" into (created when missing; existing files are not overwritten)")
	if err := parse(flags, args, 0); err != nil {
		return err
	}
	if *out == "" {
		return usageErr("--out is required")
	}
	var (
		key crypto.Signer
		err error
	)
	switch *alg {
	case "ES256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "RS256":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		return usageErr("--alg must be ES256 or RS256")
	}
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	id := *kid
	if id == "" {
		if id, err = identity.Thumbprint(key.Public()); err != nil {
			return err
		}
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode key: %w", err)
	}
	set, err := identity.MarshalJWKS(identity.PublicJWK{Key: key.Public(), Alg: *alg, Kid: id})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return usageErr("--out: %v", err)
	}
	keyPath, setPath := filepath.Join(*out, keyFile), filepath.Join(*out, jwksFile)
	for _, p := range []string{keyPath, setPath} {
		if _, err := os.Stat(p); err == nil {
			return usageErr("%s exists; not overwriting a key (choose another --out)", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return usageErr("%v", err)
		}
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return usageErr("write key: %v", err)
	}
	if err := os.WriteFile(setPath, append(set, '\n'), 0o644); err != nil {
		return usageErr("write JWKS: %v", err)
	}
	_, err = fmt.Fprintf(env.Stdout, "wrote %s (private, keep it secret) and %s (public); kid %s, alg %s\n"+
		"sign tokens:  capgate token --key %s --kid %s --issuer ISSUER --aud AUDIENCE\n"+
		"trust them:   auth.issuers[].jwks_file: %s\n", keyPath, setPath, id, *alg, keyPath, id, setPath)
	return err
}

package main

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/sidecar/identity"
)

const targetRSS = 64 << 20

// rssConfig is the deployment of the memory test: the synthetic registry,
// its eight handlers, and an issuer whose JWKS holds the generated key.
const rssConfig = `agent:
  name: Synthetic Agent
  description: A synthetic registry for the memory test.
  version: 1.0.0
  url: http://127.0.0.1:8080
manifests: [./capabilities]
auth:
  issuers:
    - issuer: https://idp.example.com
      audiences: [finance-agent]
      jwks_file: ./jwks.json
      algorithms: [ES256]
  scopes_claim: scope
  tenant_claim: tenant
  preview_scope: capgate.preview
handlers: {h0: builtin:echo, h1: builtin:echo, h2: builtin:echo, h3: builtin:echo, h4: builtin:echo, h5: builtin:echo, h6: builtin:echo, h7: builtin:echo}
listen: {a2a: 127.0.0.1:0, extauthz: 127.0.0.1:0, admin: 127.0.0.1:0}
store: memory
`

// rssLimits is appended to rssConfig when -memory is set.
const rssLimits = "limits: {memory: %q}\n"

// rss loads a synthetic registry into a capgate child, sends one allowed
// check per distinct token, and reads the child's resident memory.
func rss(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "capgate-rss-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	const kid = "rss-es256"
	key, jwks, err := callerKey(kid)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "capabilities"), 0o755); err != nil {
		return err
	}
	cfg := rssConfig
	if o.memory != "" {
		cfg += fmt.Sprintf(rssLimits, o.memory)
	}
	files := map[string][]byte{"jwks.json": jwks, "capgate.yaml": []byte(cfg)}
	manifestBytes := 0
	for _, c := range compiletest.Synthetic(o.capabilities).All() {
		if c.RequiresScopes == nil {
			c.RequiresScopes = []string{} // the manifest format wants a list
		}
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		files["capabilities/"+c.ID+".json"] = b // one manifest per file, as manifests are kept
		manifestBytes += len(b)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}

	fmt.Printf("memory: %d synthetic capabilities (%d KiB of manifests), %d distinct ES256 tokens in %d entitlement classes\n",
		o.capabilities, manifestBytes>>10, o.distinct, o.classes)
	var c *child
	if o.memProfile != "" {
		// A heap profile needs the server in this binary (-role capgate).
		fmt.Println("  server: this binary's in-process capgate (-server-memprofile); its executable is larger than capgate's")
		start := time.Now()
		if c, err = startChild(ctx, o, "capgate", filepath.Join(dir, "capgate.yaml")); err != nil {
			return err
		}
		fmt.Printf("  ready in %v (%s)\n", time.Since(start).Round(time.Millisecond), readyCPU(c))
	} else {
		bin, err := buildCapgate(ctx, dir)
		if err != nil {
			return err
		}
		start := time.Now()
		if c, err = startCapgateBinary(ctx, bin, filepath.Join(dir, "capgate.yaml")); err != nil {
			return err
		}
		fmt.Printf("  server: capgate serve --only extauthz, ready in %v (%s); memory limit: %s\n",
			time.Since(start).Round(time.Millisecond), readyCPU(c), cmp.Or(c.memLimit, "none"))
	}
	defer c.stop()
	pid := c.cmd.Process.Pid
	loaded, err := memStatus(pid)
	if err != nil {
		return err
	}
	fmt.Printf("  loaded: VmRSS %s\n", mib(loaded.RSS))

	// Mint every token first, so that the send rate is the server's.
	start := time.Now()
	tokens := make([]string, o.distinct)
	var wg sync.WaitGroup
	var mintErr atomic.Pointer[error]
	const minters = 8
	for w := range minters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(tokens); i += minters {
				// Every caller is distinct (subject, token); they fall into
				// o.classes entitlement classes (tenant × scope), each a policy
				// view capgate computes once and caches. Every caller is
				// entitled to the scope-free capabilities.
				c := i % o.classes
				tok, err := mint(key, kid, fmt.Sprintf("caller-%06d", i), compiletest.Tenant(c%5), compiletest.Scope(c/5))
				if err != nil {
					mintErr.Store(&err)
					return
				}
				tokens[i] = tok
			}
		}()
	}
	wg.Wait()
	if p := mintErr.Load(); p != nil {
		return *p
	}
	fmt.Printf("  minted in %v\n", time.Since(start).Round(time.Millisecond))

	t, err := dial(c.addr, o.conns)
	if err != nil {
		return err
	}
	defer t.close()
	start = time.Now()
	var next atomic.Int64
	var e errs
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(tokens) || ctx.Err() != nil {
					return
				}
				// No context: the memory figure is the token cache's and the
				// registry's, as measured before contexts had owners.
				req, err := encode(checkRequest(tokens[i], "", i))
				if err == nil {
					err = t.check(ctx, w, &req)
				}
				if err != nil {
					e.add(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	elapsed := time.Since(start)
	if n := e.n.Load(); n > 0 {
		return fmt.Errorf("%d of %d checks failed, first: %v", n, len(tokens), e.first)
	}
	cur, err := memStatus(pid)
	if err != nil {
		return err
	}
	fmt.Printf("  %d checks in %v (%.0f/s, each a new token: signature verified, not cached)\n\n",
		len(tokens), elapsed.Round(time.Millisecond), float64(len(tokens))/elapsed.Seconds())
	fmt.Println("| capgate ext_authz process | VmRSS | anonymous | file-backed | target |")
	fmt.Println("|---|---:|---:|---:|---|")
	fmt.Printf("| after loading %d capabilities | %s | %s | %s | |\n", o.capabilities, mib(loaded.RSS), mib(loaded.Anon), mib(loaded.File))
	fmt.Printf("| after %d distinct tokens | **%s** | %s | %s | ≤ %s: %s |\n", len(tokens), mib(cur.RSS), mib(cur.Anon), mib(cur.File), mib(targetRSS), verdict(cur.RSS <= targetRSS))
	fmt.Printf("| peak (VmHWM) | %s | | | ≤ %s: %s |\n", mib(cur.HWM), mib(targetRSS), verdict(cur.HWM <= targetRSS))
	return nil
}

// readyCPU is the CPU time (user+system, all threads) the child used to
// get ready: on a shared machine a steadier figure than the wall time.
func readyCPU(c *child) string {
	cpu, err := cpuTime(c.cmd.Process.Pid)
	if err != nil {
		return "CPU unknown"
	}
	return "CPU " + cpu.String()
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// callerKey is the P-256 key the load's caller tokens are signed with, and
// the JWKS capgate's issuer config reads to verify them (key id kid).
func callerKey(kid string) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	jwks, err := identity.MarshalJWKS(identity.PublicJWK{Key: &key.PublicKey, Alg: "ES256", Kid: kid})
	if err != nil {
		return nil, nil, err
	}
	return key, jwks, nil
}

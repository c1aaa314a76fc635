// Package configtest is a small valid deployment config and the files it names, shared by the
// tests of config loading (policy/config) and of the runtime's checks of its own settings
// (sidecar/settings), which load the same config.
package configtest

import (
	"testing/fstest"

	"github.com/capgate/capgate/manifests"
)

// Base is a valid config; tests change one thing in it.
const Base = `agent:
  name: Finance Agent
  description: Invoices and purchase orders.
  version: 1.4.0
  url: http://127.0.0.1:8080
  provider: {organization: Example Corp, url: https://example.com}
  extensions:
    - {uri: https://example.com/ext/trace/v1, description: Trace ids, required: false}
manifests: [./capabilities]
policy_dirs: []
auth:
  issuers:
    - issuer: https://idp.example.com
      audiences: [finance-agent]
      jwks_file: ./keys/demo.jwks.json
      algorithms: [RS256, ES256]
  preview_scope: a2a.preview
handlers:
  invoices.lookup: builtin:echo
listen: {a2a: 127.0.0.1:8080, extauthz: 127.0.0.1:9191, admin: 127.0.0.1:9090}
router: {threshold: 0.6}
store: memory
`

// Lookup is Base's one capability manifest, capabilities/lookup-invoice.yaml.
const Lookup = `id: lookup-invoice
state: ga
visibility: public
skill: {name: Look up an invoice, description: Finds an invoice., tags: [finance]}
tenants: "*"
handler: invoices.lookup
`

// DemoJWKS is the finance example's JWKS, which Base's issuer names.
func DemoJWKS() []byte {
	b, err := manifests.FS.ReadFile("finance/keys/demo.jwks.json")
	if err != nil {
		panic(err) // embedded: only a renamed file gets here
	}
	return b
}

// FS is a tree holding cfg as capgate.yaml, Lookup, DemoJWKS and an empty password file
// (keys/empty.pw).
func FS(cfg string) fstest.MapFS {
	return fstest.MapFS{
		"capgate.yaml":                     {Data: []byte(cfg)},
		"capabilities/lookup-invoice.yaml": {Data: []byte(Lookup)},
		"keys/demo.jwks.json":              {Data: DemoJWKS()},
		"keys/empty.pw":                    {Data: []byte(" \n")},
	}
}

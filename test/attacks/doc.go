// Package attacks holds capgate's attack suite: hostile requests sent both to
// the gateway (HTTP) and to the ext_authz server (gRPC Check requests built
// as Envoy builds them), each with the outcome it must get. See
// docs/security.md.
package attacks

// Package envoy holds the Envoy bootstrap for running capgate as an ext_authz sidecar, its Kubernetes and Istio examples, and the checks that validate them against Envoy's own protos.
package envoy

import (
	_ "embed"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
)

//go:embed bootstrap.yaml
var bootstrapYAML []byte

// BootstrapYAML returns a copy of the sidecar bootstrap (bootstrap.yaml).
func BootstrapYAML() []byte {
	return append([]byte(nil), bootstrapYAML...)
}

// DefaultBootstrap parses and validates the sidecar bootstrap (bootstrap.yaml).
func DefaultBootstrap() (*bootstrapv3.Bootstrap, error) {
	b, err := parseBootstrap(bootstrapYAML)
	if err != nil {
		return nil, err
	}
	if err := validateBootstrap(b); err != nil {
		return nil, err
	}
	return b, nil
}

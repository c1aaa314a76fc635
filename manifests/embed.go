// Package manifests embeds the reference finance agent: its deployment config, capability manifests and demo keys.
package manifests

import "embed"

// FS holds the finance example; DefaultConfig is its config file inside FS.
//
//go:embed finance
var FS embed.FS

// DefaultConfig is the path of the embedded default deployment config in FS.
const DefaultConfig = "finance/capgate.yaml"

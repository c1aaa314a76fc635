// Package ci holds the one rule by which a test that needs something beside
// Go (redis-server, node, chromium, podman, ../shared) fails instead of
// skipping: when it runs under CI.
package ci

import (
	"os"
	"strings"
)

// Required reports whether a test must fail rather than skip when what it
// needs is missing: when the CI environment variable is set to anything but
// "", "0" or "false" (any case).
func Required() bool {
	switch strings.ToLower(os.Getenv("CI")) {
	case "", "0", "false":
		return false
	}
	return true
}

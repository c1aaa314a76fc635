package protocol

import "strings"

// MediaTypeMatches reports whether media type t matches the pattern p: equal, */*, or type/* —
// the one rule for a part's or an output's media type against a skill's modes or a caller's
// accepted output modes.
func MediaTypeMatches(p, t string) bool {
	if p == t || p == "*/*" {
		return true
	}
	if base, ok := strings.CutSuffix(p, "/*"); ok {
		return strings.HasPrefix(t, base+"/")
	}
	return false
}

package manifest

import (
	"encoding/json"
	"math"
)

// Limits capgate enforces itself, before a message is forwarded to the
// capability's handler. Every other limit is the handler's to enforce.
const (
	// LimitMaxBodyBytes bounds the size of a message request's params (the
	// JSON-RPC params object, the HTTP+JSON body), in bytes.
	LimitMaxBodyBytes = "max_body_bytes"
	// LimitMaxParts bounds the number of parts of a message.
	LimitMaxParts = "max_parts"
	// LimitMaxFileBytes bounds the decoded size of the inline content of
	// one raw (0.3: file.bytes) part, in bytes.
	LimitMaxFileBytes = "max_file_bytes"
)

// EnforcedLimits are the limit names capgate enforces, in documentation order.
var EnforcedLimits = []string{LimitMaxBodyBytes, LimitMaxParts, LimitMaxFileBytes}

// LimitInt reads limit name from limits as a positive whole number. It
// accepts every form a number takes on its way here: int and int64 (YAML),
// float64 (JSON), json.Number (OPA). ok is false when the limit is absent;
// valid is false when it is present but not a positive whole number.
func LimitInt(limits map[string]any, name string) (n int64, ok, valid bool) {
	v, ok := limits[name]
	if !ok {
		return 0, false, false
	}
	var f float64
	switch x := v.(type) {
	case int:
		return int64(x), true, x > 0
	case int64:
		return x, true, x > 0
	case float64:
		f = x
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, true, i > 0
		}
		var err error
		if f, err = x.Float64(); err != nil {
			return 0, true, false
		}
	default:
		return 0, true, false
	}
	if f != math.Trunc(f) || f < 1 || f > math.MaxInt64/2 {
		return 0, true, false
	}
	return int64(f), true, true
}

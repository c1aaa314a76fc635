// Package enforce holds the checks capgate applies around a handler call on
// the handler's behalf: the capability's limits on the message it is sent,
// before forwarding, and the caller's accepted output modes on the answer,
// before it is returned.
package enforce

import (
	"strconv"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/protocol"
)

// Limits checks a message against the limits capgate enforces itself
// (manifest.EnforcedLimits), as the policy decision for the capability
// carries them: max_body_bytes against bodyBytes (the size of the request's
// params, which is what the handler receives), max_parts against the number
// of parts, max_file_bytes against the decoded inline content of each raw
// part. Limits that are absent do not apply. A limit that is present but
// not a positive whole number refuses the message (the manifest loader
// rejects such values; a policy that produced one anyway fails closed).
// The error is PayloadTooLarge and names the limit, its value and what the
// message had.
func Limits(capability string, limits map[string]any, msg *protocol.MessageInfo, bodyBytes int) *protocol.Error {
	if len(limits) == 0 {
		return nil
	}
	maxBody, ok, err := limit(capability, limits, manifest.LimitMaxBodyBytes)
	if err != nil {
		return err
	}
	if ok && int64(bodyBytes) > maxBody {
		return refuse(capability, manifest.LimitMaxBodyBytes, maxBody,
			"takes messages of at most "+itoa(maxBody)+" bytes; this one has "+itoa(int64(bodyBytes)))
	}
	if msg == nil {
		return nil
	}
	maxParts, ok, err := limit(capability, limits, manifest.LimitMaxParts)
	if err != nil {
		return err
	}
	if ok && int64(len(msg.Parts)) > maxParts {
		return refuse(capability, manifest.LimitMaxParts, maxParts,
			"takes at most "+itoa(maxParts)+" "+parts(maxParts)+" in a message; this one has "+itoa(int64(len(msg.Parts))))
	}
	maxFile, ok, err := limit(capability, limits, manifest.LimitMaxFileBytes)
	if err != nil {
		return err
	}
	if ok {
		for i, p := range msg.Parts {
			if p.InlineBytes > maxFile {
				return refuse(capability, manifest.LimitMaxFileBytes, maxFile,
					"takes inline files of at most "+itoa(maxFile)+" bytes; part "+strconv.Itoa(i)+" has "+itoa(p.InlineBytes))
			}
		}
	}
	return nil
}

// limit reads one enforced limit.
func limit(capability string, limits map[string]any, name string) (int64, bool, *protocol.Error) {
	n, present, valid := manifest.LimitInt(limits, name)
	switch {
	case !present:
		return 0, false, nil
	case !valid:
		return 0, false, protocol.Errorf(protocol.Internal, "capability %s has an invalid %s limit", capability, name)
	}
	return n, true, nil
}

func refuse(capability, name string, max int64, what string) *protocol.Error {
	return protocol.Errorf(protocol.PayloadTooLarge, "capability %s %s (limit %s)", capability, what, name).
		WithMetadata("capabilityId", capability).
		WithMetadata("limit", name).
		WithMetadata("max", itoa(max))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func parts(n int64) string {
	if n == 1 {
		return "part"
	}
	return "parts"
}

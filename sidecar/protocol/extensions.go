package protocol

import (
	"slices"
	"strings"
)

// Extension is an A2A extension the agent declares in its card.
type Extension struct {
	URI      string
	Required bool
}

// NegotiateExtensions reads the A2A-Extensions header values (comma-separated URIs; the header
// may repeat) against the declared extensions. It returns the activated URIs (requested and
// declared, in declared order) or ExtensionSupportRequired naming every required extension the
// client did not request (also in Metadata["extensions"], comma-separated). Unknown URIs are
// ignored. URIs are compared exactly.
func NegotiateExtensions(header []string, declared []Extension) ([]string, *Error) {
	var requested []string
	for _, h := range header {
		for _, u := range strings.Split(h, ",") {
			if u = strings.Trim(u, " \t"); u != "" {
				requested = append(requested, u)
			}
		}
	}
	var activated, missing []string
	for _, ext := range declared {
		switch {
		case slices.Contains(requested, ext.URI):
			if !slices.Contains(activated, ext.URI) {
				activated = append(activated, ext.URI)
			}
		case ext.Required:
			missing = append(missing, ext.URI)
		}
	}
	if len(missing) > 0 {
		list := strings.Join(missing, ",")
		return nil, Errorf(ExtensionSupportRequired, "the agent requires extensions the request did not activate: %s; send them in %s",
			strings.Join(missing, ", "), ExtensionsHeader).WithMetadata("extensions", list)
	}
	return activated, nil
}

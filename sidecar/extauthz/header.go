package extauthz

import (
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// capgatePrefix starts every header capgate sets; a client may not send one.
const capgatePrefix = "x-capgate-"

// header reads the request headers Envoy sent: the headers map (keys
// lower-cased, repeated headers joined with ","), or header_map when Envoy's
// encode_raw_headers is on.
type header struct {
	m   map[string]string
	raw []*corev3.HeaderValue
	// one backs the slice Values returns for a map value, so that reading a header allocates
	// nothing; that slice is valid until the next call.
	one [1]string
}

// get returns the value of a lower-case header name; repeated raw headers
// are joined with "," as Envoy joins them in the map.
func (h header) get(name string) string {
	if h.raw == nil {
		return h.m[name]
	}
	var out string
	n := 0
	for _, hv := range h.raw {
		if !strings.EqualFold(hv.GetKey(), name) {
			continue
		}
		v := rawValue(hv)
		if n == 0 {
			out = v
		} else {
			out += "," + v
		}
		n++
	}
	return out
}

// Values implements protocol.Header: name is matched case-insensitively. The slice is valid
// until the next call (every reader in protocol and admission reads it at once).
func (h *header) Values(name string) []string {
	name = lowerName(name)
	if h.raw != nil {
		return h.values(name)
	}
	v, ok := h.m[name]
	if !ok {
		return nil
	}
	h.one[0] = v
	return h.one[:1:1]
}

// lowerName lower-cases a header name; the names the parser asks for are constants, looked up
// without allocating.
func lowerName(name string) string {
	switch name {
	case "A2A-Version":
		return "a2a-version"
	case "Content-Type":
		return "content-type"
	case "Authorization":
		return "authorization"
	case "A2A-Extensions":
		return "a2a-extensions"
	case "X-A2A-Extensions":
		return "x-a2a-extensions"
	}
	return strings.ToLower(name)
}

// values returns the header's values (one element per raw header, or the
// joined map value).
func (h header) values(name string) []string {
	if h.raw == nil {
		if v, ok := h.m[name]; ok {
			return []string{v}
		}
		return nil
	}
	var out []string
	for _, hv := range h.raw {
		if strings.EqualFold(hv.GetKey(), name) {
			out = append(out, rawValue(hv))
		}
	}
	return out
}

// capgateHeaders lists the x-capgate-* headers the client sent, lower-cased,
// except those in keep.
func (h header) capgateHeaders(keep ...string) []string {
	var out []string
	add := func(k string) {
		if len(k) < len(capgatePrefix) || !strings.EqualFold(k[:len(capgatePrefix)], capgatePrefix) {
			return
		}
		k = strings.ToLower(k)
		for _, x := range keep {
			if x == k {
				return
			}
		}
		for _, x := range out {
			if x == k {
				return
			}
		}
		out = append(out, k)
	}
	if h.raw == nil {
		for k := range h.m {
			add(k)
		}
	} else {
		for _, hv := range h.raw {
			add(hv.GetKey())
		}
	}
	slices.Sort(out)
	return out
}

func rawValue(hv *corev3.HeaderValue) string {
	if b := hv.GetRawValue(); len(b) > 0 {
		return string(b)
	}
	return hv.GetValue()
}

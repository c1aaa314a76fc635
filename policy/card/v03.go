package card

import (
	"fmt"
	"slices"

	a2alegacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// V03 projects a generated A2A 1.0 card into the A2A 0.3 card, in a2a-go's
// 0.3 types, for callers that speak 0.3: `url` and `preferredTransport` are
// the first (preferred) interface, `additionalInterfaces` lists every
// interface including that one (as the 0.3 spec recommends), and
// `protocolVersion` is 0.3.0. capgate answers 0.3 requests on the same
// endpoints as 1.0 ones, so the URLs are the same.
//
// a2av0.FromV1AgentCard does most of the mapping; it leaves out the security
// schemes and copies the first interface's protocol version (1.0), which
// V03 sets here.
func V03(c *a2a.AgentCard) *a2alegacy.AgentCard {
	out := a2av0.FromV1AgentCard(withoutGRPC(c))
	out.ProtocolVersion = string(a2alegacy.Version)
	if len(c.SecuritySchemes) > 0 {
		out.SecuritySchemes = make(a2alegacy.NamedSecuritySchemes, len(c.SecuritySchemes))
		for name, s := range c.SecuritySchemes {
			// Build emits HTTP bearer schemes only.
			if h, ok := s.(a2a.HTTPAuthSecurityScheme); ok {
				out.SecuritySchemes[a2alegacy.SecuritySchemeName(name)] = a2alegacy.HTTPAuthSecurityScheme{
					Scheme: h.Scheme, BearerFormat: h.BearerFormat, Description: h.Description,
				}
			}
		}
	}
	if len(out.Signatures) == 0 {
		out.Signatures = nil
	}
	return out
}

// MarshalV03 encodes the 0.3 projection of c compactly, without HTML
// escaping, as Marshal does for 1.0 cards.
func MarshalV03(c *a2a.AgentCard) ([]byte, error) { return encode(V03(c), false) }

// MarshalV03Indent is MarshalV03 indented, with a final newline.
func MarshalV03Indent(c *a2a.AgentCard) ([]byte, error) {
	b, err := encode(V03(c), true)
	if err != nil {
		return nil, fmt.Errorf("0.3 card: %w", err)
	}
	return append(b, '\n'), nil
}

// withoutGRPC is c without its gRPC interface: capgate serves gRPC in A2A 1.0 only
// (lf.a2a.v1.A2AService), so a 0.3 card does not offer it.
func withoutGRPC(c *a2a.AgentCard) *a2a.AgentCard {
	if !slices.ContainsFunc(c.SupportedInterfaces, isGRPC) {
		return c
	}
	cp := *c
	cp.SupportedInterfaces = slices.DeleteFunc(slices.Clone(c.SupportedInterfaces), isGRPC)
	return &cp
}

func isGRPC(i *a2a.AgentInterface) bool { return i.ProtocolBinding == a2a.TransportProtocolGRPC }

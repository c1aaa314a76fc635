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
			if s03 := v03Scheme(s); s03 != nil {
				out.SecuritySchemes[a2alegacy.SecuritySchemeName(name)] = s03
			}
		}
	}
	// The 0.3 card states the 1.0 card's requirements as security (OpenAPI's form, which the
	// 0.3 schema and a2a-go agree on), per card and per skill.
	out.Security = v03Security(c.SecurityRequirements)
	for i := range out.Skills {
		if i < len(c.Skills) && c.Skills[i].ID == out.Skills[i].ID {
			out.Skills[i].Security = v03Security(c.Skills[i].SecurityRequirements)
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

// v03Scheme is a scheme Build declares in its 0.3 type: HTTP bearer, OAuth 2.0 client
// credentials, OpenID Connect; nil for any other.
func v03Scheme(s a2a.SecurityScheme) a2alegacy.SecurityScheme {
	switch v := s.(type) {
	case a2a.HTTPAuthSecurityScheme:
		return a2alegacy.HTTPAuthSecurityScheme{Scheme: v.Scheme, BearerFormat: v.BearerFormat, Description: v.Description}
	case a2a.OAuth2SecurityScheme:
		cc, ok := v.Flows.(a2a.ClientCredentialsOAuthFlow)
		if !ok {
			return nil
		}
		return a2alegacy.OAuth2SecurityScheme{Description: v.Description, Flows: a2alegacy.OAuthFlows{
			ClientCredentials: &a2alegacy.ClientCredentialsOAuthFlow{TokenURL: cc.TokenURL, RefreshURL: cc.RefreshURL, Scopes: cc.Scopes},
		}}
	case a2a.OpenIDConnectSecurityScheme:
		return a2alegacy.OpenIDConnectSecurityScheme{Description: v.Description, OpenIDConnectURL: v.OpenIDConnectURL}
	}
	return nil
}

func v03Security(rs a2a.SecurityRequirementsOptions) []a2alegacy.SecurityRequirements {
	if len(rs) == 0 {
		return nil
	}
	out := make([]a2alegacy.SecurityRequirements, 0, len(rs))
	for _, r := range rs {
		m := make(a2alegacy.SecurityRequirements, len(r))
		for name, scopes := range r {
			m[a2alegacy.SecuritySchemeName(name)] = append(a2alegacy.SecuritySchemeScopes{}, scopes...)
		}
		out = append(out, m)
	}
	return out
}

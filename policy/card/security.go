package card

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
)

// Names of the schemes a card declares besides BearerSchemeName. With more than one issuer
// naming a token endpoint (discovery document), the schemes are oauth2-1, oauth2-2, … in
// auth.issuers order.
const (
	OAuth2SchemeName a2a.SecuritySchemeName = "oauth2"
	OIDCSchemeName   a2a.SecuritySchemeName = "oidc"
)

// scheme is one declared security scheme; scopes are the scopes it can carry (nil: any, for
// an issuer with no scopes list), and scoped whether a requirement on it lists scopes (OAuth 2.0
// and OpenID Connect do; HTTP bearer does not).
type scheme struct {
	name   a2a.SecuritySchemeName
	def    a2a.SecurityScheme
	scoped bool
	scopes []string
}

type schemeSet []scheme

// securitySchemes are the schemes a card over caps declares: none without issuers; otherwise
// the HTTP bearer scheme naming every issuer, then an oauth2 scheme (client credentials) per
// issuer with a token_url, listing the scopes caps require that the issuer may grant, and an
// openIdConnect scheme per issuer with a discovery_url.
func securitySchemes(auth config.Auth, caps []manifest.Capability) schemeSet {
	var issuers []string
	var oauth, oidc []config.Issuer
	for _, is := range auth.Issuers {
		if is.Issuer != "" && !slices.Contains(issuers, is.Issuer) {
			issuers = append(issuers, is.Issuer)
		}
		if is.TokenURL != "" {
			oauth = append(oauth, is)
		}
		if is.DiscoveryURL != "" {
			oidc = append(oidc, is)
		}
	}
	if len(issuers) == 0 {
		return nil
	}
	desc := "JWT bearer token issued by " + strings.Join(issuers, ", ") + "."
	if auth.AnonymousPublic {
		desc += " Required for every request except calls to public skills that need no scopes."
	} else {
		desc += " Required for every request."
	}
	out := schemeSet{{name: BearerSchemeName, def: a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", BearerFormat: "JWT", Description: desc}}}
	needed := neededScopes(caps)
	for i, is := range oauth {
		flow := a2a.ClientCredentialsOAuthFlow{TokenURL: is.TokenURL, Scopes: map[string]string{}}
		for _, sc := range slices.Sorted(maps.Keys(needed)) {
			if len(is.Scopes) == 0 || slices.Contains(is.Scopes, sc) {
				flow.Scopes[sc] = "Needed by " + strings.Join(needed[sc], ", ") + "."
			}
		}
		out = append(out, scheme{name: indexed(OAuth2SchemeName, i, len(oauth)), scoped: true, scopes: is.Scopes, def: a2a.OAuth2SecurityScheme{
			Description: "OAuth 2.0 client credentials grant at " + is.Issuer + "'s token endpoint; send the access token as a Bearer token.",
			Flows:       flow,
		}})
	}
	for i, is := range oidc {
		out = append(out, scheme{name: indexed(OIDCSchemeName, i, len(oidc)), scoped: true, scopes: is.Scopes, def: a2a.OpenIDConnectSecurityScheme{
			Description:      "OpenID Connect provider " + is.Issuer + "; send its access token as a Bearer token.",
			OpenIDConnectURL: is.DiscoveryURL,
		}})
	}
	return out
}

// neededScopes maps each scope a capability of caps requires to the ids of those capabilities,
// sorted.
func neededScopes(caps []manifest.Capability) map[string][]string {
	out := map[string][]string{}
	for i := range caps {
		m := &caps[i]
		if m.State == manifest.StateRemoved {
			continue
		}
		for _, sc := range m.RequiresScopes {
			if !slices.Contains(out[sc], m.ID) {
				out[sc] = append(out[sc], m.ID)
				slices.Sort(out[sc])
			}
		}
	}
	return out
}

func indexed(name a2a.SecuritySchemeName, i, n int) a2a.SecuritySchemeName {
	if n == 1 {
		return name
	}
	return a2a.SecuritySchemeName(fmt.Sprintf("%s-%d", name, i+1))
}

func (ss schemeSet) named() a2a.NamedSecuritySchemes {
	if len(ss) == 0 {
		return nil
	}
	out := make(a2a.NamedSecuritySchemes, len(ss))
	for _, s := range ss {
		out[s.name] = s.def
	}
	return out
}

// requirements are the card's: any one of the declared schemes, no scopes (which scopes a call
// needs depends on the skill).
func (ss schemeSet) requirements() a2a.SecurityRequirementsOptions {
	var out a2a.SecurityRequirementsOptions
	for _, s := range ss {
		out = append(out, a2a.SecurityRequirements{s.name: a2a.SecuritySchemeScopes{}})
	}
	return out
}

// skillRequirements are a skill's, given the scopes it requires: one alternative per scheme,
// the scoped schemes (OAuth 2.0, OpenID Connect) with those scopes, left out where the issuer
// may not grant all of them. Nil (the card's requirements apply) when the skill needs no scope
// or no scheme carries scopes.
func (ss schemeSet) skillRequirements(scopes []string) a2a.SecurityRequirementsOptions {
	if len(scopes) == 0 || !slices.ContainsFunc(ss, func(s scheme) bool { return s.scoped }) {
		return nil
	}
	var out a2a.SecurityRequirementsOptions
	for _, s := range ss {
		switch {
		case !s.scoped:
			out = append(out, a2a.SecurityRequirements{s.name: a2a.SecuritySchemeScopes{}})
		case len(s.scopes) == 0 || !slices.ContainsFunc(scopes, func(sc string) bool { return !slices.Contains(s.scopes, sc) }):
			out = append(out, a2a.SecurityRequirements{s.name: a2a.SecuritySchemeScopes(slices.Clone(scopes))})
		}
	}
	return out
}

func capsByID(caps []manifest.Capability) map[string]*manifest.Capability {
	out := make(map[string]*manifest.Capability, len(caps))
	for i := range caps {
		if _, dup := out[caps[i].ID]; !dup && caps[i].State != manifest.StateRemoved {
			out[caps[i].ID] = &caps[i]
		}
	}
	return out
}

// protoRequirements rewrites the securityRequirements of a card encoded by a2a-go (the card's
// and each skill's) to the A2A proto's JSON form: a requirement's scopes as a StringList,
// {"schemes": {"oauth2": {"list": ["recon.run"]}}}, where a2a-go writes a bare array
// (a2aproject/a2a-go#430). Everything else is copied as it is. A card without requirements is
// returned unchanged.
func protoRequirements(b []byte) ([]byte, error) {
	if !bytes.Contains(b, []byte(`"securityRequirements"`)) {
		return b, nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out, jsontext.EscapeForHTML(false))
	if err := copyObject(dec, enc, func(name string) rewriter {
		switch name {
		case "securityRequirements":
			return rewriteRequirements
		case "skills":
			return func(dec *jsontext.Decoder, enc *jsontext.Encoder) error {
				return copyArray(dec, enc, func(dec *jsontext.Decoder, enc *jsontext.Encoder) error {
					return copyObject(dec, enc, func(name string) rewriter {
						if name == "securityRequirements" {
							return rewriteRequirements
						}
						return nil
					})
				})
			}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("encode agent card: security requirements: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// rewriter reads one value from dec and writes its replacement to enc.
type rewriter func(*jsontext.Decoder, *jsontext.Encoder) error

// copyObject copies the object at dec's position, member by member, rewriting the value of
// each member for which pick returns a rewriter.
func copyObject(dec *jsontext.Decoder, enc *jsontext.Encoder, pick func(string) rewriter) error {
	if err := copyToken(dec, enc, '{'); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return err
		}
		if err := enc.WriteToken(name); err != nil {
			return err
		}
		rw := pick(name.String())
		if rw == nil {
			rw = copyValue
		}
		if err := rw(dec, enc); err != nil {
			return err
		}
	}
	return copyToken(dec, enc, '}')
}

// copyArray copies the array at dec's position, rewriting each element with rw.
func copyArray(dec *jsontext.Decoder, enc *jsontext.Encoder, rw rewriter) error {
	if err := copyToken(dec, enc, '['); err != nil {
		return err
	}
	for dec.PeekKind() != ']' {
		if err := rw(dec, enc); err != nil {
			return err
		}
	}
	return copyToken(dec, enc, ']')
}

func copyToken(dec *jsontext.Decoder, enc *jsontext.Encoder, want jsontext.Kind) error {
	t, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if t.Kind() != want {
		return fmt.Errorf("want %v, found %v", want, t.Kind())
	}
	return enc.WriteToken(t)
}

func copyValue(dec *jsontext.Decoder, enc *jsontext.Encoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	return enc.WriteValue(v)
}

// stringList is the A2A proto's StringList in its JSON form.
type stringList struct {
	List []string `json:"list"`
}

func rewriteRequirements(dec *jsontext.Decoder, enc *jsontext.Encoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	var in []struct {
		Schemes map[string][]string `json:"schemes"`
	}
	if err := json.Unmarshal(v, &in); err != nil {
		return err
	}
	type requirement struct {
		Schemes map[string]stringList `json:"schemes"`
	}
	out := make([]requirement, 0, len(in))
	for _, r := range in {
		p := requirement{Schemes: make(map[string]stringList, len(r.Schemes))}
		for name, scopes := range r.Schemes {
			if scopes == nil {
				scopes = []string{}
			}
			p.Schemes[name] = stringList{List: scopes}
		}
		out = append(out, p)
	}
	b, err := encode(out, false)
	if err != nil {
		return err
	}
	return enc.WriteValue(b)
}

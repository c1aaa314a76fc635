package card_test

import (
	"encoding/json"
	"testing"

	a2alegacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
)

// oauthConfig is the fixture with a token endpoint and a discovery document for the first
// issuer, which may grant recon.run and invoices.read only.
func oauthConfig(form string) *config.Config {
	c := fixtureConfig()
	c.Auth.Issuers[0].TokenURL = "https://login.example.com/oauth2/token"
	c.Auth.Issuers[0].DiscoveryURL = "https://login.example.com/.well-known/openid-configuration"
	c.Auth.Issuers[0].Scopes = []string{"recon.run", "invoices.read"}
	c.Cards.SecurityRequirements = form
	return c
}

func securityCaps() []manifest.Capability {
	lookup := lookupInvoice()
	lookup.RequiresScopes = []string{"invoices.read"}
	audit := auditTrail()
	audit.Visibility = manifest.VisibilityPublic
	audit.RequiresScopes = []string{"audit.export"} // the issuer with a token endpoint may not grant it
	return []manifest.Capability{lookup, reconcileInvoice(), audit, forecastCashflow()}
}

// TestSecuritySchemesAndRequirements: an issuer's token endpoint and discovery document become
// an oauth2 (client credentials, the scopes the card's skills need) and an openIdConnect
// scheme; with requirements on, the card requires any one scheme and each skill that needs
// scopes lists them on the schemes that carry scopes.
func TestSecuritySchemesAndRequirements(t *testing.T) {
	c := card.Build(oauthConfig(config.SecurityRequirementsProto), securityCaps(), card.Options{})
	oauth, ok := c.SecuritySchemes[card.OAuth2SchemeName].(a2a.OAuth2SecurityScheme)
	require.True(t, ok, "%#v", c.SecuritySchemes)
	require.Equal(t, a2a.ClientCredentialsOAuthFlow{TokenURL: "https://login.example.com/oauth2/token", Scopes: map[string]string{
		"invoices.read": "Needed by lookup-invoice.",
		"recon.run":     "Needed by reconcile-invoice.",
	}}, oauth.Flows, "only scopes the issuer may grant")
	require.Equal(t, a2a.OpenIDConnectSecurityScheme{
		Description:      "OpenID Connect provider https://login.example.com; send its access token as a Bearer token.",
		OpenIDConnectURL: "https://login.example.com/.well-known/openid-configuration",
	}, c.SecuritySchemes[card.OIDCSchemeName])
	require.Len(t, c.SecuritySchemes, 3)

	empty := a2a.SecuritySchemeScopes{}
	require.Equal(t, a2a.SecurityRequirementsOptions{
		{card.BearerSchemeName: empty}, {card.OAuth2SchemeName: empty}, {card.OIDCSchemeName: empty},
	}, c.SecurityRequirements)
	want := map[string]a2a.SecurityRequirementsOptions{
		"audit-trail":       {{card.BearerSchemeName: empty}}, // no scheme with scopes can grant audit.export
		"forecast-cashflow": nil,                              // needs no scope: the card's requirements apply
		"lookup-invoice": {
			{card.BearerSchemeName: empty},
			{card.OAuth2SchemeName: {"invoices.read"}},
			{card.OIDCSchemeName: {"invoices.read"}},
		},
		"reconcile-invoice": {
			{card.BearerSchemeName: empty},
			{card.OAuth2SchemeName: {"recon.run"}},
			{card.OIDCSchemeName: {"recon.run"}},
		},
	}
	require.Len(t, c.Skills, len(want))
	for _, s := range c.Skills {
		require.Equal(t, want[s.ID], s.SecurityRequirements, s.ID)
	}

	// Two issuers with token endpoints: oauth2-1, oauth2-2; the bearer scheme stays.
	cfg := oauthConfig(config.SecurityRequirementsOmit)
	cfg.Auth.Issuers[1].TokenURL = "https://partners.example.net/token"
	two := card.Build(cfg, securityCaps(), card.Options{})
	require.Contains(t, two.SecuritySchemes, a2a.SecuritySchemeName("oauth2-1"))
	require.Contains(t, two.SecuritySchemes, a2a.SecuritySchemeName("oauth2-2"))
	require.Contains(t, two.SecuritySchemes, card.BearerSchemeName)
	require.Nil(t, two.SecurityRequirements, "omit states no requirement")
	for _, s := range two.Skills {
		require.Nil(t, s.SecurityRequirements, s.ID)
	}
}

// TestSecurityRequirementForms is the evidence behind cards.security_requirements: which
// readers accept the card in each form. a2a-go v2.3.1's card parser (its resolver's
// json.Unmarshal into a2a.AgentCard), the A2A JSON Schema (which the TCK checks, CARD-STRUCT-001)
// and a ProtoJSON parser (protojson into the proto's AgentCard, as the Python SDK and the TCK's
// gRPC side read cards) are run on the same card. No form passes all three while
// a2aproject/a2a-go#430 is open: if this test starts failing because one does, revisit the
// default (docs/cards.md).
func TestSecurityRequirementForms(t *testing.T) {
	v, err := card.NewValidator()
	require.NoError(t, err)
	tests := []struct {
		form                       string
		a2aGo, schema, protoReader bool
	}{
		{config.SecurityRequirementsOmit, true, true, true},
		{config.SecurityRequirementsProto, false, true, true},
		{config.SecurityRequirementsA2AGo, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.form, func(t *testing.T) {
			built := card.Build(oauthConfig(tt.form), securityCaps(), card.Options{})
			b, err := card.MarshalAs(built, tt.form)
			require.NoError(t, err)
			indented, err := card.MarshalIndentAs(built, tt.form)
			require.NoError(t, err)
			require.JSONEq(t, string(b), string(indented))

			var got a2a.AgentCard
			err = json.Unmarshal(b, &got)
			require.Equal(t, tt.a2aGo, err == nil, "a2a-go: %v", err)
			if err == nil {
				require.Equal(t, built, &got, "a2a-go reads back what was built")
			}
			err = v.Validate(b)
			require.Equal(t, tt.schema, err == nil, "schema: %v", err)
			err = protojson.Unmarshal(b, &a2apb.AgentCard{})
			require.Equal(t, tt.protoReader, err == nil, "protojson: %v", err)
		})
	}
	// The proto form, exactly.
	b, err := card.Marshal(card.Build(oauthConfig(config.SecurityRequirementsProto), []manifest.Capability{reconcileInvoice()}, card.Options{}))
	require.NoError(t, err)
	var doc struct {
		SecurityRequirements []json.RawMessage `json:"securityRequirements"`
		Skills               []struct {
			SecurityRequirements []json.RawMessage `json:"securityRequirements"`
		} `json:"skills"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.JSONEq(t, `{"schemes":{"bearer":{"list":[]}}}`, string(doc.SecurityRequirements[0]))
	require.JSONEq(t, `{"schemes":{"oauth2":{"list":["recon.run"]}}}`, string(doc.Skills[0].SecurityRequirements[1]))
}

// TestSecurityV03: the 0.3 card carries the schemes in their 0.3 types and the requirements as
// security (OpenAPI's form, which the 0.3 schema and a2a-go agree on), per card and per skill;
// a2a-go v2's 0.3 card parser reads them back as requirements its AuthInterceptor acts on.
func TestSecurityV03(t *testing.T) {
	built := card.Build(oauthConfig(config.SecurityRequirementsProto), securityCaps(), card.Options{})
	b, err := card.MarshalV03Indent(built)
	require.NoError(t, err)
	requireGolden(t, "security.v03.golden.json", b, true)

	var legacy a2alegacy.AgentCard
	require.NoError(t, json.Unmarshal(b, &legacy))
	require.Len(t, legacy.Security, 3)
	require.Equal(t, a2alegacy.SecuritySchemeScopes{}, legacy.Security[0][a2alegacy.SecuritySchemeName(card.BearerSchemeName)])
	require.IsType(t, a2alegacy.OAuth2SecurityScheme{}, legacy.SecuritySchemes["oauth2"])
	require.IsType(t, a2alegacy.OpenIDConnectSecurityScheme{}, legacy.SecuritySchemes["oidc"])

	parsed, err := a2av0.NewAgentCardParser()(b)
	require.NoError(t, err)
	require.Equal(t, built.SecurityRequirements, parsed.SecurityRequirements)
	for i := range built.Skills {
		require.Equal(t, built.Skills[i].SecurityRequirements, parsed.Skills[i].SecurityRequirements, built.Skills[i].ID)
	}

	omit := card.V03(card.Build(oauthConfig(config.SecurityRequirementsOmit), securityCaps(), card.Options{}))
	require.Nil(t, omit.Security, "the same switch as the 1.0 card")
}

// TestSecurityGolden: the 1.0 card with an oauth2 and an openIdConnect scheme and requirements
// in the proto form, valid against the A2A JSON Schema.
func TestSecurityGolden(t *testing.T) {
	b, err := card.MarshalIndent(card.Build(oauthConfig(config.SecurityRequirementsProto), securityCaps(), card.Options{}))
	require.NoError(t, err)
	require.NoError(t, card.ValidateJSON(b))
	requireGolden(t, "security.golden.json", b, true)
}

// TestGRPCInterfaceURL: the gRPC interface is a gRPC target derived from agent.url, or
// agent.interface_urls.grpc; the HTTP bindings take their overrides too.
func TestGRPCInterfaceURL(t *testing.T) {
	for agentURL, want := range map[string]string{
		"http://127.0.0.1:8080":           "dns:///127.0.0.1:8080",
		"https://finance.example.com/a2a": "dns:///finance.example.com:443",
		"http://agent.example.com":        "dns:///agent.example.com:80",
		"http://[::1]:9000/":              "dns:///[::1]:9000",
	} {
		cfg := fixtureConfig()
		cfg.Agent.URL = agentURL
		c := card.Build(cfg, nil, card.Options{})
		urls := map[a2a.TransportProtocol]string{}
		for _, i := range c.SupportedInterfaces {
			urls[i.ProtocolBinding] = i.URL
		}
		require.Equal(t, map[a2a.TransportProtocol]string{
			a2a.TransportProtocolJSONRPC: agentURL, a2a.TransportProtocolHTTPJSON: agentURL, a2a.TransportProtocolGRPC: want,
		}, urls, agentURL)
	}
	cfg := fixtureConfig()
	cfg.Agent.InterfaceURLs = config.InterfaceURLs{
		JSONRPC: "https://edge.example.com/rpc", HTTPJSON: "https://edge.example.com/rest", GRPC: "dns:///grpc.example.com:8443",
	}
	c := card.Build(cfg, nil, card.Options{})
	require.Equal(t, []string{"https://edge.example.com/rpc", "https://edge.example.com/rest", "dns:///grpc.example.com:8443"},
		[]string{c.SupportedInterfaces[0].URL, c.SupportedInterfaces[1].URL, c.SupportedInterfaces[2].URL})
	require.Equal(t, "https://edge.example.com/rpc", card.V03(c).URL, "the 0.3 card's url is the JSON-RPC interface")
}

package card_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
)

func TestBuildGolden(t *testing.T) {
	v, err := card.NewValidator()
	require.NoError(t, err)

	tests := []struct {
		name string
		cfg  func() *config.Config
		caps []manifest.Capability
		opts card.Options
	}{
		{
			name: "public-only",
			cfg:  fixtureConfig,
			// The removed capability is skipped even though it is passed in.
			caps: []manifest.Capability{oldExport(), lookupInvoice()},
			opts: card.Options{ExtendedCard: true},
		},
		{
			name: "extended-deprecated",
			cfg:  fixtureConfig,
			caps: []manifest.Capability{
				reconcileInvoiceV2(), deprecated(reconcileInvoice(), "reconcile-invoice-v2"), lookupInvoice(),
			},
			opts: card.Options{ExtendedCard: true},
		},
		{
			name: "no-issuers",
			cfg: func() *config.Config {
				c := fixtureConfig()
				c.Auth = config.Auth{}
				c.Agent.Provider = nil
				c.Agent.DocumentationURL = ""
				c.Agent.Streaming = ptr(false)
				return c
			},
			caps: []manifest.Capability{lookupInvoice()},
		},
		{
			name: "extensions",
			cfg: func() *config.Config {
				c := fixtureConfig()
				c.Auth.AnonymousPublic = false
				c.Agent.Extensions = []config.Extension{
					{URI: "https://capgate.dev/ext/routing-hint/v1", Description: "Accepts metadata.skillId as a routing hint."},
					{
						URI: "https://example.com/ext/cost/v1", Description: "Reports the cost class of each call.", Required: true,
						Params: map[string]any{"currency": "EUR", "classes": []any{"low", "medium", "high"}},
					},
				}
				return c
			},
			caps: []manifest.Capability{lookupInvoice(), deprecated(reconcileInvoice(), "")},
			opts: card.Options{ExtendedCard: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := card.Build(tt.cfg(), tt.caps, tt.opts)
			b, err := card.MarshalIndent(c)
			require.NoError(t, err)
			require.NoError(t, v.Validate(b))
			requireGolden(t, tt.name+".golden.json", b, true)
		})
	}
}

func TestMarshalDeterministic(t *testing.T) {
	cfg := fixtureConfig()
	cfg.Agent.Extensions = []config.Extension{{URI: "urn:x", Params: map[string]any{"b": 1, "a": 2, "c": map[string]any{"z": 1, "y": 2}}}}
	caps := []manifest.Capability{reconcileInvoice(), lookupInvoice(), forecastCashflow()}
	reversed := []manifest.Capability{forecastCashflow(), lookupInvoice(), reconcileInvoice()}

	first, err := card.Marshal(card.Build(cfg, caps, card.Options{}))
	require.NoError(t, err)
	for range 20 {
		again, err := card.Marshal(card.Build(cfg, reversed, card.Options{}))
		require.NoError(t, err)
		require.Equal(t, string(first), string(again))
	}
	require.NotContains(t, string(first), "\n", "Marshal is compact")
	require.NotContains(t, string(first), `\u003c`, "no HTML escaping")
}

func TestBuildSkills(t *testing.T) {
	tests := []struct {
		name      string
		caps      []manifest.Capability
		wantIDs   []string
		wantDescs map[string]string
	}{
		{
			name:    "sorted by id, removed skipped",
			caps:    []manifest.Capability{reconcileInvoice(), oldExport(), lookupInvoice(), forecastCashflow()},
			wantIDs: []string{"forecast-cashflow", "lookup-invoice", "reconcile-invoice"},
		},
		{
			name:    "duplicate id kept once",
			caps:    []manifest.Capability{lookupInvoice(), lookupInvoice()},
			wantIDs: []string{"lookup-invoice"},
		},
		{
			name:    "none",
			wantIDs: []string{},
		},
		{
			name:    "deprecated with replacement",
			caps:    []manifest.Capability{deprecated(reconcileInvoice(), "reconcile-invoice-v2")},
			wantIDs: []string{"reconcile-invoice"},
			wantDescs: map[string]string{
				"reconcile-invoice": "Matches an invoice to its purchase order and lists line-level differences. Deprecated: use reconcile-invoice-v2 instead.",
			},
		},
		{
			name:    "deprecated without replacement, description without final stop",
			caps:    []manifest.Capability{deprecated(reconcileInvoiceV2(), "")},
			wantIDs: []string{"reconcile-invoice-v2"},
			wantDescs: map[string]string{
				"reconcile-invoice-v2": "Matches an invoice to purchase orders and goods receipts, with tolerances per line. Deprecated; it will be removed.",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := card.Build(fixtureConfig(), tt.caps, card.Options{})
			ids := []string{}
			for _, s := range c.Skills {
				ids = append(ids, s.ID)
				require.NotNil(t, s.Tags)
				if want, ok := tt.wantDescs[s.ID]; ok {
					require.Equal(t, want, s.Description)
				}
			}
			require.Equal(t, tt.wantIDs, ids)
			b, err := card.Marshal(c)
			require.NoError(t, err)
			require.NoError(t, card.ValidateJSON(b))
		})
	}
}

func TestBuildDoesNotAliasManifests(t *testing.T) {
	caps := []manifest.Capability{reconcileInvoice()}
	c := card.Build(fixtureConfig(), caps, card.Options{})
	c.Skills[0].Tags[0] = "changed"
	c.Skills[0].InputModes[0] = "changed"
	require.Equal(t, "finance", caps[0].Skill.Tags[0])
	require.Equal(t, "text/plain", caps[0].Skill.InputModes[0])
}

var versionRE = regexp.MustCompile(`^1\.4\.0\+skills\.[0-9a-f]{8}$`)

func TestVersion(t *testing.T) {
	cfg := fixtureConfig()
	public := card.Build(cfg, []manifest.Capability{lookupInvoice()}, card.Options{})
	extended := card.Build(cfg, []manifest.Capability{lookupInvoice(), reconcileInvoice()}, card.Options{})
	changed := lookupInvoice()
	changed.Skill.Examples = append(changed.Skill.Examples, "Is INV-1 paid?")
	edited := card.Build(cfg, []manifest.Capability{changed}, card.Options{})

	for _, c := range []*a2a.AgentCard{public, extended, edited} {
		require.Regexp(t, versionRE, c.Version)
		require.Equal(t, "1.4.0", card.BaseVersion(c.Version))
	}
	require.NotEqual(t, public.Version, extended.Version, "different skill lists, different versions")
	require.NotEqual(t, public.Version, edited.Version, "an edited skill changes the version")

	// Card-level changes that are not skills do not change the version.
	cfg2 := fixtureConfig()
	cfg2.Agent.Description = "Something else."
	require.Equal(t, public.Version, card.Build(cfg2, []manifest.Capability{lookupInvoice()}, card.Options{}).Version)

	tests := []struct{ base, want string }{
		{"2.0.0", "2.0.0+skills."},
		{"2.0.0-rc.1", "2.0.0-rc.1+skills."},
		{"2.0.0+build.7", "2.0.0+build.7.skills."},
		{"", "0.0.0+skills."},
	}
	for _, tt := range tests {
		t.Run(tt.base, func(t *testing.T) {
			got := card.Version(tt.base, public.Skills)
			require.True(t, strings.HasPrefix(got, tt.want), got)
			require.Len(t, got, len(tt.want)+8)
		})
	}
}

func TestSkillsHashCanonical(t *testing.T) {
	// The hash is over sorted-key canonical JSON, not a2a-go's field order.
	skills := []a2a.AgentSkill{{ID: "a", Name: "A <b>", Description: "d", Tags: []string{"t"}}}
	want := `[{"description":"d","id":"a","name":"A <b>","tags":["t"]}]`
	require.Equal(t, sha256Hex(want), card.SkillsHash(skills))
	require.Equal(t, sha256Hex(`[]`), card.SkillsHash(nil))
}

func TestBuildSecurity(t *testing.T) {
	tests := []struct {
		name     string
		auth     config.Auth
		wantDesc string
	}{
		{name: "no issuers"},
		{
			name:     "one issuer, authenticated only",
			auth:     config.Auth{Issuers: []config.Issuer{{Issuer: "https://a.example"}, {Issuer: "https://a.example"}}},
			wantDesc: "JWT bearer token issued by https://a.example. Required for every request.",
		},
		{
			name: "anonymous public",
			auth: config.Auth{
				AnonymousPublic: true,
				Issuers:         []config.Issuer{{Issuer: "https://a.example"}, {Issuer: "https://b.example"}},
			},
			wantDesc: "JWT bearer token issued by https://a.example, https://b.example. Required for every request except calls to public skills that need no scopes.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fixtureConfig()
			cfg.Auth = tt.auth
			c := card.Build(cfg, nil, card.Options{})
			require.Nil(t, c.SecurityRequirements, "see Build: a2a-go#430")
			if tt.wantDesc == "" {
				require.Nil(t, c.SecuritySchemes)
				return
			}
			require.Equal(t, a2a.NamedSecuritySchemes{
				card.BearerSchemeName: a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", BearerFormat: "JWT", Description: tt.wantDesc},
			}, c.SecuritySchemes)
		})
	}
}

// TestOfficialClientReadsCard parses served bytes the way a2a-go's card
// resolver does and requires nothing to be lost.
func TestOfficialClientReadsCard(t *testing.T) {
	cfg := fixtureConfig()
	cfg.Agent.Extensions = []config.Extension{{URI: "urn:x", Required: true, Params: map[string]any{"k": "v"}}}
	want := card.Build(cfg, []manifest.Capability{lookupInvoice(), reconcileInvoice()}, card.Options{ExtendedCard: true})
	b, err := card.Marshal(want)
	require.NoError(t, err)

	var got a2a.AgentCard
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, want, &got)
}

func TestNeedsExtendedCard(t *testing.T) {
	tests := []struct {
		name    string
		setting string
		caps    []manifest.Capability
		want    bool
	}{
		{name: "auto, public only", setting: "auto", caps: []manifest.Capability{lookupInvoice()}, want: false},
		{name: "empty means auto", caps: []manifest.Capability{lookupInvoice(), reconcileInvoice()}, want: true},
		{name: "auto, extended", setting: "auto", caps: []manifest.Capability{lookupInvoice(), reconcileInvoice()}, want: true},
		{name: "auto, removed extended does not count", setting: "auto", caps: []manifest.Capability{
			lookupInvoice(), func() manifest.Capability { m := reconcileInvoice(); m.State = manifest.StateRemoved; return m }(),
		}, want: false},
		{name: "auto, public preview", setting: "auto", caps: []manifest.Capability{
			func() manifest.Capability { m := lookupInvoice(); m.State = manifest.StatePreview; return m }(),
		}, want: true},
		{name: "auto, internal does not count", setting: "auto", caps: []manifest.Capability{lookupInvoice(), auditTrail()}, want: false},
		{name: "on forces", setting: "on", caps: []manifest.Capability{lookupInvoice()}, want: true},
		{name: "off forces", setting: "off", caps: []manifest.Capability{reconcileInvoice(), forecastCashflow()}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fixtureConfig()
			cfg.Cards.ExtendedCard = tt.setting
			require.Equal(t, tt.want, card.NeedsExtendedCard(cfg, tt.caps))
		})
	}
}

// TestBuildGRPCInterface: the GRPC interface is in the 1.0 card unless agent.grpc is false, and
// never in the 0.3 card (the gateway serves gRPC in 1.0 only).
func TestBuildGRPCInterface(t *testing.T) {
	bindings := func(c *a2a.AgentCard) []a2a.TransportProtocol {
		var out []a2a.TransportProtocol
		for _, i := range c.SupportedInterfaces {
			out = append(out, i.ProtocolBinding)
		}
		return out
	}
	cfg := fixtureConfig()
	on := card.Build(cfg, nil, card.Options{})
	require.Equal(t, []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC}, bindings(on))
	v03 := card.V03(on).AdditionalInterfaces
	require.Len(t, v03, 2)
	for _, i := range v03 {
		require.NotEqual(t, "GRPC", string(i.Transport))
	}
	require.Len(t, on.SupportedInterfaces, 3, "V03 does not change the 1.0 card")

	off := false
	cfg.Agent.GRPC = &off
	require.Equal(t, []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON}, bindings(card.Build(cfg, nil, card.Options{})))
}

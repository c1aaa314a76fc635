package card_test

import (
	"encoding/json"
	"testing"

	a2alegacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
)

// TestV03Golden: the 0.3 projection of the fixture cards, and what a2a-go's
// own 0.3 card parser reads back from it.
func TestV03Golden(t *testing.T) {
	tests := []struct {
		name string
		cfg  func() *config.Config
		caps []manifest.Capability
		opts card.Options
	}{
		{"public-only", fixtureConfig, []manifest.Capability{lookupInvoice()}, card.Options{ExtendedCard: true}},
		{"no-issuers", func() *config.Config {
			c := fixtureConfig()
			c.Auth = config.Auth{}
			c.Agent.Provider = nil
			c.Agent.Streaming = ptr(false)
			return c
		}, []manifest.Capability{lookupInvoice(), deprecated(reconcileInvoice(), "")}, card.Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v1 := card.Build(tt.cfg(), tt.caps, tt.opts)
			b, err := card.MarshalV03Indent(v1)
			require.NoError(t, err)
			requireGolden(t, tt.name+".v03.golden.json", b, true)

			compact, err := card.MarshalV03(v1)
			require.NoError(t, err)
			require.JSONEq(t, string(b), string(compact))
			require.NotContains(t, string(compact), "\n")

			var doc map[string]any
			require.NoError(t, json.Unmarshal(compact, &doc))
			require.Equal(t, "0.3.0", doc["protocolVersion"])
			require.Equal(t, v1.SupportedInterfaces[0].URL, doc["url"])
			require.Equal(t, "JSONRPC", doc["preferredTransport"])
			require.NotContains(t, doc, "supportedInterfaces", "a pure 0.3 card, not the 1.0/0.3 union")

			var legacy a2alegacy.AgentCard
			require.NoError(t, json.Unmarshal(compact, &legacy))
			require.Equal(t, []a2alegacy.AgentInterface{
				{Transport: a2alegacy.TransportProtocolJSONRPC, URL: v1.SupportedInterfaces[0].URL},
				{Transport: a2alegacy.TransportProtocolHTTPJSON, URL: v1.SupportedInterfaces[1].URL},
			}, legacy.AdditionalInterfaces)
			require.Equal(t, tt.opts.ExtendedCard, legacy.SupportsAuthenticatedExtendedCard)

			// a2a-go reads it back: its conversion keeps every interface;
			// (it does not map skills; the card parser below does); its card parser keeps only the preferred one when the others
			// share its URL (a2av0 skips additional interfaces at card.url).
			back := a2av0.ToV1AgentCard(&legacy)
			require.Equal(t, v1.Version, back.Version)
			require.Equal(t, v1.Capabilities.Streaming, back.Capabilities.Streaming)
			require.Len(t, back.SupportedInterfaces, 2)
			for i, iface := range back.SupportedInterfaces {
				require.Equal(t, v1.SupportedInterfaces[i].ProtocolBinding, iface.ProtocolBinding)
				require.Contains(t, []a2a.ProtocolVersion{"0.3", "0.3.0"}, iface.ProtocolVersion)
			}
			parsed, err := a2av0.NewAgentCardParser()(compact)
			require.NoError(t, err)
			require.Equal(t, v1.Skills, parsed.Skills)
			require.Equal(t, len(v1.SecuritySchemes), len(parsed.SecuritySchemes))
			require.Equal(t, a2a.TransportProtocolJSONRPC, parsed.SupportedInterfaces[0].ProtocolBinding)
		})
	}
}

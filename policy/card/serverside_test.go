package card_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/policy/manifest"
)

// TestServerSideFieldsNeverInCard: limits and data schemas are for the
// policy, the router and the handler; a card built from a capability that
// has them is byte for byte the card of the same capability without them
// (version included).
func TestServerSideFieldsNeverInCard(t *testing.T) {
	schema, err := manifest.CompileDataSchema(map[string]any{
		"title": "remittance-advice-shape", "type": "object", "required": []any{"remittance_ref"},
		"properties": map[string]any{"remittance_ref": map[string]any{"type": "string", "pattern": "^RA-SECRET-[0-9]+$"}},
	})
	require.NoError(t, err)
	plain := []manifest.Capability{lookupInvoice(), reconcileInvoice()}
	rich := []manifest.Capability{lookupInvoice(), reconcileInvoice()}
	rich[0].Limits = map[string]any{"max_body_bytes": int64(65536), "max_parts": int64(4), "max_file_bytes": int64(1 << 20), "cost_class": "tier-secret-high"}
	rich[1].Limits = map[string]any{"max_pdf_pages": int64(200)}
	rich[1].Skill.DataSchemas = []manifest.DataSchema{schema}

	for _, opts := range []card.Options{{}, {ExtendedCard: true}} {
		want, err := card.Marshal(card.Build(fixtureConfig(), plain, opts))
		require.NoError(t, err)
		got, err := card.Marshal(card.Build(fixtureConfig(), rich, opts))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		for _, leak := range []string{"limits", "max_body_bytes", "max_parts", "max_file_bytes", "max_pdf_pages", "cost_class",
			"tier-secret-high", "data_schemas", "remittance", "RA-SECRET"} {
			require.NotContains(t, string(got), leak)
		}
	}
}

package router

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/protocol"
)

func schema(t *testing.T, required ...string) manifest.DataSchema {
	t.Helper()
	props := map[string]any{}
	req := make([]any, 0, len(required))
	for _, r := range required {
		props[r] = map[string]any{"type": "string", "minLength": 1}
		req = append(req, r)
	}
	s, err := manifest.CompileDataSchema(map[string]any{"type": "object", "required": req, "properties": props})
	require.NoError(t, err)
	return s
}

// structuredFixture: two skills with shapes of their own, two that share
// one (invoice_id), one without schemas, and a removed one with a shape.
func structuredFixture(t *testing.T) *manifest.Registry {
	json := []string{"text/plain", "application/json"}
	skill := func(name, desc string, schemas ...manifest.DataSchema) manifest.Skill {
		return manifest.Skill{Name: name, Description: desc, Tags: []string{"finance"}, InputModes: json, DataSchemas: schemas}
	}
	return manifest.NewRegistry([]manifest.Capability{
		{ID: "apply-remittance", State: manifest.StateGA, Skill: skill("Apply a remittance advice",
			"Applies a remittance advice to open invoices.", schema(t, "remittance_ref", "payer"))},
		{ID: "submit-expense", State: manifest.StateGA, Skill: skill("Submit an expense",
			"Files an expense claim for approval.", schema(t, "expense_id", "employee"))},
		{ID: "lookup-invoice", State: manifest.StateGA, Skill: skill("Look up an invoice",
			"Finds an invoice by number and returns its status.", schema(t, "invoice_id"))},
		{ID: "dispute-invoice", State: manifest.StateGA, Skill: skill("Dispute an invoice",
			"Opens a dispute about an invoice with the supplier.", schema(t, "invoice_id"))},
		{ID: "forecast-cashflow", State: manifest.StateGA, Skill: skill("Forecast cash flow",
			"Projects incoming and outgoing payments.")},
		{ID: "apply-remittance-v0", State: manifest.StateRemoved, ReplacedBy: "apply-remittance", Skill: skill("Apply a remittance (v0)",
			"Old remittance matching.", schema(t, "remittance_v0_ref"))},
	})
}

func data(s string) protocol.PartInfo {
	return protocol.PartInfo{Kind: protocol.PartData, MediaType: "application/json", Data: jsontext.Value(s)}
}

func TestRouteStructured(t *testing.T) {
	ix := NewIndex(structuredFixture(t), 0.6)
	everyone := rights{entitled: set("apply-remittance", "submit-expense", "lookup-invoice", "dispute-invoice", "forecast-cashflow"),
		would: set("apply-remittance-v0")}
	noRemittance := rights{entitled: set("submit-expense", "lookup-invoice", "dispute-invoice", "forecast-cashflow")}
	tests := []struct {
		name   string
		caller Caller
		msg    protocol.MessageInfo
		layer  Layer // "" : any layer but structured (fell through)
		capID  string
		code   protocol.Code
	}{
		{name: "one candidate's shape", caller: everyone,
			msg:   protocol.MessageInfo{Parts: []protocol.PartInfo{text("please handle this"), data(`{"remittance_ref": "RA-1", "payer": "ACME", "note": 1}`)}},
			layer: LayerStructured, capID: "apply-remittance"},
		{name: "the data part alone", caller: everyone,
			msg:   protocol.MessageInfo{Parts: []protocol.PartInfo{data(`{"expense_id": "E-7", "employee": "kim"}`)}},
			layer: LayerStructured, capID: "submit-expense"},
		{name: "one of several data parts matches", caller: everyone,
			msg:   protocol.MessageInfo{Parts: []protocol.PartInfo{data(`[1, 2]`), data(`{"expense_id": "E-7", "employee": "kim"}`)}},
			layer: LayerStructured, capID: "submit-expense"},
		{name: "a shape two skills share falls through", caller: everyone,
			msg: protocol.MessageInfo{Parts: []protocol.PartInfo{text("open a dispute about this invoice with the supplier"), data(`{"invoice_id": "INV-1"}`)}}},
		{name: "a malformed part (wrong type) falls through", caller: everyone,
			msg: protocol.MessageInfo{Parts: []protocol.PartInfo{text("apply this remittance advice"), data(`{"remittance_ref": 7, "payer": "ACME"}`)}}},
		{name: "a malformed part (missing member) falls through", caller: everyone,
			msg: protocol.MessageInfo{Parts: []protocol.PartInfo{text("apply this remittance advice"), data(`{"remittance_ref": "RA-1"}`)}}},
		{name: "a data part that is not an object falls through", caller: everyone,
			msg: protocol.MessageInfo{Parts: []protocol.PartInfo{text("apply this remittance advice"), data(`"RA-1"`)}}},
		{name: "no data part, no structured layer", caller: everyone,
			msg: protocol.MessageInfo{Parts: []protocol.PartInfo{text("apply this remittance advice from ACME")}}},
		{name: "a shape of a capability the caller is not entitled to decides nothing", caller: noRemittance,
			msg: protocol.MessageInfo{Parts: []protocol.PartInfo{text("please handle this"), data(`{"remittance_ref": "RA-1", "payer": "ACME"}`)}}},
		{name: "an entitled hint comes first", caller: everyone,
			msg:   protocol.MessageInfo{SkillHint: "forecast-cashflow", Parts: []protocol.PartInfo{data(`{"expense_id": "E-7", "employee": "kim"}`)}},
			layer: LayerHint, capID: "forecast-cashflow"},
		{name: "a removed capability's shape names its replacement", caller: everyone,
			msg:  protocol.MessageInfo{Parts: []protocol.PartInfo{data(`{"remittance_v0_ref": "R-0"}`)}},
			code: protocol.UnsupportedOperation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ix.Route(&tt.msg, tt.caller)
			if tt.code != "" {
				require.NotNil(t, err)
				require.Equal(t, tt.code, err.Code, err.Message)
				return
			}
			require.Nil(t, err)
			if tt.layer == "" {
				require.NotEqual(t, LayerStructured, d.Layer, "fell through to the classifier")
				require.Contains(t, []Layer{LayerClassifier, LayerClarify}, d.Layer)
				return
			}
			require.Equal(t, tt.layer, d.Layer)
			require.Equal(t, tt.capID, d.Capability)
			require.Equal(t, 1.0, d.Confidence)
		})
	}
}

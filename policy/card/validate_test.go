package card_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/policy/manifest"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestValidate(t *testing.T) {
	v, err := card.NewValidator()
	require.NoError(t, err)

	base := func() map[string]any {
		b, err := card.Marshal(card.Build(fixtureConfig(), []manifest.Capability{lookupInvoice()}, card.Options{}))
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}
	skill := func(m map[string]any) map[string]any { return m["skills"].([]any)[0].(map[string]any) }

	tests := []struct {
		name    string
		mutate  func(m map[string]any)
		wantErr []string // substrings; empty: valid
	}{
		{name: "generated card", mutate: func(map[string]any) {}},
		{name: "no skills is allowed", mutate: func(m map[string]any) { m["skills"] = []any{} }},
		{name: "unknown field (schema)", mutate: func(m map[string]any) { m["colour"] = "red" }, wantErr: []string{"agent card schema", "colour"}},
		{name: "wrong type (schema)", mutate: func(m map[string]any) { m["capabilities"] = map[string]any{"streaming": "yes"} }, wantErr: []string{"agent card schema"}},
		{
			name: "a2a-go bare-array scopes (schema)",
			mutate: func(m map[string]any) {
				m["securityRequirements"] = []any{map[string]any{"schemes": map[string]any{"bearer": []any{}}}}
			},
			wantErr: []string{"agent card schema"},
		},
		{
			name: "ProtoJSON StringList scopes",
			mutate: func(m map[string]any) {
				m["securityRequirements"] = []any{map[string]any{"schemes": map[string]any{"bearer": map[string]any{"list": []any{}}}}}
			},
		},
		{
			name: "required fields missing",
			mutate: func(m map[string]any) {
				delete(m, "name")
				m["version"] = ""
				m["supportedInterfaces"] = []any{}
				delete(m, "capabilities")
				m["defaultOutputModes"] = []any{}
				delete(m, "skills")
			},
			wantErr: []string{"/name is required", "/version is required", "/supportedInterfaces is required",
				"/capabilities is required", "/defaultOutputModes is required", "/skills is required"},
		},
		{
			name: "skill required fields",
			mutate: func(m map[string]any) {
				s := skill(m)
				delete(s, "id")
				s["tags"] = []any{}
			},
			wantErr: []string{"/skills/0/id is required", "/skills/0/tags is required"},
		},
		{
			name: "interface and provider fields",
			mutate: func(m map[string]any) {
				m["supportedInterfaces"].([]any)[1].(map[string]any)["protocolVersion"] = ""
				m["provider"].(map[string]any)["url"] = ""
			},
			wantErr: []string{"/supportedInterfaces/1/protocolVersion is required", "/provider/url is required"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			tt.mutate(m)
			b, err := json.Marshal(m)
			require.NoError(t, err)
			err = v.Validate(b)
			if len(tt.wantErr) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range tt.wantErr {
				require.ErrorContains(t, err, want)
			}
		})
	}
}

func TestValidateJSONNotJSON(t *testing.T) {
	require.Error(t, card.ValidateJSON([]byte(`{"name":`)))
	require.ErrorContains(t, card.ValidateJSON([]byte(`[]`)), "not a JSON object")
}

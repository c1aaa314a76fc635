package diag_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/diag"
)

func TestSuggest(t *testing.T) {
	fields := []string{"id", "state", "visibility", "replaced_by", "skill", "requires_scopes", "tenants", "handler", "limits", "owner"}
	for _, tc := range []struct {
		word, want string
		vocab      []string
	}{
		{"visiblity", "visibility", fields},
		{"requires_scope", "requires_scopes", fields},
		{"handlr", "handler", fields},
		{"Visibility", "visibility", fields},
		{"requiresScopes", "requires_scopes", fields},
		{"stat", "state", fields},
		{"max_part", "max_parts", []string{"max_body_bytes", "max_parts", "max_file_bytes"}},
		{"extnded", "extended", []string{"public", "extended", "internal"}},
		{"GA", "ga", []string{"preview", "ga", "deprecated", "removed"}},
		{"recon.rn", "recon.run", []string{"recon.run", "forecast.read", "ops.admin"}},
		{"HTTPJSON", "HTTP+JSON", []string{"JSONRPC", "HTTP+JSON", "GRPC"}},
		// Nothing close: no suggestion.
		{"colour", "", fields},
		{"xyz", "", []string{"public", "extended", "internal"}},
		{"", "", fields},
		// A word of the vocabulary needs no suggestion.
		{"owner", "", fields},
	} {
		got, ok := diag.Suggest(tc.word, tc.vocab)
		require.Equal(t, tc.want != "", ok, tc.word)
		require.Equal(t, tc.want, got, tc.word)
	}
	require.Equal(t, "; did you mean visibility?", diag.DidYouMean("visiblity", fields))
	require.Empty(t, diag.DidYouMean("colour", fields))
}

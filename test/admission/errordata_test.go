package admission_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestErrorDataShapeAtBothDoors: a JSON-RPC refusal carries the ErrorInfo as data's one object to
// a caller that names no A2A version (an A2A 0.3 client) and as a list to one that names any
// version, 0.3 included — the same bytes at both doors, for a refusal by admission and one by
// the parser.
func TestErrorDataShapeAtBothDoors(t *testing.T) {
	e := startBoth(t)
	owner := classes(t, e)[0]
	for _, tc := range []struct {
		name, query string
		header      []string
		method      string
		object      bool
	}{
		{name: "no version", method: "tasks/get", object: true},
		{name: "A2A-Version 0.3", header: []string{"A2A-Version", "0.3"}, method: "tasks/get"},
		{name: "A2A-Version 1.0", header: []string{"A2A-Version", "1.0"}, method: "GetTask"},
		{name: "parameter 1.0", query: "?A2A-Version=1.0", method: "GetTask"},
		{name: "unsupported version", header: []string{"A2A-Version", "99.0"}, method: "GetTask"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := header(append([]string{"Content-Type", "application/json", "Authorization", "Bearer " + owner.token}, tc.header...)...)
			for _, body := range []string{
				`{"jsonrpc":"2.0","id":1,"method":"` + tc.method + `","params":{"id":"task-nobody-holds"}}`,
				`{"jsonrpc":"2.0","id":1,`,
			} {
				az := e.extauthz(t, http.MethodPost, "/"+tc.query, h.Clone(), []byte(body))
				gw := e.gateway(t, http.MethodPost, "/"+tc.query, h.Clone(), []byte(body))
				require.False(t, gw.allowed)
				require.JSONEq(t, gw.body, az.body, "the doors answer differently")
				var env struct {
					Error struct {
						Data json.RawMessage `json:"data"`
					} `json:"error"`
				}
				require.NoError(t, json.Unmarshal([]byte(gw.body), &env), gw.body)
				kind := env.Error.Data[0]
				if tc.object {
					require.Equal(t, byte('{'), kind, "%s", gw.body)
				} else {
					require.Equal(t, byte('['), kind, "%s", gw.body)
				}
			}
		})
	}
}

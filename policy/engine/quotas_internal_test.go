package engine

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/quota"
)

// reportWith is a well-formed decision report holding quotas q.
func reportWith(t *testing.T, q string) any {
	t.Helper()
	doc := `{"capability":"c","exists":true,"visible":true,"entitled":true,"allow":true,
		"reasons":{"visible":[],"entitled":[]},"limits":{},"quotas":` + q + `}`
	d := json.NewDecoder(stringsReader(doc))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v))
	return v
}

// TestParseQuotas: the decision's quotas read into quota.Applied, sorted
// by id; every malformed shape is an error (never a decision without them).
func TestParseQuotas(t *testing.T) {
	good := `{"id":"plan.free","plan":"free","unit":"calls","limit":100,"window_seconds":3600,"cost":1,
		"key":[{"name":"caller","value":""},{"name":"capability","value":"c"}],"on_store_error":"open"}`
	rate := `{"id":"rate.c","unit":"units","limit":5,"window_seconds":60,"cost":2,"key":[{"name":"tenant","value":"acme"}],"on_store_error":"closed"}`
	d, err := parseDecision(reportWith(t, "["+good+","+rate+"]"))
	require.NoError(t, err)
	require.Equal(t, []quota.Applied{
		{ID: "plan.free", Plan: "free", Unit: quota.Calls, Limit: 100, Window: time.Hour, Cost: 1,
			Key: []quota.KeyPart{{Name: "caller"}, {Name: "capability", Value: "c"}}, OnStoreError: quota.FailOpen},
		{ID: "rate.c", Unit: quota.Units, Limit: 5, Window: time.Minute, Cost: 2,
			Key: []quota.KeyPart{{Name: "tenant", Value: "acme"}}, OnStoreError: quota.FailClosed},
	}, d.Quotas)

	for _, ok := range []string{`[]`, `null`} {
		d, err := parseDecision(reportWith(t, ok))
		require.NoError(t, err, ok)
		require.Empty(t, d.Quotas)
	}
	for name, bad := range map[string]string{
		"not a list":     `{}`,
		"not an object":  `["plan.free"]`,
		"repeated id":    `[` + good + `,` + good + `]`,
		"unknown member": `[{"id":"x","unit":"calls","limit":1,"window_seconds":1,"cost":1,"key":[{"name":"caller","value":""}],"on_store_error":"open","extra":1}]`,
		"fraction":       `[{"id":"x","unit":"calls","limit":1.5,"window_seconds":1,"cost":1,"key":[{"name":"caller","value":""}],"on_store_error":"open"}]`,
		"string limit":   `[{"id":"x","unit":"calls","limit":"1","window_seconds":1,"cost":1,"key":[{"name":"caller","value":""}],"on_store_error":"open"}]`,
		"zero window":    `[{"id":"x","unit":"calls","limit":1,"window_seconds":0,"cost":1,"key":[{"name":"caller","value":""}],"on_store_error":"open"}]`,
		"huge window":    `[{"id":"x","unit":"calls","limit":1,"window_seconds":999999999999,"cost":1,"key":[{"name":"caller","value":""}],"on_store_error":"open"}]`,
		"bad unit":       `[{"id":"x","unit":"tokens","limit":1,"window_seconds":1,"cost":1,"key":[{"name":"caller","value":""}],"on_store_error":"open"}]`,
		"bad mode":       `[{"id":"x","unit":"calls","limit":1,"window_seconds":1,"cost":1,"key":[{"name":"caller","value":""}],"on_store_error":"sometimes"}]`,
		"missing mode":   `[{"id":"x","unit":"calls","limit":1,"window_seconds":1,"cost":1,"key":[{"name":"caller","value":""}]}]`,
		"bad part":       `[{"id":"x","unit":"calls","limit":1,"window_seconds":1,"cost":1,"key":[{"name":"subject","value":""}],"on_store_error":"open"}]`,
		"part shape":     `[{"id":"x","unit":"calls","limit":1,"window_seconds":1,"cost":1,"key":["caller"],"on_store_error":"open"}]`,
		"empty key":      `[{"id":"x","unit":"calls","limit":1,"window_seconds":1,"cost":1,"key":[],"on_store_error":"open"}]`,
		"plan not text":  `[{"id":"x","plan":1,"unit":"calls","limit":1,"window_seconds":1,"cost":1,"key":[{"name":"caller","value":""}],"on_store_error":"open"}]`,
	} {
		_, err := parseDecision(reportWith(t, bad))
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "decision.quotas", name)
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

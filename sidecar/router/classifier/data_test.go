package classifier

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/routingdata"
)

// manifest is the part of a capability manifest the classifier reads.
type manifest struct {
	ID    string `json:"id"`
	Skill struct {
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Tags        []string `json:"tags"`
		Examples    []string `json:"examples"`
	} `json:"skill"`
}

// loadData reads the CLINC150 skills and dev cases beside the repository
// (../shared/data/routing), skipping the test when they are absent and
// failing it under CI, where a skip would hide that the targets were not
// checked (see routingdata.Load).
func loadData(tb testing.TB) ([]Doc, []Case) {
	tb.Helper()
	raw, dev := routingdata.Load(tb)
	var ms []manifest
	require.NoError(tb, json.Unmarshal(raw, &ms))
	docs := make([]Doc, len(ms))
	for i, m := range ms {
		docs[i] = Doc{ID: m.ID, Name: m.Skill.Name, Description: m.Skill.Description, Tags: m.Skill.Tags, Examples: m.Skill.Examples}
	}
	cases := make([]Case, len(dev))
	for i, c := range dev {
		cases[i] = Case{Text: c.Text, Expect: c.Expect}
	}
	return docs, cases
}

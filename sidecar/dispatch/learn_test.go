package dispatch

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

// TestUnsuccessful: a handler's answer whose task (or status update) failed,
// was rejected or canceled keeps no candidate example, in 1.0 and 0.3 shapes;
// every other state, a message and an unreadable answer do not stop it.
func TestUnsuccessful(t *testing.T) {
	for _, state := range []string{"failed", "rejected", "canceled"} {
		for _, v := range []string{
			`{"task":{"id":"t","status":{"state":"TASK_STATE_` + strings.ToUpper(state) + `"}}}`,
			`{"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_` + strings.ToUpper(state) + `"}}}`,
			`{"kind":"task","id":"t","status":{"state":"` + state + `"}}`,
			`{"kind":"status-update","taskId":"t","status":{"state":"` + state + `"},"final":true}`,
		} {
			require.True(t, unsuccessful(jsontext.Value(v)), v)
		}
	}
	for _, v := range []string{
		`{"task":{"id":"t","status":{"state":"TASK_STATE_COMPLETED"}}}`,
		`{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}}`,
		`{"kind":"task","id":"t","status":{"state":"input-required"}}`,
		`{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"failed"}]}}`,
		`not json`,
	} {
		require.False(t, unsuccessful(jsontext.Value(v)), v)
	}
}

// TestHeldText: the candidate's text is the text parts of the first message
// only (the parts the clarification held), never the answer's, a file's or
// a data part's.
func TestHeldText(t *testing.T) {
	msg := &protocol.MessageInfo{Parts: []protocol.PartInfo{
		{Kind: protocol.PartText, Text: "move my flight"},
		{Kind: protocol.PartRaw, MediaType: "application/pdf"},
		{Kind: protocol.PartData, Data: jsontext.Value(`{"pnr":"ABC123"}`)},
		{Kind: protocol.PartText, Text: "to friday"},
		{Kind: protocol.PartText, Text: "2"}, // the answer
	}}
	require.Equal(t, "move my flight\nto friday", heldText(msg, []byte(`[{},{},{},{}]`)))
	require.Equal(t, "", heldText(msg, []byte(`not parts`)))
	require.Equal(t, "", heldText(nil, []byte(`[{}]`)))
}

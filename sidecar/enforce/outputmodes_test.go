package enforce_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/enforce"
	"github.com/capgate/capgate/sidecar/protocol"
)

func TestOutputModes(t *testing.T) {
	const (
		dataTask10   = `{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED","message":{"messageId":"s","role":"ROLE_AGENT","parts":[{"text":"done"}]}},"artifacts":[{"artifactId":"a","parts":[{"data":{"total":3}}]}]}}`
		pdfMessage10 = `{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"raw":"JVBERi0=","mediaType":"application/pdf"},{"url":"https://x/y"}]}}`
		textMessage  = `{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"# hi","mediaType":"text/markdown; charset=utf-8"}]}}`
		workingTask  = `{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING","message":{"messageId":"s","role":"ROLE_AGENT","parts":[{"text":"working"}]}}}}`
		dataTask03   = `{"kind":"task","id":"t1","contextId":"c1","status":{"state":"completed"},"artifacts":[{"artifactId":"a","parts":[{"kind":"data","data":{"total":3}},{"kind":"file","file":{"bytes":"AA==","mimeType":"image/png"}}]}]}`
		textMsg03    = `{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"hi"}]}`
	)
	tests := []struct {
		name         string
		v            protocol.Version
		accepted     []string
		result       string
		wantProduced []string
		wantMsg      string // "" when admitted
	}{
		{name: "no preference", v: protocol.V1, result: dataTask10},
		{name: "accepted", v: protocol.V1, accepted: []string{"text/plain", "application/json"}, result: dataTask10, wantProduced: []string{"application/json"}},
		{name: "task artifacts only: the status message's text does not count", v: protocol.V1, accepted: []string{"text/plain"}, result: dataTask10,
			wantProduced: []string{"application/json"},
			wantMsg:      "capability c answered with application/json, none of which you accept (acceptedOutputModes: text/plain)"},
		{name: "message parts, defaults for url parts", v: protocol.V1, accepted: []string{"text/plain"}, result: pdfMessage10,
			wantProduced: []string{"application/octet-stream", "application/pdf"},
			wantMsg:      "capability c answered with application/octet-stream, application/pdf, none of which you accept (acceptedOutputModes: text/plain)"},
		{name: "one acceptable part is enough", v: protocol.V1, accepted: []string{"application/pdf"}, result: pdfMessage10,
			wantProduced: []string{"application/octet-stream", "application/pdf"}},
		{name: "wildcard type", v: protocol.V1, accepted: []string{"text/*"}, result: textMessage, wantProduced: []string{"text/markdown"}},
		{name: "wildcard everything", v: protocol.V1, accepted: []string{"*/*"}, result: pdfMessage10, wantProduced: []string{"application/octet-stream", "application/pdf"}},
		{name: "accepted with parameters and case", v: protocol.V1, accepted: []string{"Text/Markdown; charset=utf-8"}, result: textMessage, wantProduced: []string{"text/markdown"}},
		{name: "no output yet", v: protocol.V1, accepted: []string{"application/pdf"}, result: workingTask},
		{name: "0.3 task artifacts", v: protocol.V03, accepted: []string{"text/plain"}, result: dataTask03,
			wantProduced: []string{"application/json", "image/png"},
			wantMsg:      "capability c answered with application/json, image/png, none of which you accept (acceptedOutputModes: text/plain)"},
		{name: "0.3 message", v: protocol.V03, accepted: []string{"text/plain"}, result: textMsg03, wantProduced: []string{"text/plain"}},
		{name: "an answer that cannot be read is not this check's concern", v: protocol.V1, accepted: []string{"text/plain"}, result: `[1]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			produced, err := enforce.OutputModes("c", tt.accepted, jsontext.Value(tt.result), tt.v)
			require.Equal(t, tt.wantProduced, produced)
			if tt.wantMsg == "" {
				require.Nil(t, err)
				return
			}
			require.NotNil(t, err)
			require.Equal(t, protocol.ContentTypeNotSupported, err.Code)
			require.Equal(t, tt.wantMsg, err.Message)
			require.Equal(t, "c", err.Metadata["capabilityId"])
			require.Equal(t, strings.Join(tt.accepted, ","), err.Metadata["accepted"])
			require.Equal(t, strings.Join(tt.wantProduced, ","), err.Metadata["produced"])
		})
	}
}

func TestClipModes(t *testing.T) {
	long := strings.Repeat("é", 40) // 80 bytes
	many := []string{"a/1", "a/2", "a/3", "a/4", "a/5", "a/6", "a/7", "a/8", "a/9", "a/10"}
	got := enforce.ClipModes(append([]string{long}, many...))
	require.Len(t, got, 9)
	require.Equal(t, "…", got[8])
	require.True(t, utf8.ValidString(got[0]))
	require.Equal(t, strings.Repeat("é", 32)+"…", got[0])
	require.Equal(t, []string{"text/plain"}, enforce.ClipModes([]string{"text/plain"}))
}

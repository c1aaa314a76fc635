package enforce_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/enforce"
	"github.com/capgate/capgate/sidecar/protocol"
)

func TestLimits(t *testing.T) {
	text := protocol.PartInfo{Kind: protocol.PartText, MediaType: "text/plain", Text: "hi"}
	pdf := func(n int64) protocol.PartInfo {
		return protocol.PartInfo{Kind: protocol.PartRaw, MediaType: "application/pdf", InlineBytes: n}
	}
	msg := func(parts ...protocol.PartInfo) *protocol.MessageInfo {
		return &protocol.MessageInfo{MessageID: "m", Parts: parts}
	}
	all := map[string]any{"max_body_bytes": int64(1000), "max_parts": int64(3), "max_file_bytes": int64(500), "cost_class": "high"}
	tests := []struct {
		name     string
		limits   map[string]any
		msg      *protocol.MessageInfo
		body     int
		wantCode protocol.Code // "" when admitted
		wantMsg  string
		wantMeta map[string]string
	}{
		{name: "no limits", msg: msg(text, text, text, text, pdf(1<<30)), body: 1 << 30},
		{name: "only limits for the handler", limits: map[string]any{"max_pdf_pages": int64(2), "cost_class": "high"}, msg: msg(text, pdf(1<<20)), body: 1 << 20},
		{name: "within every limit", limits: all, msg: msg(text, pdf(500), pdf(1)), body: 1000},
		{name: "body over", limits: all, msg: msg(text), body: 1001, wantCode: protocol.PayloadTooLarge,
			wantMsg:  "capability c takes messages of at most 1000 bytes; this one has 1001 (limit max_body_bytes)",
			wantMeta: map[string]string{"capabilityId": "c", "limit": "max_body_bytes", "max": "1000"}},
		{name: "too many parts", limits: all, msg: msg(text, text, text, text), body: 10, wantCode: protocol.PayloadTooLarge,
			wantMsg:  "capability c takes at most 3 parts in a message; this one has 4 (limit max_parts)",
			wantMeta: map[string]string{"capabilityId": "c", "limit": "max_parts", "max": "3"}},
		{name: "file over", limits: all, msg: msg(text, pdf(10), pdf(501)), body: 900, wantCode: protocol.PayloadTooLarge,
			wantMsg:  "capability c takes inline files of at most 500 bytes; part 2 has 501 (limit max_file_bytes)",
			wantMeta: map[string]string{"capabilityId": "c", "limit": "max_file_bytes", "max": "500"}},
		{name: "file limit ignores url parts", limits: map[string]any{"max_file_bytes": int64(1)},
			msg: msg(protocol.PartInfo{Kind: protocol.PartURL, MediaType: "application/pdf"}), body: 100},
		{name: "numbers as the policy and bundles give them", limits: map[string]any{"max_parts": json.Number("1"), "max_body_bytes": float64(10)},
			msg: msg(text, text), body: 5, wantCode: protocol.PayloadTooLarge,
			wantMsg: "capability c takes at most 1 part in a message; this one has 2 (limit max_parts)"},
		{name: "body checked first", limits: all, msg: msg(text, text, text, text, pdf(9999)), body: 5000, wantCode: protocol.PayloadTooLarge,
			wantMsg: "capability c takes messages of at most 1000 bytes; this one has 5000 (limit max_body_bytes)"},
		{name: "invalid limit fails closed", limits: map[string]any{"max_parts": "three"}, msg: msg(text), body: 1, wantCode: protocol.Internal,
			wantMsg: "capability c has an invalid max_parts limit"},
		{name: "no message: the body limit still applies", limits: all, body: 2000, wantCode: protocol.PayloadTooLarge,
			wantMsg: "capability c takes messages of at most 1000 bytes; this one has 2000 (limit max_body_bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := enforce.Limits("c", tt.limits, tt.msg, tt.body)
			if tt.wantCode == "" {
				require.Nil(t, err)
				return
			}
			require.NotNil(t, err)
			require.Equal(t, tt.wantCode, err.Code)
			require.Equal(t, tt.wantMsg, err.Message)
			if tt.wantMeta != nil {
				require.Equal(t, tt.wantMeta, err.Metadata)
			}
		})
	}
}

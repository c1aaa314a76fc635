package routing_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// payer may apply remittances and reconcile: two capabilities that take
// JSON data parts, each with a data schema of its own.
var payer = testutil.TokenOptions{Subject: "payer-1", Tenant: "acme", Scopes: []string{"payments.apply", "recon.run"}}

const remittance = `{"remittance_ref": "RA-2201", "payer": "ACME", "amount": 1200, "invoices": ["INV-1042", "INV-1043"]}`

func dataPart(t *testing.T, s string) *a2a.Part {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return a2a.NewDataPart(v)
}

// rpcError is the error member of a JSON-RPC answer.
type rpcError struct {
	Error *struct {
		Code    int                `json:"code"`
		Message string             `json:"message"`
		Data    testutil.ErrorData `json:"data"` // a list in 1.0, one object to 0.3 callers
	} `json:"error"`
}

func sendRaw(t *testing.T, srv *testutil.Server, who testutil.TokenOptions, params string) rpcError {
	t.Helper()
	r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":`+params+`}`,
		"A2A-Version", "1.0", "Authorization", "Bearer "+testutil.Token(t, who))
	var out rpcError
	require.NoError(t, json.Unmarshal(r.Body, &out), string(r.Body))
	return out
}

// TestStructuredRouting: a data part of one capability's shape goes there
// whatever the text says; a shape of neither is left to the classifier.
func TestStructuredRouting(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	c := jsonrpc(t, srv, payer)

	rep := reportOf(t, sendTask(t, c, userMsg(a2a.NewTextPart("here you go"), dataPart(t, remittance))))
	require.Equal(t, "apply-remittance", rep.Capability)
	require.Equal(t, []string{"payments.apply"}, rep.Scopes)
	require.Equal(t, map[string]any{"max_body_bytes": 65536.0, "max_parts": 4.0, "cost_class": "low"}, rep.Limits, "the handler reads the limits from its token")

	rep = reportOf(t, sendTask(t, c, userMsg(a2a.NewTextPart("here you go"), dataPart(t, `{"invoice_id": "INV-20931", "po_number": "PO-5531"}`))))
	require.Equal(t, "reconcile-invoice", rep.Capability)

	// Neither shape: the classifier reads the text.
	rep = reportOf(t, sendTask(t, c, userMsg(a2a.NewTextPart("Reconcile invoice INV-20931 against its PO."), dataPart(t, `{"note": "see attached"}`))))
	require.Equal(t, "reconcile-invoice", rep.Capability)

	layers := map[string]int{}
	for _, e := range srv.DecisionEntries() {
		if e["operation"] == "SendMessage" {
			layer, _ := e["layer"].(string)
			layers[layer]++
		}
	}
	require.Equal(t, 2, layers["structured"], "decision log layers: %v", layers)
}

// TestEnforcedLimits: max_parts, max_body_bytes and max_file_bytes are
// refused by capgate, naming the limit, before the handler is called.
func TestEnforcedLimits(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	msg := func(parts ...string) string {
		// Each case is a new message: its own messageId.
		return `{"message":{"messageId":"m-` + rand.Text() + `","role":"ROLE_USER","parts":[` + strings.Join(parts, ",") + `]}}`
	}
	text := func(s string) string { return `{"text":"` + s + `"}` }
	pdf := func(n int) string {
		return `{"raw":"` + base64.StdEncoding.EncodeToString(make([]byte, n)) + `","mediaType":"application/pdf"}`
	}
	tests := []struct {
		name   string
		who    testutil.TokenOptions
		params string
		limit  string // "" when admitted
		msg    string
	}{
		{name: "four parts are within max_parts", who: payer, params: msg(`{"data":`+remittance+`}`, text("a"), text("b"), text("c"))},
		{name: "five parts are not", who: payer, params: msg(`{"data":`+remittance+`}`, text("a"), text("b"), text("c"), text("d")),
			limit: "max_parts", msg: "capability apply-remittance takes at most 4 parts in a message; this one has 5 (limit max_parts)"},
		{name: "a body over max_body_bytes", who: payer, params: msg(`{"data":`+remittance+`}`, text(strings.Repeat("a", 70000))),
			limit: "max_body_bytes"},
		{name: "a PDF within max_file_bytes", who: partner, params: msg(pdf(1000), text("reconcile this against the PO"))},
		{name: "a PDF over max_file_bytes", who: partner, params: msg(pdf(524289), text("reconcile this against the PO")),
			limit: "max_file_bytes", msg: "capability reconcile-invoice takes inline files of at most 524288 bytes; part 0 has 524289 (limit max_file_bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := len(srv.Audit.Lines())
			out := sendRaw(t, srv, tt.who, tt.params)
			if tt.limit == "" {
				require.Nil(t, out.Error)
				require.Len(t, srv.Audit.Lines(), calls+1, "the handler was called")
				return
			}
			require.NotNil(t, out.Error)
			require.Equal(t, -32600, out.Error.Code)
			require.Contains(t, out.Error.Message, "(limit "+tt.limit+")")
			if tt.msg != "" {
				require.Equal(t, tt.msg, out.Error.Message)
			}
			require.NotEmpty(t, out.Error.Data)
			require.Equal(t, tt.limit, out.Error.Data[0].Metadata["limit"])
			require.Len(t, srv.Audit.Lines(), calls, "the handler was not called")
		})
	}
}

// TestOutputModes: a handler whose answer has no part in a mode the caller
// accepts gives the caller ContentTypeNotSupported, and the audit line
// records it.
func TestOutputModes(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	// lookup-invoice now claims text/plain output too, but its (echo)
	// handler answers with JSON only.
	testutil.EditFile(t, cfg, "capabilities/lookup-invoice.yaml", func(s string) string {
		return strings.Replace(s, "outputModes: [application/json]", "outputModes: [application/json, text/plain]", 1)
	})
	srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
	c := jsonrpc(t, srv, public)
	ask := userMsg(a2a.NewTextPart("What is the status of invoice INV-20931?"))

	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: ask, Config: &a2a.SendMessageConfig{AcceptedOutputModes: []string{"application/json"}}})
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.True(t, ok)
	require.Equal(t, "lookup-invoice", reportOf(t, task).Capability)

	again := *ask
	again.ID = a2a.NewMessageID() // a new message: the same id would be answered with the first call's task
	_, err = c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: &again, Config: &a2a.SendMessageConfig{AcceptedOutputModes: []string{"text/plain"}}})
	require.ErrorIs(t, err, a2a.ErrUnsupportedContentType)
	require.ErrorContains(t, err, "capability lookup-invoice answered with application/json, none of which you accept (acceptedOutputModes: text/plain)")

	lines := srv.Audit.Lines()
	require.NotEmpty(t, lines)
	var last map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	require.Equal(t, "lookup-invoice", last["capability"])
	require.Equal(t, "error:content_type_not_supported", strings.ToLower(last["outcome"].(string)))
	require.Equal(t, []any{"text/plain"}, last["accepted_output_modes"])
	require.Equal(t, []any{"application/json"}, last["produced_output_modes"])
}

// TestEnforcedLimitsEveryBindingAndVersion: the same max_parts refusal
// over HTTP+JSON, over a streamed send, and for an A2A 0.3 caller.
func TestEnforcedLimitsEveryBindingAndVersion(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	tok := "Bearer " + testutil.Token(t, payer)
	five10 := `{"message":{"messageId":"m5-` + rand.Text() + `","role":"ROLE_USER","parts":[{"data":` + remittance + `},{"text":"a"},{"text":"b"},{"text":"c"},{"text":"d"}]}}`

	t.Run("HTTP+JSON", func(t *testing.T) {
		r := srv.Do(t, "POST", "/message:send", five10, "Content-Type", "application/json", "A2A-Version", "1.0", "Authorization", tok)
		require.Equal(t, 413, r.Status, string(r.Body))
		require.Contains(t, string(r.Body), "(limit max_parts)")
	})
	t.Run("streamed", func(t *testing.T) {
		c := jsonrpc(t, srv, payer)
		parts := []*a2a.Part{dataPart(t, remittance), a2a.NewTextPart("a"), a2a.NewTextPart("b"), a2a.NewTextPart("c"), a2a.NewTextPart("d")}
		var err error
		for _, e := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: userMsg(parts...)}) {
			if e != nil {
				err = e
				break
			}
		}
		// Refused before the stream: a plain JSON-RPC error with HTTP 413, which a2a-go's
		// JSON-RPC stream reader reports by its status (docs/interop.md).
		require.ErrorContains(t, err, "unexpected HTTP status: 413")
	})
	t.Run("A2A 0.3", func(t *testing.T) {
		r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m5-`+rand.Text()+`","role":"user","parts":[`+
			`{"kind":"data","data":`+remittance+`},{"kind":"text","text":"a"},{"kind":"text","text":"b"},{"kind":"text","text":"c"},{"kind":"text","text":"d"}]}}}`,
			"Authorization", tok)
		var out rpcError
		require.NoError(t, json.Unmarshal(r.Body, &out), string(r.Body))
		require.NotNil(t, out.Error, string(r.Body))
		require.Equal(t, -32600, out.Error.Code)
		require.Contains(t, out.Error.Message, "(limit max_parts)")
	})
}

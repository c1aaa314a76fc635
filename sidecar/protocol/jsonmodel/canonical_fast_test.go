package jsonmodel

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

// canonicalCases are request params of every operation canonicalParams re-encodes, in the
// shapes clients send and the corners of the ProtoJSON form: proto and JSON names, zero values
// of implicit and explicit presence, enums, both base64 alphabets with and without padding,
// Struct metadata with nested values, numbers of every form, escapes, oneofs, null members.
var canonicalCases = []struct {
	op     protocol.Operation
	params string
	fast   bool // whether appendCanonical handles it (else it gives up to protojson)
}{
	{protocol.SendMessage, `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"reconcile this"}]}}`, true},
	{protocol.SendMessage, `{"message":{"messageId":"m1","contextId":"ctx-1","role":"ROLE_USER","parts":[{"text":"hi"}],"metadata":{"skillId":"lookup-invoice"}},"configuration":{"acceptedOutputModes":["application/json"]}}`, true},
	{protocol.SendMessage, `{"message":{"message_id":"m1","context_id":"c","task_id":"t","role":"ROLE_AGENT","parts":[{"raw":"JVBERi0xLjQK","media_type":"application/pdf","filename":"a.pdf"},{"url":"https://x/y"},{"data":{"b":[1,2.5,-3e-7,1e21,true,null,"s"],"a":{"z":1,"y":{}}}}]}}`, true},
	{protocol.SendMessage, `{"message":{"messageId":"","role":"ROLE_UNSPECIFIED","parts":[],"extensions":[],"referenceTaskIds":["a","b"]},"tenant":""}`, true},
	{protocol.SendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":""}]},"configuration":{"historyLength":0,"returnImmediately":false}}`, true},
	{protocol.SendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"historyLength":3,"returnImmediately":true,"acceptedOutputModes":[]}}`, true},
	{protocol.SendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"-_8"},{"raw":"+/8="},{"raw":""}]}}`, true},
	{protocol.SendMessage, `{"message":{"messageId":"\u00e9\ud83d\ude00\"\\\/\n\t<>&\u2028","role":"ROLE_USER","parts":[{"text":"\u0000"}]}}`, true},
	{protocol.SendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":{}},"metadata":{"k":{"n":0.1,"m":100,"big":12345678901234567890}}}`, true},
	{protocol.SendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x","data":{}}]}}`, false},                             // two members of one oneof
	{protocol.SendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"contextId":null}}`, false},                      // null
	{protocol.SendMessage, `{"message":{"messageId":"m","role":1,"parts":[{"text":"x"}]}}`, false},                                                 // enum as a number
	{protocol.SendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"historyLength":"3"}}`, false}, // int as a string
	{protocol.SendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"historyLength":3.0}}`, false},
	{protocol.SendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"metadata":{"a_b":1,"aB":2}}`, false}, // keys readObject holds as one field
	{protocol.SendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"metadata":{"n":1e400}}`, false},
	{protocol.SendStreamingMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"go"}],"taskId":"t1"}}`, true},
	{protocol.GetTask, `{"id":"t1","historyLength":10}`, true},
	{protocol.GetTask, `{"id":"t1","tenant":"acme"}`, true},
	{protocol.CancelTask, `{"id":"t1","metadata":{"reason":"done"}}`, true},
	{protocol.SubscribeToTask, `{"id":"t1"}`, true},
	{protocol.CreateTaskPushNotificationConfig, `{"taskId":"t1","url":"https://h/hook","token":"tok","authentication":{"scheme":"Bearer","credentials":"c"}}`, true},
	{protocol.GetTaskPushNotificationConfig, `{"taskId":"t1","id":"c1"}`, true},
	{protocol.ListTaskPushNotificationConfigs, `{"taskId":"t1","pageSize":5}`, true},
	{protocol.DeleteTaskPushNotificationConfig, `{"taskId":"t1","id":"c1"}`, true},
	{protocol.GetExtendedAgentCard, `{}`, true},
}

// TestCanonicalFastMatchesProtojson: wherever appendCanonical answers, it answers what the
// protojson round trip (the definition) does, and only for params protojson accepts.
func TestCanonicalFastMatchesProtojson(t *testing.T) {
	for _, tc := range canonicalCases {
		t.Run(string(tc.op)+" "+tc.params, func(t *testing.T) {
			if m := protocol.RequestMessage(tc.op); m != nil {
				ps := newParser()
				require.Nil(t, ps.knownFields(jsontext.Value(tc.params), m.ProtoReflect().Descriptor()), "a case admission accepts")
				ps.release()
			}
			require.Equal(t, tc.fast, checkCanonicalFast(t, tc.op, []byte(tc.params)))
		})
	}
}

// checkCanonicalFast compares appendCanonical with protojsonCanonical on params of op (which
// knownFields accepted) and reports whether the fast path answered.
func checkCanonicalFast(t *testing.T, op protocol.Operation, params []byte) bool {
	t.Helper()
	m := protocol.RequestMessage(op)
	if m == nil {
		return false
	}
	ps := newParser()
	got, ok := ps.appendCanonical(nil, jsontext.Value(params), m.ProtoReflect().Descriptor())
	ps.release()
	want, perr := protojsonCanonical(jsontext.Value(params), protocol.RequestMessage(op), protocol.JSONRPC)
	if !ok {
		return false
	}
	require.Nil(t, perr, "the fast path accepted params protojson refuses: %s", params)
	g, w := jsontext.Value(got), want.Clone()
	require.NoError(t, g.Canonicalize(), "the fast path wrote invalid JSON: %s", got)
	require.NoError(t, w.Canonicalize())
	require.Equal(t, string(w), string(g), "params %s", params)
	return true
}

// FuzzCanonicalFast holds appendCanonical to protojson on any SendMessage params knownFields
// accepts.
func FuzzCanonicalFast(f *testing.F) {
	for _, tc := range canonicalCases {
		if tc.op == protocol.SendMessage {
			f.Add(tc.params)
		}
	}
	md := protocol.RequestMessage(protocol.SendMessage).ProtoReflect().Descriptor()
	f.Fuzz(func(t *testing.T, params string) {
		if !jsontext.Value(params).IsValid() || jsontext.Value(params).Kind() != '{' {
			return
		}
		ps := newParser()
		err := ps.knownFields(jsontext.Value(params), md)
		ps.release()
		if err != nil {
			return
		}
		checkCanonicalFast(t, protocol.SendMessage, []byte(params))
	})
}

// BenchmarkCanonicalParams: the forwarded params of a routed SendMessage, by the fast path and
// by the protojson round trip it stands in for.
func BenchmarkCanonicalParams(b *testing.B) {
	params := jsontext.Value(canonicalCases[1].params)
	md := protocol.RequestMessage(protocol.SendMessage).ProtoReflect().Descriptor()
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ps := newParser()
			if _, ok := ps.appendCanonical(nil, params, md); !ok {
				b.Fatal("not handled")
			}
			ps.release()
		}
	})
	b.Run("protojson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := protojsonCanonical(params, protocol.RequestMessage(protocol.SendMessage), protocol.JSONRPC); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package jsonmodel_test

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
)

// checkResult holds for every parse: exactly one of request and error, a known code, and
// error bodies that are valid JSON.
func checkResult(t *testing.T, r *protocol.Request, err *protocol.Error) {
	t.Helper()
	if err != nil {
		require.Nil(t, r)
		require.True(t, err.Code.Valid(), "code %q", err.Code)
		require.NotEmpty(t, err.Message)
		require.True(t, jsontext.Value(jsonrpcwire.MarshalError(err, nil)).IsValid())
		require.True(t, jsontext.Value(httpjsonwire.MarshalStatus(err)).IsValid())
		if err.ID != nil {
			require.True(t, jsonrpcwire.ValidID(err.ID))
		}
		return
	}
	require.NotNil(t, r)
	require.NotEmpty(t, r.Operation)
	if r.Message != nil {
		require.NotEmpty(t, r.Message.MessageID)
		require.NotEmpty(t, r.Message.Parts)
		for _, p := range r.Message.Parts {
			require.Contains(t, []string{protocol.PartText, protocol.PartRaw, protocol.PartURL, protocol.PartData}, p.Kind)
			require.NotEmpty(t, p.MediaType)
		}
	}
	if r.Tenant != "" {
		require.True(t, protocol.ValidTenant(r.Tenant))
	}
}

func FuzzParseJSONRPC(f *testing.F) {
	for _, s := range []string{
		rpc(`1`, "SendMessage", msg10),
		rpc(`"a"`, "message/send", msg03),
		rpc(`1`, "GetTask", `{"id":"t","tenant":"acme"}`),
		rpc(`null`, "tasks/pushNotificationConfig/set", `{"taskId":"t","pushNotificationConfig":{"url":"https://h"}}`),
		`{"jsonrpc":"2.0","id":1,"method":"GetTask","Method":"SendMessage"}`,
		`[{"jsonrpc":"2.0"}]`,
	} {
		f.Add("1.0", s)
		f.Add("", s)
	}
	f.Fuzz(func(t *testing.T, version, body string) {
		v, verr := protocol.ParseVersion(version)
		if verr != nil {
			want := protocol.VersionNotSupported
			if strings.Contains(version, ",") { // given more than once, or a list
				want = protocol.InvalidRequest
			}
			require.Equal(t, want, verr.Code)
			return
		}
		r, err := jsonrpcwire.ParseJSONRPC(v, ctJSON, []byte(body), protocol.Limits{MaxBodyBytes: 1 << 16, MaxDepth: 16})
		checkResult(t, r, err)
	})
}

func FuzzParseHTTP(f *testing.F) {
	for _, s := range []struct{ method, target, body string }{
		{"POST", "/message:send", msg10},
		{"POST", "/acme/message:stream", msg10},
		{"GET", "/tasks/t1?historyLength=1", ""},
		{"POST", "/tasks/t1:cancel", `{"id":"t1"}`},
		{"DELETE", "/a/tasks/t/pushNotificationConfigs/c", "null"},
		{"GET", "/%2e%2e/tasks/x", ""},
		{"GET", protocol.AgentCardPath, ""},
	} {
		f.Add("1.0", s.method, s.target, s.body)
		f.Add("0.3", s.method, "/v1"+s.target, s.body)
	}
	f.Add("0.3", "POST", "/v1/message:send", jsV03Send) // the 0.3 ProtoJSON form (rest03.go)
	f.Add("0.3", "POST", "/v1/tasks/t1/pushNotificationConfigs", `{"name":"tasks/t1/pushNotificationConfigs/c","pushNotificationConfig":{"id":"c","url":"https://h"}}`)
	f.Fuzz(func(t *testing.T, version, method, target, body string) {
		v, verr := protocol.ParseVersion(version)
		if verr != nil {
			return
		}
		r, err := httpjsonwire.ParseHTTP(v, method, target, ctJSON, []byte(body), protocol.Limits{MaxBodyBytes: 1 << 16, MaxDepth: 16})
		checkResult(t, r, err)
		if err == nil && r.TaskID != "" {
			_, _, ok := httpjsonwire.HTTPCall(protocol.GetTask, "", r.TaskID, "") // a task id a path carries
			require.True(t, ok || r.Operation.Message(), "task id %q", r.TaskID)
		}
	})
}

package wire_test

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/wire"
)

// headerMap is a Header over a plain map (canonical names).
type headerMap map[string][]string

func (h headerMap) Values(n string) []string { return h[n] }

// TestParseErrorData: a JSON-RPC request's ErrorData is the shape protocol.ErrorDataShape gives
// for its headers and query, whether its body parses or not.
func TestParseErrorData(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h     headerMap
		query string
		want  protocol.DataShape
	}{
		{"no version", headerMap{}, "", protocol.DataObject},
		{"A2A-Version 0.3", headerMap{protocol.VersionHeader: {"0.3"}}, "", protocol.DataList},
		{"A2A-Version 1.0", headerMap{protocol.VersionHeader: {"1.0"}}, "", protocol.DataList},
		{"version parameter", headerMap{}, "A2A-Version=1.0", protocol.DataList},
		{"unreadable version", headerMap{protocol.VersionHeader: {"9"}}, "", protocol.DataList},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, protocol.ErrorDataShape(tc.h, tc.query))
			for _, body := range []string{`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t"}}`, `{"jsonrpc":"2.0","id":1,`} {
				r, _ := wire.Parse(protocol.Envelope{Method: "POST", Path: "/", Query: tc.query, Header: tc.h, Body: []byte(body)}, "", protocol.Limits{})
				require.NotNil(t, r)
				require.Equal(t, tc.want, r.ErrorData, "%s", body)
			}
		})
	}
}

// TestHistoryLength: the historyLength a GetTask asks for, and a SendMessage's
// configuration.historyLength, are read into Request.HistoryLength the same way on every
// binding and version: absent is nil, a non-negative integer is kept, a negative one is
// InvalidParams.
func TestHistoryLength(t *testing.T) {
	h := func(v protocol.Version) headerMap {
		return headerMap{"Content-Type": {"application/json"}, protocol.VersionHeader: {string(v)}}
	}
	grpcH := headerMap{"Content-Type": {"application/grpc"}}
	jsonrpc := func(v protocol.Version, method, params string) protocol.Envelope {
		return protocol.Envelope{Method: "POST", Path: "/", Header: h(v), Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`)}
	}
	get := func(v protocol.Version, target string) protocol.Envelope {
		path, query, _ := strings.Cut(target, "?")
		return protocol.Envelope{Method: "GET", Path: path, Query: query, Header: h(v)}
	}
	grpcEnv := func(t *testing.T, method string, m proto.Message) protocol.Envelope {
		b, err := proto.Marshal(m)
		require.NoError(t, err)
		frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b)))
		return protocol.Envelope{Method: "POST", Path: "/" + protocol.GRPCService + "/" + method, Header: grpcH, Body: append(frame, b...), GRPC: true}
	}
	sendV1 := func(cfg string) string {
		return `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hi"}]}` + cfg + `}`
	}
	sendV03 := func(cfg string) string {
		return `{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"hi"}]}` + cfg + `}`
	}
	for _, n := range []*int32{nil, proto.Int32(0), proto.Int32(1), proto.Int32(1 << 20), proto.Int32(-1)} {
		q, cfg := "", ""
		if n != nil {
			q = strconv.Itoa(int(*n))
			cfg = `,"configuration":{"historyLength":` + q + `}`
		}
		envs := map[string]func(t *testing.T) protocol.Envelope{
			"JSON-RPC 1.0 GetTask": func(*testing.T) protocol.Envelope {
				if n == nil {
					return jsonrpc(protocol.V1, "GetTask", `{"id":"t-1"}`)
				}
				return jsonrpc(protocol.V1, "GetTask", `{"id":"t-1","historyLength":`+q+`}`)
			},
			"JSON-RPC 0.3 tasks/get": func(*testing.T) protocol.Envelope {
				if n == nil {
					return jsonrpc(protocol.V03, "tasks/get", `{"id":"t-1"}`)
				}
				return jsonrpc(protocol.V03, "tasks/get", `{"id":"t-1","historyLength":`+q+`}`)
			},
			"JSON-RPC 1.0 SendMessage":    func(*testing.T) protocol.Envelope { return jsonrpc(protocol.V1, "SendMessage", sendV1(cfg)) },
			"JSON-RPC 0.3 message/send":   func(*testing.T) protocol.Envelope { return jsonrpc(protocol.V03, "message/send", sendV03(cfg)) },
			"JSON-RPC 0.3 message/stream": func(*testing.T) protocol.Envelope { return jsonrpc(protocol.V03, "message/stream", sendV03(cfg)) },
			"HTTP+JSON 1.0 GetTask": func(*testing.T) protocol.Envelope {
				if n == nil {
					return get(protocol.V1, "/tasks/t-1")
				}
				return get(protocol.V1, "/tasks/t-1?historyLength="+q)
			},
			"HTTP+JSON 1.0 GetTask history_length": func(*testing.T) protocol.Envelope {
				if n == nil {
					return get(protocol.V1, "/tasks/t-1")
				}
				return get(protocol.V1, "/tasks/t-1?history_length="+q)
			},
			"HTTP+JSON 0.3 GetTask": func(*testing.T) protocol.Envelope {
				if n == nil {
					return get(protocol.V03, "/v1/tasks/t-1")
				}
				return get(protocol.V03, "/v1/tasks/t-1?historyLength="+q)
			},
			"HTTP+JSON 1.0 SendMessage": func(*testing.T) protocol.Envelope {
				return protocol.Envelope{Method: "POST", Path: "/message:send", Header: h(protocol.V1), Body: []byte(sendV1(cfg))}
			},
			"HTTP+JSON 0.3 SendMessage": func(*testing.T) protocol.Envelope {
				return protocol.Envelope{Method: "POST", Path: "/v1/message:send", Header: h(protocol.V03),
					Body: []byte(`{"message":{"messageId":"m-1","role":"ROLE_USER","content":[{"text":"hi"}]}` + cfg + `}`)}
			},
			"gRPC 1.0 GetTask": func(t *testing.T) protocol.Envelope {
				return grpcEnv(t, "GetTask", &a2apb.GetTaskRequest{Id: "t-1", HistoryLength: n})
			},
			"gRPC 1.0 SendMessage": func(t *testing.T) protocol.Envelope {
				return grpcEnv(t, "SendMessage", &a2apb.SendMessageRequest{
					Message:       &a2apb.Message{MessageId: "m-1", Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hi"}}}},
					Configuration: &a2apb.SendMessageConfiguration{HistoryLength: n}})
			},
		}
		for name, env := range envs {
			t.Run(name+"/"+q, func(t *testing.T) {
				r, perr := wire.Parse(env(t), "", protocol.Limits{})
				switch {
				case name == "HTTP+JSON 0.3 SendMessage" && n != nil && *n <= 0:
					// 0.3 ProtoJSON is read through the 0.3 proto, whose history_length is a
					// plain int32 (0 is unset), and a2a-go's pbconv keeps only a positive one.
					require.Nil(t, perr, "%v", perr)
					require.Nil(t, r.HistoryLength)
				case n != nil && *n < 0:
					require.NotNil(t, perr)
					if strings.Contains(name, "GetTask") && strings.HasPrefix(name, "HTTP+JSON") { // the query parameter reader's refusal
						require.Equal(t, protocol.InvalidRequest, perr.Code)
					} else {
						require.Equal(t, protocol.InvalidParams, perr.Code)
					}
					require.Contains(t, perr.Message, "istory")
				case n == nil:
					require.Nil(t, perr, "%v", perr)
					require.Nil(t, r.HistoryLength)
				default:
					require.Nil(t, perr, "%v", perr)
					require.NotNil(t, r.HistoryLength)
					require.Equal(t, int(*n), *r.HistoryLength)
				}
			})
		}
	}
}

// TestHistoryKept: the rule for how much history an answer carries, in each version.
func TestHistoryKept(t *testing.T) {
	n := func(i int) *int { return &i }
	for _, tc := range []struct {
		v      protocol.Version
		length *int
		want   int
	}{
		{protocol.V1, nil, 3}, {protocol.V1, n(0), 0}, {protocol.V1, n(1), 1}, {protocol.V1, n(2), 2}, {protocol.V1, n(1 << 30), 3}, {protocol.V1, n(-1), 0},
		{protocol.V03, nil, 3}, {protocol.V03, n(0), 3}, {protocol.V03, n(1), 1}, {protocol.V03, n(1 << 30), 3}, {protocol.V03, n(-1), 0},
	} {
		require.Equal(t, tc.want, protocol.HistoryKept(tc.v, tc.length, 3), "%s %v", tc.v, tc.length)
	}
	require.Zero(t, protocol.HistoryKept(protocol.V1, nil, 0))
}

package grpcwire

import (
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
)

// forwarder is the gRPC binding's protocol.Forwarder.
type forwarder struct{}

// ForwardParams is the A2A 1.0 JSON-RPC params of a gRPC request: the request message as
// ProtoJSON (lowerCamelCase names), the JSON form the 1.0 JSON-RPC binding uses for the same
// message. It is read from the message bytes the parser read, so a handler is sent exactly
// what admission saw.
func (forwarder) ForwardParams(r *protocol.Request) (jsontext.Value, *protocol.Error) {
	if r.Version != protocol.V1 {
		return nil, protocol.Errorf(protocol.VersionNotSupported, "A2A 0.3 gRPC requests are not served; use %s", protocol.GRPCService)
	}
	m := protocol.RequestMessage(r.Operation)
	if m == nil {
		return nil, protocol.Errorf(protocol.UnsupportedOperation, "%s is not supported over gRPC", r.Operation)
	}
	if err := proto.Unmarshal(r.Proto, m); err != nil {
		return nil, protocol.Wrap(protocol.InvalidRequest, err, "the gRPC request message could not be decoded")
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the gRPC request could not be forwarded")
	}
	return jsontext.Value(b), nil
}

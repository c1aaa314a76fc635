package grpcwire

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonmodel"
)

// Response converts an A2A 1.0 JSON-RPC result of op (for a streaming operation: one
// event) to the binary gRPC response message. Fields the proto does not define are refused
// (protocol.InvalidAgentResponse), not dropped: a caller is never sent less than the handler said
// without knowing it. A JSON null result is the empty message.
func Response(op protocol.Operation, result []byte) ([]byte, *protocol.Error) {
	m := protocol.ResponseMessage(op)
	if m == nil {
		return nil, protocol.Errorf(protocol.UnsupportedOperation, "%s is not supported over gRPC", op)
	}
	if s := bytes.Trim(result, " \t\r\n"); len(s) != 0 && string(s) != "null" {
		if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(s, m); err != nil {
			return nil, protocol.Wrap(protocol.InvalidAgentResponse, err, "the agent's response cannot be expressed as a gRPC message")
		}
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the gRPC response could not be encoded")
	}
	return b, nil
}

// Request converts A2A 1.0 JSON-RPC params of op to the binary gRPC request message: the
// inverse of what ForwardParams reads from a gRPC request. Fields the proto does not define are
// refused (protocol.InvalidParams), not dropped: a handler is never sent less than admission saw.
func Request(op protocol.Operation, params []byte) ([]byte, *protocol.Error) {
	m := protocol.RequestMessage(op)
	if m == nil {
		return nil, protocol.Errorf(protocol.UnsupportedOperation, "%s is not supported over gRPC", op)
	}
	if s := bytes.Trim(params, " \t\r\n"); len(s) != 0 && string(s) != "null" {
		if err := protojson.Unmarshal(s, m); err != nil {
			return nil, protocol.Wrap(protocol.InvalidParams, err, "the request cannot be expressed as a gRPC message")
		}
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the gRPC request could not be encoded")
	}
	return b, nil
}

// Result converts a binary gRPC response message of op (for a streaming operation: one
// event) to its A2A 1.0 JSON-RPC result, the message as ProtoJSON: the inverse of
// Response. google.protobuf.Empty is the JSON null result.
func Result(op protocol.Operation, msg []byte) (jsontext.Value, *protocol.Error) {
	m := protocol.ResponseMessage(op)
	if m == nil {
		return nil, protocol.Errorf(protocol.UnsupportedOperation, "%s is not supported over gRPC", op)
	}
	if err := proto.Unmarshal(msg, m); err != nil {
		return nil, protocol.Wrap(protocol.InvalidAgentResponse, err, "the agent's gRPC response could not be decoded")
	}
	if _, empty := m.(*emptypb.Empty); empty {
		return jsontext.Value("null"), nil
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, protocol.Wrap(protocol.InvalidAgentResponse, err, "the agent's gRPC response has no JSON form")
	}
	return jsontext.Value(b), nil
}

// messageInfo fills r.Message from a 1.0 SendMessageRequest the way JSON-RPC's is filled: the
// message is read as its ProtoJSON (the params ForwardParams sends) by the JSON bindings'
// reader (jsonmodel.MessageOf), so routing and limits see the same parts, media types, skill
// hint and accepted output modes whichever binding carried them, and the same checks (message
// id, part shapes, depth) apply.
func messageInfo(r *protocol.Request, lim protocol.Limits) *protocol.Error {
	params, perr := r.ForwardParams()
	if perr != nil {
		return perr
	}
	info, perr := jsonmodel.MessageOf(params, lim)
	if perr != nil {
		return perr
	}
	info.MessageID, info.TaskID, info.ContextID = r.Message.MessageID, r.Message.TaskID, r.Message.ContextID
	r.Message = info
	return nil
}

package protocol

import (
	"encoding/base64"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// GRPCContentType is the content type of gRPC responses.
const GRPCContentType = "application/grpc"

// GRPCCodeOf maps a google.rpc.Code name (Error.StatusName) to its gRPC status code; an
// unknown name is Internal.
func GRPCCodeOf(name string) codes.Code {
	switch name {
	case "INVALID_ARGUMENT":
		return codes.InvalidArgument
	case "NOT_FOUND":
		return codes.NotFound
	case "FAILED_PRECONDITION":
		return codes.FailedPrecondition
	case "UNIMPLEMENTED":
		return codes.Unimplemented
	case "UNAUTHENTICATED":
		return codes.Unauthenticated
	case "PERMISSION_DENIED":
		return codes.PermissionDenied
	case "UNAVAILABLE":
		return codes.Unavailable
	case "RESOURCE_EXHAUSTED":
		return codes.ResourceExhausted
	default:
		return codes.Internal
	}
}

// GRPCCode is e's gRPC status code.
func (e *Error) GRPCCode() codes.Code { return GRPCCodeOf(e.StatusName()) }

// GRPCMessage percent-encodes a grpc-message value as the gRPC HTTP/2 protocol requires: bytes
// outside printable ASCII, and '%'.
func GRPCMessage(msg string) string {
	const hex = "0123456789ABCDEF"
	clean := true
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < 0x20 || c > 0x7e || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return msg
	}
	b := make([]byte, 0, len(msg)+16)
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			b = append(b, '%', hex[c>>4], hex[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

// GRPCStatus is e as gRPC status headers (trailers): grpc-status, grpc-message, and
// grpc-status-details-bin holding the google.rpc.Status with e's ErrorInfo, from which a2a-go's
// gRPC client reads the A2A error (the status code alone does not tell TaskNotCancelable from
// UnsupportedOperation).
func (e *Error) GRPCStatus() [][2]string {
	return GRPCStatusHeaders(e.StatusName(), e.Message, e.Reason(), e.Metadata)
}

// GRPCStatusHeaders builds the gRPC status headers of an error given by its google.rpc.Code
// name, message and ErrorInfo reason and metadata.
func GRPCStatusHeaders(status, message, reason string, metadata map[string]string) [][2]string {
	code := GRPCCodeOf(status)
	out := [][2]string{{"grpc-status", strconv.Itoa(int(code))}, {"grpc-message", GRPCMessage(message)}}
	st := &rpcstatus.Status{Code: int32(code), Message: message}
	if info, err := anypb.New(&errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: metadata}); err == nil {
		st.Details = []*anypb.Any{info}
	}
	if secs, err := strconv.ParseInt(metadata[MetaRetryAfter], 10, 64); err == nil && secs >= 0 && reason == string(ResourceExhausted) {
		if ri, err := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(secs) * time.Second)}); err == nil {
			st.Details = append(st.Details, ri)
		}
	}
	if b, err := proto.Marshal(st); err == nil {
		out = append(out, [2]string{"grpc-status-details-bin", base64.RawStdEncoding.EncodeToString(b)})
	}
	return out
}

// grpcForwardParams is the A2A 1.0 JSON-RPC params of a gRPC request: the request message as
// ProtoJSON (lowerCamelCase names), the JSON form the 1.0 JSON-RPC binding uses for the same
// message. It is read from the message bytes the parser read, so a handler is sent exactly
// what admission saw.
func (r *Request) grpcForwardParams() (jsontext.Value, *Error) {
	if r.Version != V1 {
		return nil, Errorf(VersionNotSupported, "A2A 0.3 gRPC requests are not served; use %s", GRPCService)
	}
	m := grpcRequestMessage(r.Operation)
	if m == nil {
		return nil, Errorf(UnsupportedOperation, "%s is not supported over gRPC", r.Operation)
	}
	if err := proto.Unmarshal(r.grpcMsg, m); err != nil {
		return nil, Wrap(InvalidRequest, err, "the gRPC request message could not be decoded")
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, Wrap(Internal, err, "the gRPC request could not be forwarded")
	}
	return jsontext.Value(b), nil
}

// GRPCResponse converts an A2A 1.0 JSON-RPC result of op (for a streaming operation: one
// event) to the binary gRPC response message. Fields the proto does not define are refused
// (InvalidAgentResponse), not dropped: a caller is never sent less than the handler said
// without knowing it. A JSON null result is the empty message.
func GRPCResponse(op Operation, result []byte) ([]byte, *Error) {
	m := grpcResponseMessage(op)
	if m == nil {
		return nil, Errorf(UnsupportedOperation, "%s is not supported over gRPC", op)
	}
	if s := trimSpace(result); len(s) != 0 && string(s) != "null" {
		if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(s, m); err != nil {
			return nil, Wrap(InvalidAgentResponse, err, "the agent's response cannot be expressed as a gRPC message")
		}
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, Wrap(Internal, err, "the gRPC response could not be encoded")
	}
	return b, nil
}

// grpcMessageInfo fills r.Message from a 1.0 SendMessageRequest the way JSON-RPC's is filled:
// the message is read as its ProtoJSON (the params ForwardParams sends) by the same reader, so
// routing and limits see the same parts, media types, skill hint and accepted output modes
// whichever binding carried them, and the same checks (message id, part shapes, depth) apply.
func (r *Request) grpcMessageInfo(lim Limits) *Error {
	params, perr := r.grpcForwardParams()
	if perr != nil {
		return perr
	}
	ps := newParser()
	defer ps.release()
	if err := ps.checkJSON(params, lim.MaxDepth); err != nil {
		return err
	}
	p, err := ps.readObject(params)
	if err != nil {
		return err
	}
	scratch := &Request{Binding: GRPC, Version: V1}
	if err := ps.readSend(V1, p, scratch); err != nil {
		return err
	}
	info := scratch.Message
	info.MessageID, info.TaskID, info.ContextID = r.Message.MessageID, r.Message.TaskID, r.Message.ContextID
	r.Message = info
	return nil
}

// GRPCRequest converts A2A 1.0 JSON-RPC params of op to the binary gRPC request message: the
// inverse of what ForwardParams reads from a gRPC request. Fields the proto does not define are
// refused (InvalidParams), not dropped: a handler is never sent less than admission saw.
func GRPCRequest(op Operation, params []byte) ([]byte, *Error) {
	m := grpcRequestMessage(op)
	if m == nil {
		return nil, Errorf(UnsupportedOperation, "%s is not supported over gRPC", op)
	}
	if s := trimSpace(params); len(s) != 0 && string(s) != "null" {
		if err := protojson.Unmarshal(s, m); err != nil {
			return nil, Wrap(InvalidParams, err, "the request cannot be expressed as a gRPC message")
		}
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, Wrap(Internal, err, "the gRPC request could not be encoded")
	}
	return b, nil
}

// GRPCResult converts a binary gRPC response message of op (for a streaming operation: one
// event) to its A2A 1.0 JSON-RPC result, the message as ProtoJSON: the inverse of
// GRPCResponse. google.protobuf.Empty is the JSON null result.
func GRPCResult(op Operation, msg []byte) (jsontext.Value, *Error) {
	m := grpcResponseMessage(op)
	if m == nil {
		return nil, Errorf(UnsupportedOperation, "%s is not supported over gRPC", op)
	}
	if err := proto.Unmarshal(msg, m); err != nil {
		return nil, Wrap(InvalidAgentResponse, err, "the agent's gRPC response could not be decoded")
	}
	if _, empty := m.(*emptypb.Empty); empty {
		return jsontext.Value("null"), nil
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, Wrap(InvalidAgentResponse, err, "the agent's gRPC response has no JSON form")
	}
	return jsontext.Value(b), nil
}

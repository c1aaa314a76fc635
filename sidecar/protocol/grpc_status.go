package protocol

import (
	"encoding/base64"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
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

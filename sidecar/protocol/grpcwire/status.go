package grpcwire

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"time"

	"github.com/capgate/capgate/sidecar/protocol"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ContentType is the content type of gRPC responses.
const ContentType = "application/grpc"

// CodeOf maps a google.rpc.Code name (protocol.Error.StatusName) to its gRPC status code; an
// unknown name is Internal.
func CodeOf(name string) codes.Code {
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

// Code is e's gRPC status code.
func Code(e *protocol.Error) codes.Code { return CodeOf(e.StatusName()) }

// StatusMessage percent-encodes a grpc-message value as the gRPC HTTP/2 protocol requires: bytes
// outside printable ASCII, and '%'.
func StatusMessage(msg string) string {
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

// Status is e as gRPC status headers (trailers): grpc-status, grpc-message, and
// grpc-status-details-bin holding the google.rpc.Status with e's ErrorInfo, from which a2a-go's
// gRPC client reads the A2A error (the status code alone does not tell TaskNotCancelable from
// UnsupportedOperation).
func Status(e *protocol.Error) [][2]string {
	return StatusHeaders(e.StatusName(), e.Message, e.Reason(), e.Metadata)
}

// StatusHeaders builds the gRPC status headers of an error given by its google.rpc.Code
// name, message and ErrorInfo reason and metadata.
func StatusHeaders(status, message, reason string, metadata map[string]string) [][2]string {
	code := CodeOf(status)
	out := [][2]string{{"grpc-status", strconv.Itoa(int(code))}, {"grpc-message", StatusMessage(message)}}
	st := &rpcstatus.Status{Code: int32(code), Message: message}
	if info, err := anypb.New(&errdetails.ErrorInfo{Reason: reason, Domain: protocol.Domain, Metadata: metadata}); err == nil {
		st.Details = []*anypb.Any{info}
	}
	if secs, err := strconv.ParseInt(metadata[protocol.MetaRetryAfter], 10, 64); err == nil && secs >= 0 && reason == string(protocol.ResourceExhausted) {
		if ri, err := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(secs) * time.Second)}); err == nil {
			st.Details = append(st.Details, ri)
		}
	}
	if b, err := proto.Marshal(st); err == nil {
		out = append(out, [2]string{"grpc-status-details-bin", base64.RawStdEncoding.EncodeToString(b)})
	}
	return out
}

// Refusal is the refusal of a gRPC request (wire.Refuse adds the quota headers every binding's
// refusal carries): a trailers-only response, HTTP 200 with content-type application/grpc and
// e's status headers (Status), no body.
func Refusal(e *protocol.Error) protocol.Refusal {
	return protocol.Refusal{Status: http.StatusOK, Header: append([][2]string{{"content-type", ContentType}}, Status(e)...)}
}

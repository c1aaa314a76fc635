package handler

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/grpcwire"
)

// This file is the gRPC binding (A2A 1.0, lf.a2a.v1.A2AService) over
// net/http's HTTP/2 client, so that a gRPC call passes through the same
// transport wrapping (tracing), limits and timeouts as the others: the
// params are converted to the request message (grpcwire.Request), each
// response message back to ProtoJSON (grpcwire.Result), and a non-OK
// grpc-status with its google.rpc.Status details to the A2A error.

// newGRPCRequest builds the gRPC call for req: POST /lf.a2a.v1.A2AService/<op>
// with one uncompressed message; the A2A headers travel as metadata.
func newGRPCRequest(ctx context.Context, t target, req Request) (*http.Request, *protocol.Error) {
	op, _ := operation(req)
	msg, perr := grpcwire.Request(op, req.Params)
	if perr != nil {
		return nil, perr
	}
	frame := grpcwire.AppendFrame(make([]byte, 0, grpcwire.FrameHeader+len(msg)), msg)
	u := strings.TrimSuffix(t.url, "/") + protocol.GRPCMethod(protocol.V1, op)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(frame))
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the call to the skill's handler could not be built")
	}
	setHeaders(hr.Header, req, false)
	hr.Header.Del("Accept")
	hr.Header.Set("Content-Type", grpcwire.ContentType)
	hr.Header.Set("Te", "trailers")
	return hr, nil
}

// grpcStart checks a gRPC response's headers. A trailers-only response (an
// error before any message) carries its status in the headers.
func (i *Invoker) grpcStart(t target, req Request, resp *http.Response) *protocol.Error {
	if resp.Header.Get("Grpc-Status") != "" {
		return i.grpcStatus(t, req, resp.Header)
	}
	if resp.StatusCode != http.StatusOK {
		return i.invalid(t, req, fmt.Sprintf("a gRPC answer with HTTP %d", resp.StatusCode))
	}
	if !grpcwire.IsContentType(resp.Header.Get("Content-Type")) {
		return i.invalid(t, req, fmt.Sprintf("a gRPC answer with content type %q", clip(mediaType(resp.Header), 64)))
	}
	return nil
}

// errNoStatus is a gRPC answer that ended without a grpc-status.
var errNoStatus = errors.New("no grpc-status")

// grpcEnd reads the status a gRPC call ended with: nil for OK.
func (i *Invoker) grpcEnd(t target, req Request, resp *http.Response) *protocol.Error {
	if resp.Trailer.Get("Grpc-Status") == "" {
		return i.invalid(t, req, errNoStatus.Error())
	}
	return i.grpcStatus(t, req, resp.Trailer)
}

// grpcStatus turns grpc-status, grpc-message and grpc-status-details-bin into
// the client's error (nil for OK), as statusError does for HTTP+JSON.
func (i *Invoker) grpcStatus(t target, req Request, h http.Header) *protocol.Error {
	n, err := strconv.Atoi(h.Get("Grpc-Status"))
	if err != nil || n < 0 || n > 16 {
		return i.invalid(t, req, "a malformed grpc-status")
	}
	if n == 0 {
		return nil
	}
	msg, err := url.PathUnescape(h.Get("Grpc-Message"))
	if err != nil {
		msg = ""
	}
	s := upstreamStatus{status: grpcStatusName(codes.Code(n)), message: msg}
	if raw := h.Get("Grpc-Status-Details-Bin"); raw != "" {
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(raw, "="))
		var st rpcstatus.Status
		if err == nil && proto.Unmarshal(b, &st) == nil {
			if st.GetMessage() != "" {
				s.message = st.GetMessage()
			}
			for _, d := range st.GetDetails() {
				var info errdetails.ErrorInfo
				if d.MessageIs(&info) && d.UnmarshalTo(&info) == nil && (info.GetDomain() == "" || info.GetDomain() == protocol.Domain) {
					s.reason, s.metadata = info.GetReason(), clippedMetadata(info.GetMetadata())
					break
				}
			}
		}
	}
	return i.statusError(t, req, s)
}

// grpcStatusName is the google.rpc.Code name of a gRPC status code, as
// statusError reads it: NotFound → NOT_FOUND.
func grpcStatusName(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// clippedMetadata cleans ErrorInfo metadata as errorInfoMetadata does.
func clippedMetadata(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if k = clean(k, 64); k == "" {
			continue
		}
		out[k] = clean(v, 256)
		if len(out) == maxErrorMetadata {
			break
		}
	}
	return out
}

// errFrameTooLarge is a gRPC message over the limit.
var errFrameTooLarge = errors.New("gRPC message larger than the limit")

// errCompressed is a compressed gRPC message: capgate asks for none.
var errCompressed = errors.New("compressed gRPC message")

// nextFrame reads one length-prefixed message of at most max bytes; io.EOF
// at a message boundary ends the stream.
func nextFrame(r io.Reader, max int) ([]byte, error) {
	var hdr [grpcwire.FrameHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("truncated gRPC message: %w", err)
		}
		return nil, err
	}
	if hdr[0] != 0 {
		return nil, errCompressed
	}
	n, _ := grpcwire.MessageLength(hdr[:])
	if n > int64(max) {
		return nil, errFrameTooLarge
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, fmt.Errorf("truncated gRPC message: %w", err)
	}
	return msg, nil
}

// grpcUnary reads a whole unary gRPC answer: exactly one message, then OK.
func (i *Invoker) grpcUnary(t target, req Request, resp *http.Response, body []byte) (jsontext.Value, *protocol.Error) {
	if perr := i.grpcStart(t, req, resp); perr != nil {
		return nil, perr
	}
	if perr := i.grpcEnd(t, req, resp); perr != nil {
		return nil, perr
	}
	r := bytes.NewReader(body)
	msg, err := nextFrame(r, MaxResponseBytes)
	if err != nil {
		return nil, i.invalid(t, req, "gRPC response: "+frameProblem(err))
	}
	if r.Len() != 0 {
		return nil, i.invalid(t, req, "more than one gRPC response message")
	}
	op, _ := operation(req)
	result, perr := grpcwire.Result(op, msg)
	if perr != nil {
		return nil, i.invalid(t, req, perr.Error())
	}
	return result, nil
}

// frameProblem says what was wrong with a frame, for logs.
func frameProblem(err error) string {
	switch {
	case errors.Is(err, io.EOF):
		return "no message"
	case errors.Is(err, errFrameTooLarge):
		return "message larger than the limit"
	default:
		return err.Error()
	}
}
